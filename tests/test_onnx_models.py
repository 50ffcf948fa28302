"""The nets of models/ round-trip: random weights saved to a .caffemodel, exported with
``caffepy.onnx.export(prototxt, weights=...)`` and run in onnxruntime, <= 1e-4 relative on the
output and on the logits feeding the output Softmax (random weights saturate the Softmax).
Batch 1; the weights net is freed before the export net is built (VGG16: 528 MB of weights)."""
import gc
import os

import pytest

from tests.test_onnx_zoo import softmax_inputs

pytest.importorskip("onnxruntime")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["googlenet", "resnet50", "mobilenet_v1", "squeezenet1_1", "vgg16", "caffenet"]


def _random_weights(prototxt, path):
    from caffepy import zoo
    from caffepy.zoo import run as zoo_run
    from caffepy.net import Net
    from caffepy.proto import caffe_pb2, io as proto_io
    param = zoo.constant_fillers(proto_io.read_net(prototxt))
    net = Net(param, caffe_pb2.TEST)
    zoo.randomize_params(net, 0)
    for layer in net.layers:        # biases and per-channel factors random too
        for blob in layer.blobs:
            if blob.data.ndim == 1 and layer.layer_param.type != "BatchNorm":
                blob.data[...] = 0.1 * zoo_run._pool(1)[:blob.count]
    net.save(str(path))


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_models_roundtrip(name, tmp_path):
    from caffepy import onnx as caffe_onnx
    prototxt = os.path.join(ROOT, "models", name, "%s_deploy.prototxt" % name)
    weights, out = tmp_path / "w.caffemodel", tmp_path / "m.onnx"
    _random_weights(prototxt, weights)
    gc.collect()
    net = caffe_onnx.load_net(prototxt, str(weights))
    weights.unlink()
    model = caffe_onnx.export(net, str(out), extra_outputs=softmax_inputs(net))
    assert out.stat().st_size > 0
    errors = caffe_onnx.compare(net, model)
    assert len(errors) == 2 and max(errors.values()) <= 1e-4, errors
