"""The hand-written ONNX messages are what the ``onnx`` package reads and onnxruntime runs."""

from __future__ import annotations

import numpy as np
import pytest

from dreamer.embeddings import onnxproto as pb

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _tiny_model(opset: int = 18) -> bytes:
    """y = Transpose(x + bias, perm) on float32, with a symbolic batch dimension."""
    bias = np.array([[1.5, -2.0, 3.25]], dtype=np.float32)
    return pb.serialise(
        pb.model(
            name="tiny",
            nodes=[
                pb.node("Add", ["x", "bias"], ["sum"]),
                pb.node("Transpose", ["sum"], ["y"], perm=[1, 0]),
            ],
            initializers=[pb.tensor("bias", bias)],
            inputs=[pb.value_info("x", pb.FLOAT, ["batch", 3])],
            outputs=[pb.value_info("y", pb.FLOAT, [3, "batch"])],
            opset=opset,
        )
    )


class TestMessages:
    def test_a_model_parses_and_passes_the_checker(self) -> None:
        """The bytes parse as a ModelProto whose graph, opset, inputs and outputs are the ones written,
        and onnx's own checker finds nothing wrong."""
        model = onnx.ModelProto.FromString(_tiny_model())
        onnx.checker.check_model(model)
        assert model.ir_version == 8 and model.producer_name == "dreamer"
        assert [(o.domain, o.version) for o in model.opset_import] == [("", 18)]
        assert [n.op_type for n in model.graph.node] == ["Add", "Transpose"]
        dims = model.graph.input[0].type.tensor_type.shape.dim
        assert (dims[0].dim_param, dims[1].dim_value) == ("batch", 3)
        out = model.graph.output[0].type.tensor_type
        assert out.elem_type == onnx.TensorProto.FLOAT
        assert (out.shape.dim[0].dim_value, out.shape.dim[1].dim_param) == (3, "batch")

    def test_onnxruntime_runs_it(self) -> None:
        """The model runs and computes what it says, for any batch size."""
        session = ort.InferenceSession(_tiny_model(), providers=["CPUExecutionProvider"])
        x = np.arange(12, dtype=np.float32).reshape(4, 3)
        (y,) = session.run(["y"], {"x": x})
        assert np.array_equal(y, (x + np.array([1.5, -2.0, 3.25], dtype=np.float32)).T)

    def test_attributes_of_every_kind_keep_their_values(self) -> None:
        """Ints (negative ones as int64), floats, int lists: each read back as written, with its type."""
        raw = pb.serialise(pb.node("X", ["a"], ["b"], axis=-1, big=2**40, epsilon=1e-12, perm=[0, -2, 3]))
        node = onnx.NodeProto.FromString(raw)
        got = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert got["axis"] == -1 and got["big"] == 2**40
        assert got["epsilon"] == pytest.approx(1e-12, rel=1e-6)
        assert list(got["perm"]) == [0, -2, 3]
        kinds = {a.name: a.type for a in node.attribute}
        assert kinds == {
            "axis": onnx.AttributeProto.INT,
            "big": onnx.AttributeProto.INT,
            "epsilon": onnx.AttributeProto.FLOAT,
            "perm": onnx.AttributeProto.INTS,
        }

    def test_tensors_hold_their_data_shape_and_type(self) -> None:
        """Float32 and int64 arrays, non-contiguous ones included, come back equal, shape and type."""
        floats = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]  # a strided view
        ints = np.array([0, -1, 2**62], dtype=np.int64)
        for array in (floats, ints, np.float32(7.0).reshape(())):
            proto = onnx.TensorProto.FromString(pb.serialise(pb.tensor("t", array)))
            back = onnx.numpy_helper.to_array(proto)
            assert back.dtype == array.dtype and back.shape == array.shape
            assert np.array_equal(back, array)

    def test_unicode_names_survive(self) -> None:
        """A name is UTF-8 with its length in bytes, not characters."""
        raw = pb.serialise(pb.tensor("gewicht-größe-ß", np.zeros(2, np.float32)))
        proto = onnx.TensorProto.FromString(raw)
        assert proto.name == "gewicht-größe-ß"


class TestRefusals:
    def test_a_bool_attribute_is_refused(self) -> None:
        """True would be written as the int 1 without a word; it is refused, naming the attribute."""
        with pytest.raises(TypeError, match="keepdims"):
            pb.node("ReduceSum", ["a"], ["b"], keepdims=True)

    def test_other_dtypes_are_refused(self) -> None:
        """Only float32 and int64 tensors are written; float64 is refused, not silently narrowed."""
        with pytest.raises(TypeError, match="float64"):
            pb.tensor("w", np.zeros(3, dtype=np.float64))

    def test_a_broken_graph_is_refused_by_the_runtime(self) -> None:
        """A node reading a name nothing defines fails at load, as an error, not as a crash."""
        raw = pb.serialise(
            pb.model(
                name="broken",
                nodes=[pb.node("Add", ["x", "nowhere"], ["y"])],
                initializers=[],
                inputs=[pb.value_info("x", pb.FLOAT, [2])],
                outputs=[pb.value_info("y", pb.FLOAT, [2])],
                opset=18,
            )
        )
        with pytest.raises(Exception, match="nowhere"):
            ort.InferenceSession(raw, providers=["CPUExecutionProvider"])
