import logging

import numpy as np
import pytest

from caffepy.forks.misc.ewma_bn import EwmaBNLayer
from caffepy.forks.segmentation.segnet import SegNetBNLayer
from caffepy.layers.normalization import BNLayer
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import strict_excerpt

FILLERS = ('scale_filler { type: "constant" value: 2 } '
           'shift_filler { type: "constant" value: 0.5 } ')


def _bn(fields, phase=caffe_pb2.TRAIN):
    return make_layer('name: "bn" type: "BN" bn_param { %s %s }' % (FILLERS, fields), phase=phase)


def test_variant_choice():
    assert isinstance(_bn("moving_average: true"), EwmaBNLayer)
    assert isinstance(_bn("var_eps: 1e-5"), EwmaBNLayer)
    assert isinstance(make_layer('type: "BN" bn_param { decay: 0.9 }'), EwmaBNLayer)
    assert isinstance(_bn(""), SegNetBNLayer)              # SegNet's fields only: unchanged
    assert isinstance(make_layer('type: "BN"'), BNLayer)
    assert not isinstance(make_layer('type: "BN"'), EwmaBNLayer)


def test_train_forward_and_history_by_hand():
    x = np.array([1.0, 3.0, 5.0, 7.0]).reshape(2, 1, 1, 2)    # one channel: mean 4, var 5
    layer = _bn("var_eps: 1 decay: 0.75")
    y = run_layer(layer, make_blobs([x]), make_blobs(1))[0]
    np.testing.assert_allclose(y.reshape(-1), 2 * (x.reshape(-1) - 4) / np.sqrt(6) + 0.5,
                               rtol=1e-6)
    # history <- (1 - decay) batch + decay history, from 0
    assert layer.blobs[2].data.item() == pytest.approx(0.25 * 4)
    assert layer.blobs[3].data.item() == pytest.approx(0.25 * 5)
    layer.forward(make_blobs([x]), make_blobs(1))
    assert layer.blobs[2].data.item() == pytest.approx(0.25 * 4 + 0.75 * 1.0)
    assert [b.shape for b in layer.blobs] == [(1, 1, 1, 1)] * 4
    assert [(p.lr_mult, p.decay_mult) for p in layer.layer_param.param[2:]] == [(0, 0), (0, 0)]


def test_test_phase_moving_average_true_uses_the_history():
    x = np.array([1.0, 3.0, 5.0, 7.0]).reshape(2, 1, 1, 2)
    layer = _bn("moving_average: true var_eps: 0", phase=caffe_pb2.TEST)
    layer.setup(make_blobs([x]), make_blobs(1))
    layer.blobs[2].data[...] = 2.0
    layer.blobs[3].data[...] = 4.0
    y = run_layer(layer, make_blobs([x]), make_blobs(1))[0]
    np.testing.assert_allclose(y.reshape(-1), 2 * (x.reshape(-1) - 2) / 2 + 0.5, rtol=1e-6)
    assert layer.blobs[2].data.item() == 2.0                   # TEST never updates


def test_test_phase_without_moving_average_uses_the_batch(caplog):
    x = np.array([1.0, 3.0, 5.0, 7.0]).reshape(2, 1, 1, 2)
    with caplog.at_level(logging.WARNING):
        layer = _bn("var_eps: 1", phase=caffe_pb2.TEST)
        y = run_layer(layer, make_blobs([x]), make_blobs(1))[0]
    assert sum("moving_average unset" in r.message for r in caplog.records) == 1
    np.testing.assert_allclose(y.reshape(-1), 2 * (x.reshape(-1) - 4) / np.sqrt(6) + 0.5,
                               rtol=1e-6)
    assert layer.blobs[2].data.item() == 0.0
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _bn("moving_average: false", phase=caffe_pb2.TEST).setup(make_blobs([x]), make_blobs(1))
    assert not caplog.records


def test_axis_other_than_one_is_refused():
    layer = _bn("axis: 2")
    with pytest.raises(Exception, match="axis"):
        layer.setup(make_blobs([np.zeros((2, 3, 2, 2))]), make_blobs(1))


def test_gradient():
    rng = np.random.default_rng(5)
    layer = make_layer('type: "BN" bn_param { scale_filler { type: "gaussian" } '
                       'shift_filler { type: "gaussian" } var_eps: 1e-3 moving_average: true }',
                       phase=caffe_pb2.TRAIN)
    check_layer_gradient(layer, make_blobs([rng.standard_normal((3, 2, 2, 3))]),
                         make_blobs(1))


NET = '''name: "bn_excerpt"
input: "data"
input_dim: 2 input_dim: 3 input_dim: 4 input_dim: 4
layers {
  bottom: "data" top: "conv1" name: "conv1" type: CONVOLUTION
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } }
}
layers {
  bottom: "conv1" top: "conv1_bn" name: "conv1_bn" type: BN
  blobs_lr: 1 blobs_lr: 1 blobs_lr: 0 blobs_lr: 0
  weight_decay: 0 weight_decay: 0 weight_decay: 0 weight_decay: 0
  bn_param {
    scale_filler { type: "constant" value: 1 }
    shift_filler { type: "constant" value: 0 }
    moving_average: true
    decay: 0.9
    var_eps: 1e-8
  }
}
'''


def test_excerpt_summary_strict_and_net(tmp_path):
    net = strict_excerpt(tmp_path, NET, caffe_pb2.TRAIN)
    assert isinstance(net.layers[-1], EwmaBNLayer)
    net.blobs["data"].data[...] = np.random.default_rng(0).standard_normal((2, 3, 4, 4))
    net.forward()
    net.backward()
    out = net.blobs["conv1_bn"].data
    np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), 0, atol=1e-5)
