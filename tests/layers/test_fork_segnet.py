import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.layers.fork_segnet import SegNetBNLayer, SegNetUpsampleLayer
from caffepy.layers.normalization import BNLayer
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

SEG_BN = ('type: "BN" bn_param { scale_filler { type: "constant" value: 1.5 } '
          'shift_filler { type: "constant" value: 0.25 } }')


def test_bn_variant_choice():
    assert isinstance(make_layer(SEG_BN), SegNetBNLayer)
    assert isinstance(make_layer('type: "BN" bn_param { bn_mode: INFERENCE }'), SegNetBNLayer)
    assert isinstance(make_layer('type: "BN" param { lr_mult: 1 } param { lr_mult: 1 }'),
                      SegNetBNLayer)
    assert isinstance(make_layer('type: "BN"'), BNLayer)
    assert isinstance(make_layer('type: "BN" bn_param { frozen: true }'), BNLayer)
    assert isinstance(make_layer('type: "BN" ' + 'param { lr_mult: 0 } ' * 4), BNLayer)


def test_segnet_bn_learn_numbers_and_tops():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5)) * 2 + 1
    layer = make_layer(SEG_BN, phase=caffe_pb2.TEST)  # LEARN uses batch statistics in TEST too
    y, mean, var = run_layer(layer, make_blobs([x]), make_blobs(3))
    mu = x.mean(axis=(0, 2, 3), keepdims=True)
    v = ((x - mu) ** 2).mean(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y, 1.5 * (x - mu) / np.sqrt(v + 1e-9) + 0.25, rtol=1e-10)
    np.testing.assert_allclose(mean, mu)
    np.testing.assert_allclose(var, v)
    assert [b.shape for b in layer.blobs] == [(1, 3, 1, 1), (1, 3, 1, 1)]


def test_segnet_bn_inference_numbers():
    x = np.arange(24, dtype=float).reshape(1, 2, 3, 4)
    layer = make_layer('type: "BN" bn_param { bn_mode: INFERENCE }')
    layer.setup(make_blobs([x]), make_blobs(1))
    layer.blobs[0].data[...] = np.array([2.0, -1.0]).reshape(1, 2, 1, 1)
    layer.blobs[1].data[...] = np.array([0.5, 3.0]).reshape(1, 2, 1, 1)
    top = make_blobs(1)
    layer.reshape(make_blobs([x]), top)
    layer.forward(make_blobs([x]), top)
    np.testing.assert_allclose(top[0].data[0, 0], 2 * x[0, 0] + 0.5)
    np.testing.assert_allclose(top[0].data[0, 1], -x[0, 1] + 3)


@pytest.mark.parametrize("mode", ["LEARN", "INFERENCE"])
def test_segnet_bn_gradient(mode):
    x = np.random.default_rng(1).standard_normal((2, 2, 3, 2))
    layer = make_layer('type: "BN" bn_param { bn_mode: %s scale_filler { type: "gaussian" } '
                       'shift_filler { type: "gaussian" } }' % mode)
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


def _pool_with_mask(x, text='kernel_size: 2 stride: 2'):
    pool = make_layer('type: "Pooling" pooling_param { pool: MAX %s }' % text)
    top = make_blobs(2)
    run_layer(pool, make_blobs([x]), top)
    return top


def test_upsample_unpools_with_pooling_mask():
    x = np.random.default_rng(2).standard_normal((1, 2, 4, 6))
    pooled, mask = _pool_with_mask(x)
    layer = make_layer('type: "Upsample" bottom: "p" bottom: "m" upsample_param { scale: 2 }')
    assert isinstance(layer, SegNetUpsampleLayer)
    (y,) = run_layer(layer, [pooled, mask], make_blobs(1))
    want = np.where(x == np.repeat(np.repeat(pooled.data, 2, 2), 2, 3), x, 0)
    np.testing.assert_allclose(y, want)
    check_layer_gradient(layer, [pooled, mask], make_blobs(1), check_bottom=[0])


def test_upsample_sizes_and_errors():
    x = np.random.default_rng(3).standard_normal((1, 1, 5, 5))
    pooled, mask = _pool_with_mask(x)  # ceil: 3 x 3
    for text, shape in [("upsample_h: 5 upsample_w: 5", (5, 5)),
                        ("scale: 2 pad_out_h: true pad_out_w: true", (5, 5)),
                        ("", (6, 6)), ("scale_h: 2 scale_w: 3", (6, 9))]:
        layer = make_layer('type: "Upsample" bottom: "p" bottom: "m" upsample_param { %s }' % text)
        (y,) = run_layer(layer, [pooled, mask], make_blobs(1))
        assert y.shape == (1, 1) + shape
        assert np.isclose(y.sum(), pooled.data.sum())
    small = make_layer('type: "Upsample" bottom: "p" bottom: "m" '
                       'upsample_param { upsample_h: 3 upsample_w: 3 }')
    with pytest.raises(NetError, match="out of range"):
        run_layer(small, [pooled, mask], make_blobs(1))
    with pytest.raises(NetError, match="scale of 2"):
        make_layer('type: "Upsample" bottom: "p" bottom: "m" '
                   'upsample_param { scale: 3 pad_out_h: true }').setup([pooled, mask],
                                                                      make_blobs(1))


def test_sample_weights_test_dropout_samples_in_test():
    x = np.ones((200, 10))
    plain = make_layer('type: "Dropout" dropout_param { dropout_ratio: 0.5 }')
    (y0,) = run_layer(plain, make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y0, x)
    mc = make_layer('type: "Dropout" dropout_param { dropout_ratio: 0.5 sample_weights_test: true }')
    (y1,) = run_layer(mc, make_blobs([x]), make_blobs(1))
    assert set(np.unique(y1)) == {0.0, 2.0}
    assert 0.4 < (y1 == 0).mean() < 0.6
