"""The sentence encoder run by onnxruntime: the numpy encoder's vectors, two to three times faster.

:func:`dreamer.embeddings.bertgraph.bert_graph` turns the model's weights into an ONNX graph, and an
onnxruntime session runs it on the CPU, with the graph optimisations that fuse layer norms and
GELUs. The vectors equal :class:`dreamer.embeddings.minilm.BertEncoder`'s to within 1e-6 (the tests
hold them to 1e-4), so the model's id, and every vector stored under it, is the same whichever
runtime wrote it. Once the session holds the weights, the numpy arrays are no longer referenced.

One thread by default, for the reason :mod:`dreamer.embeddings.threads` gives; ``OMP_NUM_THREADS``
set by the operator raises it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

from dreamer.embeddings.bertgraph import INPUTS, OUTPUT, bert_graph
from dreamer.embeddings.minilm import EncoderShape
from dreamer.embeddings.threads import configured_threads

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


def onnxruntime_installed() -> bool:
    """Whether onnxruntime can be imported, found without importing it."""
    try:
        return importlib.util.find_spec("onnxruntime") is not None
    except (ImportError, ValueError):
        return False


class OnnxEncoder:
    """Mean-pooled, normalised sentence vectors from token ids, by an onnxruntime session."""

    def __init__(
        self,
        weights: MutableMapping[str, NDArray[Any]],
        shape: EncoderShape,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        import onnxruntime as ort

        self.shape = shape
        self.dimension = shape.hidden
        self.vocab_size = int(weights["embeddings.word_embeddings.weight"].shape[0])
        model = bert_graph(weights, shape)
        weights.clear()  # the session copies what it needs; the arrays would be held twice
        options = ort.SessionOptions()
        options.intra_op_num_threads = configured_threads(environ)
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Fatal only: its shape-merging warnings are not the operator's, and an error it would print
        # is raised as well, and reported once, by Dreamer.
        options.log_severity_level = 4
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        del model

    def encode(self, ids: NDArray[Any], mask: NDArray[Any]) -> NDArray[np.float32]:
        """Token ids and attention mask, both (batch, length) → unit vectors (batch, hidden)."""
        import numpy as np

        feed = {INPUTS[0]: np.asarray(ids, dtype=np.int64), INPUTS[1]: np.asarray(mask, dtype=np.int64)}
        out = self._session.run([OUTPUT], feed)[0]
        vectors: NDArray[np.float32] = np.asarray(out, dtype=np.float32)
        return vectors
