import numpy as np
import pytest
from google.protobuf import text_format

from caffepy.errors import NetError
from caffepy.forks.misc.softmax_variants import (ClassScaledSoftmaxWithLossLayer,
                                                 LabelSmoothSoftmaxWithLossLayer)
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(5)


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_fields_parse():
    sp = caffe_pb2.SoftmaxParameter()
    text_format.Parse('label_smooth: true label_smooth_factor: 0.001 label_id: 1 label_id: 2 '
                      'label_scale: 0.8 label_scale: 1.2', sp)
    assert sp.label_smooth and list(sp.label_id) == [1, 2]
    np.testing.assert_allclose(sp.label_scale, [0.8, 1.2], rtol=1e-6)


def test_label_smoothing_forward_by_hand_and_backward_is_p_minus_q():
    x = np.array([[0.0, 1.0, 2.0, 0.5], [1.0, 0.0, -1.0, 0.0]])
    y = np.array([2, 0])
    layer = make_layer('type: "SoftmaxWithLoss" softmax_param { label_smooth: true '
                       'label_smooth_factor: 0.2 }')
    assert isinstance(layer, LabelSmoothSoftmaxWithLossLayer)
    bottom, top = make_blobs([x, y]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    p = _softmax(x)
    q = np.full((2, 4), 0.05)
    q[[0, 1], y] = 0.8
    assert np.isclose(loss, -(q * np.log(p)).sum() / 2)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, (p - q) / 2)


def test_label_smoothing_default_factor_and_off():
    x = RNG.standard_normal((3, 5))
    y = np.array([0, 4, 2])
    plain = run_layer(make_layer('type: "SoftmaxWithLoss"'), make_blobs([x, y]), make_blobs(1))
    off = run_layer(make_layer('type: "SoftmaxWithLoss" softmax_param { label_smooth: false '
                               'label_smooth_factor: 0.3 }'), make_blobs([x, y]), make_blobs(1))
    assert np.isclose(plain[0], off[0])
    layer = make_layer('type: "SoftmaxWithLoss" softmax_param { label_smooth: true }')
    run_layer(layer, make_blobs([x, y]), make_blobs(1))
    assert layer.eps == 1e-5


def test_label_smoothing_gradient():
    # the fork's p - q is the loss's gradient up to e / C p: checked with the census files' e
    x = RNG.standard_normal((3, 4, 2))
    y = RNG.integers(0, 4, (3, 2)).astype(float)
    layer = make_layer('type: "SoftmaxWithLoss" softmax_param { label_smooth: true '
                       'label_smooth_factor: 0.001 }')
    check_layer_gradient(layer, make_blobs([x, y]), make_blobs(1), check_bottom=[0])


def test_class_scaled_loss_by_hand_and_gradient():
    x = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, -1.0], [0.5, 0.5, 0.0]])
    y = np.array([1, 2, 0])
    text = ('type: "WeightedSoftmaxWithLoss" softmax_param { label_id: 1 label_id: 2 '
            'label_scale: 0.5 label_scale: 3 }')
    layer = make_layer(text)
    assert isinstance(layer, ClassScaledSoftmaxWithLossLayer)
    (loss,) = run_layer(layer, make_blobs([x, y]), make_blobs(1))
    p = _softmax(x)
    w = np.array([0.5, 3.0, 1.0])
    assert np.isclose(loss, -(w * np.log(p[[0, 1, 2], y])).sum() / 3)
    check_layer_gradient(make_layer(text), make_blobs([x, y]), make_blobs(1), check_bottom=[0])


def test_class_scaled_refuses_unpaired_ids():
    layer = make_layer('type: "WeightedSoftmaxWithLoss" softmax_param { label_id: 1 '
                       'label_scale: 0.5 label_scale: 2 }')
    with pytest.raises(NetError, match="label_id"):
        run_layer(layer, make_blobs([np.zeros((2, 3)), [0, 1]]), make_blobs(1))


def test_net_excerpts_build(tmp_path):
    from caffepy.net import Net
    path = tmp_path / "n.prototxt"
    path.write_text('''
input: "data" input_shape { dim: 4 dim: 6 }
input: "label" input_shape { dim: 4 }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss"
  softmax_param: { label_smooth: true label_smooth_factor: 0.001 } }
layer { name: "wloss" type: "WeightedSoftmaxWithLoss" bottom: "ip" bottom: "label" top: "wloss"
  softmax_param { label_id: 1 label_id: 2 label_scale: 0.8 label_scale: 1.2 } }
''')
    net = Net(str(path), caffe_pb2.TRAIN)
    net.blobs["data"].data[...] = RNG.standard_normal((4, 6))
    net.blobs["label"].data[...] = [0, 1, 2, 1]
    net.forward()
    net.backward()
    assert np.isfinite(net.blobs["loss"].data).all() and np.isfinite(net.blobs["wloss"].data).all()


def test_softmax_with_cross_entropy_is_the_kl_of_two_softmaxes():
    rng = np.random.default_rng(7)
    x, t = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4, 3))
    def sm(a):
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    kl = np.sum(sm(t) * np.log(sm(t) / sm(x)))
    for text, norm in (('type: "SoftmaxWithCrossEntropyLoss"', 2),
                       ('type: "SoftmaxWithCrossEntropyLoss" loss_param { normalize: true }', 6)):
        (loss,) = run_layer(make_layer(text), make_blobs([x, t]), make_blobs(1))
        np.testing.assert_allclose(loss, kl / norm)
        check_layer_gradient(make_layer(text), make_blobs([x, t]), make_blobs(1),
                             check_bottom=[0])


def test_softmax_cross_entropy_loss_soft_targets():
    """SoftmaxCrossEntropyLoss (xieguotian/caffe, mitmul/caffe): -sum t log p / N for mixup's
    soft labels; the gradient is p - t (exact for targets summing to 1): the checker agrees."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 5))
    t = rng.random((4, 5))
    t /= t.sum(1, keepdims=True)
    layer = make_layer('type: "SoftmaxCrossEntropyLoss"')
    bottom, top = make_blobs([x, t]), make_blobs(2)
    loss, prob = run_layer(layer, bottom, top)
    e = np.exp(x - x.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(prob, p, rtol=1e-12)
    assert np.isclose(loss, -np.sum(t * np.log(p)) / 4, rtol=1e-12)
    check_layer_gradient(make_layer('type: "SoftmaxCrossEntropyLoss"'), make_blobs([x, t]),
                         make_blobs(1), check_bottom=[0])
    # maps: VALID counts every position (N H W); BATCH_SIZE only N
    xm, tm = rng.standard_normal((2, 3, 2, 2)), rng.random((2, 3, 2, 2))
    (full,) = run_layer(make_layer('type: "SoftmaxCrossEntropyLoss"'), make_blobs([xm, tm]),
                        make_blobs(1))
    (batch,) = run_layer(make_layer('type: "SoftmaxCrossEntropyLoss" loss_param { '
                                    'normalization: BATCH_SIZE }'), make_blobs([xm, tm]),
                         make_blobs(1))
    assert np.isclose(full * 4, batch * 1, rtol=1e-12)
    with pytest.raises(Exception, match="one value per score"):
        run_layer(make_layer('type: "SoftmaxCrossEntropyLoss"'), make_blobs([x, t[:, :3]]),
                  make_blobs(1))
