"""caffepy.onnx's refusals and errors: every one a single line naming the layer (or the net),
never a raw traceback and never a model that computes another layer's function."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from caffepy import onnx as caffe_onnx  # noqa: E402
from tests.test_onnx import make_net  # noqa: E402


@pytest.mark.parametrize("body,words", [
    ('layer { name: "ps" type: "PSROIPooling" bottom: "data" bottom: "rois" top: "o" '
     'psroi_pooling_param { spatial_scale: 1 output_dim: 1 group_size: 1 } }', "(PSROIPooling)"),
])
def test_refusals_are_one_line(body, words):
    shapes = [("data", (1, 1, 4, 4)), ("rois", (1, 5))]
    try:
        net = make_net(body, shapes)
    except Exception as e:      # a layer caffepy cannot build here is not the exporter's concern
        pytest.skip("caffepy cannot build it: %s" % e)
    with pytest.raises(caffe_onnx.ExportError) as info:
        caffe_onnx.to_model(net)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_check_names_an_onnxruntime_failure_in_one_line(monkeypatch):
    import importlib
    from caffepy.onnx.builder import ExportError
    check_mod = importlib.import_module("caffepy.onnx.check")
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail
    net = make_net('layer { name: "r" type: "ReLU" bottom: "data" top: "r" }')
    model = caffe_onnx.to_model(net)

    def failing(model):
        raise Fail("[ONNXRuntimeError] : 1 : FAIL : Non-zero status code\n returned")
    monkeypatch.setattr(check_mod, "session", failing)
    with pytest.raises(ExportError, match=r"^onnxruntime cannot run the exported model: "
                                          r"\[ONNXRuntimeError\] : 1 : FAIL : Non-zero status "
                                          r"code returned$"):
        check_mod.check(net, model)


def test_a_model_over_the_protobuf_limit_is_a_one_line_error(monkeypatch):
    import importlib
    from google.protobuf.message import EncodeError
    from caffepy.onnx.builder import ExportError, Graph
    export = importlib.import_module("caffepy.onnx.export")
    net = make_net('layer { name: "r" type: "ReLU" bottom: "data" top: "r" }')

    def refuse(self, name, version):
        raise EncodeError("Failed to serialize proto")
    monkeypatch.setattr(Graph, "to_model", refuse)
    with pytest.raises(ExportError, match="cannot be written: Failed to serialize proto$"):
        export.to_model(net)
    real = export.build_graph

    def huge(*a, **k):          # 2 GiB of weights without the memory: a broadcast view
        g = real(*a, **k)
        g.initializers.append(("w", np.broadcast_to(np.float32(0), (2 ** 29 + 1,))))
        return g
    monkeypatch.setattr(export, "build_graph", huge)
    with pytest.raises(ExportError, match="its 2147483652 bytes of weights are over protobuf's "
                                          "2 GiB message limit$"):
        export.to_model(net)


def test_a_converter_that_does_not_fit_the_layer_class_is_a_one_line_refusal(monkeypatch):
    # a fork's variant of a type name whose converter reads another class's attributes
    from caffepy.onnx import builder
    from caffepy.onnx.builder import ExportError
    net = make_net('layer { name: "r" type: "ReLU" bottom: "data" top: "r" }')

    def reads_other(ctx):
        return ctx.layer.across_spatial
    monkeypatch.setitem(builder.CONVERTERS, "ReLU", reads_other)
    with pytest.raises(ExportError, match=r"^layer 'r' \(ReLU\): the ONNX converter for type "
                                          r"'ReLU' does not handle caffepy's ReLULayer "
                                          r"\(AttributeError: "):
        caffe_onnx.to_model(net)


@pytest.mark.parametrize("body, cls", [
    ('layer { name: "s" type: "Softmax" bottom: "data" top: "s" softmax_param '
     '{ temperature: 2 } }', "TemperatureSoftmaxLayer"),
    ('layer { name: "d" type: "Dropout" bottom: "data" top: "d" dropout_param '
     '{ sample_weights_test: true } }', "SampledDropoutLayer")])
def test_a_fork_variant_without_a_converter_is_refused_not_converted_as_the_type(body, cls):
    # the type's converter would compute BVLC's layer (no temperature, no test-time dropout)
    from caffepy.onnx.builder import ExportError
    with pytest.raises(ExportError, match="caffepy's %s \\(a Caffe fork's layer under this type "
                                          "name, caffepy.forks" % cls):
        caffe_onnx.to_model(make_net(body))


def test_a_fork_variant_of_a_refused_type_gets_the_types_reason():
    # SegNet's class-weighted SoftmaxWithLoss: refused as every loss is, for its labels
    from caffepy.onnx.builder import ExportError
    net = make_net('layer { name: "l" type: "SoftmaxWithLoss" bottom: "data" bottom: "lab" '
                   'top: "l" loss_param { weight_by_label_freqs: true class_weighting: 1 '
                   'class_weighting: 1 class_weighting: 1 } }',
                   (("data", (2, 3, 7, 9)), ("lab", (2, 1, 7, 9))))
    assert type(net.layers[2]).__name__ == "ClassWeightedSoftmaxWithLossLayer"
    with pytest.raises(ExportError, match="needs labels: export the deploy net$"):
        caffe_onnx.to_model(net)
