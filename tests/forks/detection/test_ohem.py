import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_loss_ohem(dtype):
    rng = np.random.default_rng(0)
    x, label = rng.standard_normal((5, 4)), np.array([0, 3, 1, -1, 2], float)
    layer = make_layer('type: "SoftmaxWithLossOHEM" loss_param { ignore_label: -1 }', dtype=dtype)
    loss, prob, per = run_layer(layer, make_blobs([x, label], dtype), make_blobs(3, dtype))
    p = np.exp(x) / np.exp(x).sum(1, keepdims=True)
    ref = np.array([-np.log(p[i, int(l)]) if l >= 0 else 0 for i, l in enumerate(label)])
    np.testing.assert_allclose(per, ref, rtol=1e-5)
    np.testing.assert_allclose(loss, ref.sum() / 4, rtol=1e-5)
    np.testing.assert_allclose(prob, p, rtol=1e-5)
    if dtype == np.float64:
        check_layer_gradient(make_layer('type: "SoftmaxWithLossOHEM" loss_param { ignore_label: -1 }'),
                             make_blobs([x, label]), make_blobs(1), check_bottom=[0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_smooth_l1_loss_ohem(dtype):
    rng = np.random.default_rng(1)
    x, t, w = rng.standard_normal((3, 8)) * 2, rng.standard_normal((3, 8)), rng.random((3, 8))
    layer = make_layer('type: "SmoothL1LossOHEM" smooth_l1_loss_param { sigma: 1.5 }', dtype=dtype)
    loss, per = run_layer(layer, make_blobs([x, t, w], dtype), make_blobs(2, dtype))
    d, s2 = w * (x - t), 2.25
    f = np.where(np.abs(d) < 1 / s2, 0.5 * s2 * d * d, np.abs(d) - 0.5 / s2)
    assert per.shape == (3, 1, 1, 1)                # R-FCN: N x 1 x H x W, summed over channels
    np.testing.assert_allclose(per.ravel(), f.sum(1), rtol=1e-5)
    np.testing.assert_allclose(loss, f.sum() / 3, rtol=1e-5)
    if dtype == np.float64:
        check_layer_gradient(make_layer('type: "SmoothL1LossOHEM"'), make_blobs([x, t, w]), make_blobs(1),
                             check_bottom=[0, 1], kink_range=1e-2)


def test_smooth_l1_loss_ohem_ignores_a_weights_gradient_request():
    """As R-FCN's backward (bottoms 0 and 1 only): a gradient asked for the weights is none,
    not an error, and the predictions still get theirs."""
    rng = np.random.default_rng(2)
    x, t, w = rng.standard_normal((2, 4)), rng.standard_normal((2, 4)), rng.random((2, 4))
    layer = make_layer('type: "SmoothL1LossOHEM"')
    bottom, top = make_blobs([x, t, w]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.0
    bottom[2].diff[...] = 7.0
    layer.backward(top, [True, False, True], bottom)
    assert (bottom[2].diff == 7.0).all()
    d = w * (x - t)
    np.testing.assert_allclose(bottom[0].diff, np.where(np.abs(d) < 1, d, np.sign(d)) * w / 2)


def test_box_annotator_ohem():
    rois = np.array([[0, 0, 0, 1, 1], [0, 0, 0, 2, 2], [1, 0, 0, 1, 1], [0, 1, 1, 3, 3], [1, 2, 2, 3, 3]], float)
    loss = np.array([0.5, 2.0, 0.1, 1.0, 0.3])
    labels = np.array([1, 2, 3, 4, 5], float)
    w = np.ones((5, 8))
    layer = make_layer('type: "BoxAnnotatorOHEM" box_annotator_ohem_param { roi_per_img: 2 ignore_label: -1 }')
    lab, ww = run_layer(layer, make_blobs([rois, loss, labels, w]), make_blobs(2))
    np.testing.assert_array_equal(lab, [-1, 2, 3, 4, 5])
    np.testing.assert_array_equal(ww.sum(1), [0, 8, 8, 8, 8])


def test_ohem_per_roi_losses_have_rfcn_shapes():
    """SoftmaxWithLossOHEM's per-RoI loss is shaped like the labels, SmoothL1LossOHEM's is N x 1 x H x W,
    so R-FCN's Eltwise SUM of the two works (labels N x 1 x 1 x 1 from its ProposalTargetLayer)."""
    rng = np.random.default_rng(2)
    cls = make_layer('type: "SoftmaxWithLossOHEM"')
    logits, labels = rng.standard_normal((4, 21, 1, 1)), rng.integers(0, 21, (4, 1, 1, 1))
    _, _, per_cls = run_layer(cls, make_blobs([logits, labels]), make_blobs(3))
    box = make_layer('type: "SmoothL1LossOHEM"')
    x = rng.standard_normal((4, 8, 1, 1))
    _, per_box = run_layer(box, make_blobs([x, x * 0, x * 0 + 1, x * 0 + 1]), make_blobs(2))
    assert per_cls.shape == per_box.shape == (4, 1, 1, 1)
