"""RRD's Extend and ORPooling (forks/ssd/rrd.py): channels repeated per orientation, and the
max over each orientation group."""
import numpy as np
import pytest

from caffepy.errors import NetError, ShapeError
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

X = np.random.default_rng(0).standard_normal((2, 3, 4, 5))


def test_forward_repeats_each_channel():
    layer = make_layer('type: "Extend" orn_param { orientations: 4 }')
    bottom, top = make_blobs([X]), make_blobs(1)
    (y,) = run_layer(layer, bottom, top)
    assert y.shape == (2, 12, 4, 5)
    for n in range(2):
        for c in range(3):
            for k in range(4):
                np.testing.assert_array_equal(y[n, c * 4 + k], X[n, c])
    layer.backward(top, [False], bottom)
    with pytest.raises(NetError, match="backward is not implemented"):
        layer.backward(top, [True], bottom)


def test_refusals():
    with pytest.raises(NetError, match="greater than 1, got 1"):
        make_layer('type: "Extend"').setup(make_blobs([X]), make_blobs(1))
    with pytest.raises(ShapeError, match="N x C x H x W"):
        make_layer('type: "Extend" orn_param { orientations: 2 }').setup(
            make_blobs([X[0]]), make_blobs(1))


NET = """
input: "data" input_shape { dim: 1 dim: 3 dim: 6 dim: 6 }
layer {
  name: "extend"
  type: "Extend"
  bottom: "data"
  top: "extend"
  orn_param {
    orientations: 8
  }
}
layer { name: "conv1_1" type: "Convolution" bottom: "extend" top: "conv1_1"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
"""


def test_excerpt_net_strict_read():
    param = proto_io.read_net(NET)                  # strict reading: orn_param is computed
    assert param.layer[1].orn_param.orientations == 8
    assert caffe_pb2.ORNParameter().orientations == 1
    net = Net(param, caffe_pb2.TEST)
    net.blobs["data"].data[...] = np.arange(108).reshape(1, 3, 6, 6)
    net.forward()
    assert net.blobs["extend"].shape == (1, 24, 6, 6)
    assert net.blobs["conv1_1"].shape == (1, 4, 6, 6)
    extend = net.blobs["extend"].data
    for c in range(24):
        np.testing.assert_array_equal(extend[0, c], np.arange(36).reshape(6, 6) + 36 * (c // 8))


def orpool_ref(x, o):
    """RRD's ORPoolingLayer::Forward_cpu as loops: (top, index of the chosen bottom channel)."""
    n_, c_, h_, w_ = x.shape
    y = np.zeros((n_, c_ // o, h_, w_))
    idx = np.full(y.shape, -1)
    for n in range(n_):
        for c in range(c_ // o):
            for h in range(h_):
                for w in range(w_):
                    best = -999999.0
                    for k in range(o):
                        if x[n, c * o + k, h, w] > best:
                            best, idx[n, c, h, w] = x[n, c * o + k, h, w], c * o + k
                    y[n, c, h, w] = best
    return y, idx


def test_orpooling_forward_backward_match_loops():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 12, 3, 4))
    x[0, 4:8, 0, 0] = 0.5                        # a tie: the first channel of the group wins
    x[1, 0:4, 1, 1] = -2e6                       # all below the fork's floor
    layer = make_layer('type: "ORPooling" orn_param { orientations: 4 }')
    bottom, top = make_blobs([x]), make_blobs(1)
    (y,) = run_layer(layer, bottom, top)
    want, idx = orpool_ref(x, 4)
    assert y.shape == (2, 3, 3, 4)
    np.testing.assert_array_equal(y, want)
    assert y[1, 0, 1, 1] == -999999.0
    dy = rng.standard_normal(y.shape)
    top[0].diff[...] = dy
    layer.backward(top, [True], bottom)
    gx = np.zeros(x.shape)
    for n, c, h, w in np.ndindex(*y.shape):
        if idx[n, c, h, w] >= 0:
            gx[n, idx[n, c, h, w], h, w] = dy[n, c, h, w]
    np.testing.assert_array_equal(bottom[0].diff, gx)
    assert gx[0, 4, 0, 0] == dy[0, 1, 0, 0] and not gx[0, 5:8, 0, 0].any()


def test_orpooling_gradient():
    x = np.random.default_rng(2).permutation(48).reshape(1, 8, 2, 3) * 0.1   # distinct: no ties
    check_layer_gradient(make_layer('type: "ORPooling" orn_param { orientations: 2 }'),
                         make_blobs([x]), make_blobs(1), stepsize=1e-3)


def test_orpooling_refusals():
    with pytest.raises(NetError, match="greater than 1, got 1"):
        make_layer('type: "ORPooling"').setup(make_blobs([X]), make_blobs(1))
    with pytest.raises(ShapeError, match="not a multiple of orientations 2"):
        make_layer('type: "ORPooling" orn_param { orientations: 2 }').setup(
            make_blobs([X]), make_blobs(1))
    with pytest.raises(ShapeError, match="N x C x H x W"):
        make_layer('type: "ORPooling" orn_param { orientations: 3 }').setup(
            make_blobs([X[0]]), make_blobs(1))


ORPOOL_NET = """
input: "conv4_3_norm" input_shape { dim: 1 dim: 16 dim: 3 dim: 3 }
layer {
  name: "conv4_3_norm_mbox_conf_orpooling"
  type: "ORPooling"
  bottom: "conv4_3_norm"
  top: "conv4_3_norm_mbox_conf_orpooling"
  orn_param {
    orientations: 8
  }
}
layer { name: "conv4_3_norm_mbox_conf" type: "Convolution"
  bottom: "conv4_3_norm_mbox_conf_orpooling" top: "conv4_3_norm_mbox_conf"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
"""


def test_orpooling_excerpt_net():
    net = Net(proto_io.read_net(ORPOOL_NET), caffe_pb2.TEST)
    x = np.random.default_rng(3).standard_normal((1, 16, 3, 3))
    net.blobs["conv4_3_norm"].data[...] = x
    net.forward()
    pooled = net.blobs["conv4_3_norm_mbox_conf_orpooling"]
    assert pooled.shape == (1, 2, 3, 3)
    np.testing.assert_allclose(pooled.data, np.stack([x[0, :8].max(0), x[0, 8:].max(0)])[None],
                               rtol=1e-6)
    assert net.blobs["conv4_3_norm_mbox_conf"].shape == (1, 4, 3, 3)
