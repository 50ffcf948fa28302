"""TSN's caffe (yjxiong/caffe): Scatter, BatchReduction and SyncBN (forks/video/tsn.py)."""
import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _br(body):
    return 'type: "BatchReduction" batch_reduction_param { %s }' % body


def test_scatter_is_the_identity_in_one_process():
    x = np.random.default_rng(0).standard_normal((4, 3))
    (y,) = run_layer(make_layer('type: "Scatter"'), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, x)
    check_layer_gradient(make_layer('type: "Scatter"'), make_blobs([x]), make_blobs(1))


def _levels_ref(x, levels, mean):
    # transcription of the fork's CPU loop over (outer, levels, ticks) with a stride of 'inner'
    outer, a, inner = x.shape
    out = np.zeros((outer, len(levels), inner))
    for n in range(outer):
        start = 0
        for i, l in enumerate(levels):
            t = l * l
            for r in range(t):
                out[n, i] += x[n, start + r] * ((1.0 / t) if mean else 1.0)
            start += t
    return out


def test_batch_reduction_levels_mean_and_sum():
    x = np.random.default_rng(1).standard_normal((2, 5, 3))
    for op, mean in (("MEAN", True), ("SUM", False)):
        text = _br('level: 1 level: 2 reduction_param { operation: %s axis: 1 }' % op)
        (y,) = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
        assert y.shape == (2, 2, 3)
        np.testing.assert_allclose(y, _levels_ref(x, [1, 2], mean))
        check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_batch_reduction_global_and_pos():
    x = np.random.default_rng(2).standard_normal((2, 3, 3, 2))
    (y,) = run_layer(make_layer(_br('reduction_param { operation: MEAN axis: 1 }')),
                     make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, x.mean(axis=1))
    text = _br('pos: true reduction_param { operation: SUM axis: 1 }')
    (y,) = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    assert y.shape == (2, 2)
    np.testing.assert_allclose(y, sum(x[:, t, t] for t in range(3)))
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_batch_reduction_topk():
    x = np.random.default_rng(3).standard_normal((2, 5, 4))
    text = _br('reduction_param { operation: TOPK axis: 1 k: 2 }')
    (y,) = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, np.sort(x, axis=1)[:, -2:].mean(axis=1))
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_batch_reduction_refuses_asum_and_bad_levels():
    x = np.zeros((2, 4))
    with pytest.raises(CaffeError, match="NOT_IMPLEMENTED"):
        run_layer(make_layer(_br('reduction_param { operation: ASUM axis: 1 }')),
                  make_blobs([x]), make_blobs(1))
    with pytest.raises(CaffeError, match="levels"):
        run_layer(make_layer(_br('level: 1 level: 2 reduction_param { axis: 1 }')),
                  make_blobs([x]), make_blobs(1))


def _sync_bn(phase=caffe_pb2.TRAIN):
    return make_layer('type: "SyncBN" bn_param { slope_filler { type: "constant" value: 1.5 } '
                      'bias_filler { type: "constant" value: 0.25 } momentum: 0.8 eps: 1e-3 }',
                      phase=phase)


def test_sync_bn_normalises_with_the_unbiased_variance():
    x = np.random.default_rng(4).standard_normal((3, 2, 2, 2))
    layer = _sync_bn()
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    m = 3 * 2 * 2
    mu = x.mean(axis=(0, 2, 3), keepdims=True)
    var = x.var(axis=(0, 2, 3), keepdims=True) * m / (m - 1)
    np.testing.assert_allclose(y, 1.5 * (x - mu) / np.sqrt(var + 1e-3) + 0.25)
    np.testing.assert_allclose(layer.blobs[3].data.ravel(), 0.2 * var.ravel())
    np.testing.assert_allclose(layer.blobs[2].data.ravel(), 0.2 * mu.ravel())
    # the fork's backward: slope inv_std (dy - (x_hat sum(x_hat dy) + sum(dy)) / m)
    dy = np.random.default_rng(5).standard_normal(x.shape)
    bottom, top = make_blobs([x]), make_blobs(1)
    layer = _sync_bn()
    layer.setup(bottom, top)
    layer.forward(bottom, top)
    top[0].diff[...] = dy
    layer.backward(top, [True], bottom)
    xh = (x - mu) / np.sqrt(var + 1e-3)
    sx, sb = (xh * dy).sum(axis=(0, 2, 3), keepdims=True), dy.sum(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(bottom[0].diff, 1.5 / np.sqrt(var + 1e-3) * (dy - (xh * sx + sb) / m))
    np.testing.assert_allclose(layer.blobs[0].diff.ravel(), sx.ravel())
    np.testing.assert_allclose(layer.blobs[1].diff.ravel(), sb.ravel())


def test_sync_bn_param_gradients_and_test_phase():
    x = np.random.default_rng(6).standard_normal((2, 2, 3, 2))
    check_layer_gradient(_sync_bn(), make_blobs([x]), make_blobs(1), check_bottom=[])
    layer = _sync_bn(caffe_pb2.TEST)
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    layer.blobs[2].data[...] = 0.5
    layer.blobs[3].data[...] = 4.0
    layer.forward(bottom, top)
    np.testing.assert_allclose(top[0].data, 1.5 * (x - 0.5) / np.sqrt(4.001) + 0.25)


def test_topk_batch_reduction_parses_strictly():
    from caffepy.proto.io import parse_text
    net = parse_text('layer { name: "r" type: "BatchReduction" bottom: "x" top: "y" '
                     'batch_reduction_param { level: 2 reduction_param { operation: TOPK k: 2 } } }',
                     caffe_pb2.NetParameter(), strict=True)
    assert net.layer[0].batch_reduction_param.reduction_param.k == 2
