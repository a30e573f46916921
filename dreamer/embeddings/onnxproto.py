"""The few ONNX protobuf messages a model graph needs, written by hand: no ``onnx`` package.

ONNX models are protobuf messages (``onnx.proto``). Dreamer builds one graph, the sentence encoder
(:mod:`dreamer.embeddings.bertgraph`), and hands its bytes to onnxruntime, so it needs only to
*write* a handful of message types: a model, a graph, nodes with int, float and int-list
attributes, float32 and int64 tensors, and value infos with symbolic dimensions. The ``onnx``
package would add 20 MiB to the daemon's memory and half a second to its first run for that; this
module is checked against its parser and checker in the tests instead.

A message is a list of byte buffers (:data:`Chunks`); a tensor's data is a view of its array, not a
copy, so the model's bytes are assembled once, by :func:`serialise`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

Chunks = list[bytes | memoryview]

#: TensorProto.DataType values used here.
FLOAT, INT64 = 1, 7
#: AttributeProto.AttributeType values used here.
_ATTR_FLOAT, _ATTR_INT, _ATTR_INTS = 1, 2, 7
_VARINT, _BYTES, _FIXED32 = 0, 2, 5
_U64 = (1 << 64) - 1


def _varint(value: int) -> bytes:
    """A protobuf varint; a negative int64 is written as its 64-bit two's complement (10 bytes)."""
    value &= _U64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, value: int) -> Chunks:
    return [_key(field, _VARINT), _varint(value)]


def _bytes(field: int, payload: Chunks) -> Chunks:
    return [_key(field, _BYTES), _varint(sum(memoryview(b).nbytes for b in payload)), *payload]


def _text(field: int, value: str) -> Chunks:
    return _bytes(field, [value.encode("utf-8")])


def _repeated(field: int, messages: Iterable[Chunks]) -> Chunks:
    out: Chunks = []
    for message in messages:
        out += _bytes(field, message)
    return out


def attribute(name: str, value: int | float | Sequence[int]) -> Chunks:
    """An AttributeProto: an int, a float or a list of ints (bool is refused: say 0 or 1)."""
    if isinstance(value, bool):
        raise TypeError(f"attribute {name!r}: a bool; write 0 or 1")
    out = _text(1, name)
    if isinstance(value, int):
        return out + _int(3, value) + _int(20, _ATTR_INT)
    if isinstance(value, float):
        return [*out, _key(2, _FIXED32), struct.pack("<f", value), *_int(20, _ATTR_FLOAT)]
    ints: Chunks = []
    for item in value:
        ints += _int(8, int(item))
    return out + ints + _int(20, _ATTR_INTS)


def node(
    op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attributes: int | float | Sequence[int]
) -> Chunks:
    """A NodeProto of the default domain."""
    out: Chunks = []
    for name in inputs:
        out += _text(1, name)
    for name in outputs:
        out += _text(2, name)
    out += _text(4, op_type)
    return out + _repeated(5, (attribute(k, v) for k, v in attributes.items()))


def tensor(name: str, array: NDArray[np.float32] | NDArray[np.int64]) -> Chunks:
    """A TensorProto holding ``array`` (float32 or int64) as raw little-endian data, not copied."""
    import numpy as np

    kinds = {np.dtype(np.float32): (FLOAT, "<f4"), np.dtype(np.int64): (INT64, "<i8")}
    if array.dtype not in kinds:
        raise TypeError(f"tensor {name!r}: dtype {array.dtype} (float32 or int64 only)")
    kind, wanted = kinds[array.dtype]
    data: Any = np.ascontiguousarray(array, dtype=wanted).reshape(array.shape)  # a 0-d array stays 0-d
    out: Chunks = []
    for dim in data.shape:
        out += _int(1, int(dim))
    out += _int(2, kind) + _text(8, name)
    return out + _bytes(9, [memoryview(data.reshape(-1)).cast("B")])


def value_info(name: str, elem_type: int, dims: Sequence[int | str]) -> Chunks:
    """A ValueInfoProto of a tensor; a ``str`` dimension is symbolic (a batch, a length)."""
    shape = _repeated(1, (_text(2, d) if isinstance(d, str) else _int(1, d) for d in dims))
    tensor_type = _int(1, elem_type) + _bytes(2, shape)
    return _text(1, name) + _bytes(2, _bytes(1, tensor_type))


def model(
    *,
    name: str,
    nodes: Iterable[Chunks],
    initializers: Iterable[Chunks],
    inputs: Iterable[Chunks],
    outputs: Iterable[Chunks],
    opset: int,
    ir_version: int = 8,
    producer: str = "dreamer",
) -> Chunks:
    """A ModelProto of one graph on the default operator set ``opset``."""
    graph = (
        _repeated(1, nodes)
        + _text(2, name)
        + _repeated(5, initializers)
        + _repeated(11, inputs)
        + _repeated(12, outputs)
    )
    opset_id = _text(1, "") + _int(2, opset)
    return _int(1, ir_version) + _text(2, producer) + _bytes(7, graph) + _bytes(8, opset_id)


def serialise(chunks: Chunks) -> bytes:
    """The message's bytes, assembled in one copy."""
    return b"".join(chunks)
