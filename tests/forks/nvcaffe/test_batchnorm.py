"""NVCaffe: BatchNorm with built-in scale and bias, and a DetectNet-style net of NVCaffe fields."""
import numpy as np
import pytest

from caffepy.net import Net
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

BN = ('type: "BatchNorm" batch_norm_param { scale_bias: true %s }')


def _ref(x, scale, bias, eps=1e-5):
    mu = x.mean(axis=(0, 2, 3), keepdims=True)
    var = x.var(axis=(0, 2, 3), keepdims=True)
    return scale.reshape(1, -1, 1, 1) * (x - mu) / np.sqrt(var + eps) + bias.reshape(1, -1, 1, 1)


@pytest.mark.parametrize("phase", [0, 1])
def test_scale_bias_forward_matches_formula(phase):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5)) * 2 + 1
    layer = make_layer(BN % "use_global_stats: false", phase=phase)
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    assert len(layer.blobs) == 5 and [b.shape for b in layer.blobs[3:]] == [(3,), (3,)]
    assert list(layer.param_propagate_down) == [False, False, False, True, True]
    layer.blobs[3].data[...] = [0.5, 2.0, -1.0]
    layer.blobs[4].data[...] = [0.1, -0.2, 0.3]
    (y,) = run_layer(layer, bottom, top)
    np.testing.assert_allclose(y, _ref(x, layer.blobs[3].data, layer.blobs[4].data), rtol=1e-10)


def test_fillers_imply_scale_bias_and_global_stats_path():
    layer = make_layer('type: "BatchNorm" batch_norm_param { use_global_stats: true '
                       'scale_filler { type: "constant" value: 3 } bias_filler { type: "constant" '
                       'value: -1 } }')
    x = np.arange(8.0).reshape(1, 2, 2, 2)
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    layer.blobs[0].data[...] = [1.0, 2.0]     # NVCaffe stores mean and variance themselves ...
    layer.blobs[1].data[...] = [4.0, 9.0]
    layer.blobs[2].data[...] = 1.0            # ... with the third blob at 1
    (y,) = run_layer(layer, bottom, top)
    want = 3 * (x - np.array([1.0, 2.0]).reshape(1, 2, 1, 1)) / np.sqrt(
        np.array([4.0, 9.0]).reshape(1, 2, 1, 1) + 1e-5) - 1
    np.testing.assert_allclose(y, want, rtol=1e-10)
    layer.blobs[3].data[...] = [0.7, -1.3]
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


def test_scale_bias_gradient_batch_stats():
    rng = np.random.default_rng(1)
    layer = make_layer(BN % "use_global_stats: false")
    bottom = make_blobs([rng.standard_normal((2, 3, 2, 3))])
    layer.setup(bottom, make_blobs(1))
    layer.blobs[3].data[...] = rng.standard_normal(3)
    layer.blobs[4].data[...] = rng.standard_normal(3)
    check_layer_gradient(layer, bottom, make_blobs(1))


NVCAFFE_NET = """name: "nv_tiny"
default_forward_type: FLOAT16 default_backward_type: FLOAT16
default_forward_math: FLOAT global_grad_scale: 8 eltwise_mem_sharing: true reduce_buckets: 2
layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } shape { dim: 1 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  forward_type: FLOAT16 backward_type: FLOAT16 cudnn_math_override: 1
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 bias_term: false
    weight_filler { type: "msra" } conv_algos_override: "1,-1,-1"
    cudnn_convolution_algo_seeker: FINDEX } }
layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1"
  batch_norm_param { scale_bias: true moving_average_fraction: 0.9
    scale_filler { type: "constant" value: 1 } bias_filler { type: "constant" value: 0 } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool" type: "Pooling" bottom: "conv1" top: "pool"
  pooling_param { pool: AVE global_pooling: true } }
layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc"
  inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
"""


def test_nvcaffe_net_forward_and_one_training_step():
    net = Net(NVCAFFE_NET, phase=0)
    rng = np.random.default_rng(2)
    net.blobs["data"].data[...] = rng.standard_normal((1, 3, 8, 8))
    net.blobs["label"].data[...] = 3
    loss0 = float(net.forward()["loss"])
    net.backward()
    bn = net.layer_dict["bn1"]
    assert len(bn.blobs) == 5 and np.abs(bn.blobs[3].diff).sum() > 0
    for p in net.learnable_params:            # one SGD step, lr 0.1
        p.data[...] -= 0.1 * p.diff
    assert float(net.forward()["loss"]) < loss0
    test = Net(NVCAFFE_NET, phase=1)
    test.blobs["data"].data[...] = 1.0
    assert np.isfinite(test.forward()["loss"])


def test_raw_fp16_blob_round_trip(tmp_path):
    """An NVCaffe caffemodel keeps fp16 weights as raw bytes: they load into a net."""
    from caffepy.proto import caffe_pb2, io
    net = Net(NVCAFFE_NET, phase=1)
    w = np.arange(4 * 3 * 3 * 3, dtype=np.float16).reshape(4, 3, 3, 3) / 64
    model = caffe_pb2.NetParameter(name="nv_tiny")
    layer = model.layer.add(name="conv1", type="Convolution")
    bp = layer.blobs.add()
    bp.shape.dim.extend(w.shape)
    bp.raw_data_type = caffe_pb2.FLOAT16
    bp.raw_data = w.tobytes()
    path = tmp_path / "nv.caffemodel"
    io.write_binary(model, path)
    net.copy_from(str(path))
    np.testing.assert_array_equal(net.params["conv1"][0].data, w.astype(np.float32))
    bp.raw_data = w.tobytes()[:-2]
    io.write_binary(model, path)
    with pytest.raises(Exception, match="raw data holds 107 values"):
        net.copy_from(str(path))
