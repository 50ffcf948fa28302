import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

DTYPES = [np.float32, np.float64]


def interp_ref(x, ho, wo, beg=0, end=0):
    """PSPNet's caffe_cpu_interp2, written as plain loops."""
    x = x[:, :, -beg:x.shape[2] + end, -beg:x.shape[3] + end]
    hi, wi = x.shape[2:]
    rh = (hi - 1) / (ho - 1) if ho > 1 else 0
    rw = (wi - 1) / (wo - 1) if wo > 1 else 0
    y = np.zeros(x.shape[:2] + (ho, wo))
    for i in range(ho):
        h1r = rh * i
        h1 = int(h1r)
        hp = 1 if h1 < hi - 1 else 0
        l1 = h1r - h1
        for j in range(wo):
            w1r = rw * j
            w1 = int(w1r)
            wp = 1 if w1 < wi - 1 else 0
            m1 = w1r - w1
            y[:, :, i, j] = ((1 - l1) * ((1 - m1) * x[:, :, h1, w1] + m1 * x[:, :, h1, w1 + wp])
                             + l1 * ((1 - m1) * x[:, :, h1 + hp, w1] + m1 * x[:, :, h1 + hp, w1 + wp]))
    return y


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("param,shape,pads", [
    ("zoom_factor: 3", (10, 13), (0, 0)),
    ("shrink_factor: 2", (2, 3), (0, 0)),
    ("height: 7 width: 2", (7, 2), (0, 0)),
    ("shrink_factor: 2 zoom_factor: 2", (3, 5), (0, 0)),
    ("zoom_factor: 2 pad_beg: -1 pad_end: -1", (3, 5), (-1, -1)),
])
def test_interp_forward(dtype, param, shape, pads):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    (y,) = run_layer(make_layer('type: "Interp" interp_param { %s }' % param, dtype=dtype),
                     make_blobs([x], dtype), make_blobs(1, dtype))
    assert y.shape == (2, 3) + shape
    np.testing.assert_allclose(y, interp_ref(x, shape[0], shape[1], *pads), rtol=1e-5, atol=1e-6)


def test_interp_use_blob_size_and_gradient():
    rng = np.random.default_rng(1)
    x, ref = rng.standard_normal((1, 2, 3, 4)), np.zeros((1, 5, 6, 7))
    layer = make_layer('type: "Interp" interp_param { use_blob_size: true }')
    (y,) = run_layer(layer, make_blobs([x, ref]), make_blobs(1))
    np.testing.assert_allclose(y, interp_ref(x, 6, 7))
    check_layer_gradient(layer, make_blobs([x, ref]), make_blobs(1), check_bottom=[0])
    crop = make_layer('type: "Interp" interp_param { zoom_factor: 2 pad_beg: -1 pad_end: 0 }')
    check_layer_gradient(crop, make_blobs([x]), make_blobs(1))


def test_interp_rejects_positive_pad():
    with pytest.raises(NetError, match="pad"):
        run_layer(make_layer('type: "Interp" interp_param { zoom_factor: 2 pad_beg: 1 }'),
                  make_blobs([np.zeros((1, 1, 3, 3))]), make_blobs(1))


def _bilinear_interpolation_ref(x, ho, wo):
    """ctensmeyer/caffe's loop: floor / floor + 1 with the fork's weights (a neighbour past the
    edge gets weight 0)."""
    n, c, hi, wi = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1)))
    y = np.zeros((n, c, ho, wo))
    for h in range(ho):
        ho_ = h * (hi - 1) / (ho - 1)
        f, g = int(ho_), int(ho_ + 1)
        for w in range(wo):
            wo_ = w * (wi - 1) / (wo - 1)
            fw, gw = int(wo_), int(wo_ + 1)
            y[:, :, h, w] = ((g - ho_) * (gw - wo_) * xp[:, :, f, fw]
                             + (g - ho_) * (wo_ - fw) * xp[:, :, f, gw]
                             + (ho_ - f) * (gw - wo_) * xp[:, :, g, fw]
                             + (ho_ - f) * (wo_ - fw) * xp[:, :, g, gw])
    return y


def test_bilinear_interpolation_values_and_gradient():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 4, 5))
    ref_blob = np.zeros((1, 1, 7, 9))
    layer = make_layer('type: "BilinearInterpolation"')
    (y,) = run_layer(layer, make_blobs([x, ref_blob]), make_blobs(1))
    np.testing.assert_allclose(y, _bilinear_interpolation_ref(x, 7, 9), atol=1e-12)
    np.testing.assert_allclose(y, interp_ref(x, 7, 9), atol=1e-12)
    check_layer_gradient(make_layer('type: "BilinearInterpolation"'),
                         make_blobs([x, ref_blob]), make_blobs(1), check_bottom=[0])
    with pytest.raises(NetError, match="axes 2 and 3"):
        run_layer(make_layer('type: "BilinearInterpolation"'),
                  make_blobs([x, np.zeros((2, 3))]), make_blobs(1))

@pytest.mark.parametrize("dtype", DTYPES)
def test_upsample(dtype):
    x = np.random.default_rng(2).standard_normal((2, 3, 2, 3))
    layer = make_layer('type: "Upsample" upsample_param { scale: 2 }', dtype=dtype)
    (y,) = run_layer(layer, make_blobs([x], dtype), make_blobs(1, dtype))
    np.testing.assert_allclose(y, x.repeat(2, axis=2).repeat(2, axis=3).astype(dtype))
    if dtype == np.float64:
        check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_shuffle_channel(dtype):
    x = np.random.default_rng(3).standard_normal((2, 6, 2, 2))
    layer = make_layer('type: "ShuffleChannel" shuffle_channel_param { group: 2 }', dtype=dtype)
    (y,) = run_layer(layer, make_blobs([x], dtype), make_blobs(1, dtype))
    np.testing.assert_allclose(y, x[:, [0, 3, 1, 4, 2, 5]].astype(dtype))
    if dtype == np.float64:
        check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_axpy(dtype):
    rng = np.random.default_rng(4)
    a, x, b = rng.standard_normal((2, 3, 1, 1)), rng.standard_normal((2, 3, 4, 2)), rng.standard_normal((2, 3, 4, 2))
    layer = make_layer('type: "Axpy"', dtype=dtype)
    (y,) = run_layer(layer, make_blobs([a, x, b], dtype), make_blobs(1, dtype))
    np.testing.assert_allclose(y, a * x + b, rtol=1e-5, atol=1e-6)
    if dtype == np.float64:
        check_layer_gradient(layer, make_blobs([a, x, b]), make_blobs(1))


def reorg_ref(x, s, forward):
    """darknet's reorg_cpu on the bottom's (w, h, c, batch)."""
    N, C, H, W = x.shape
    flat, out = x.ravel(), np.zeros(x.size)
    oc = C // (s * s)
    for b in range(N):
        for k in range(C):
            for j in range(H):
                for i in range(W):
                    in_index = i + W * (j + H * (k + C * b))
                    c2, off = k % oc, k // oc
                    w2, h2 = i * s + off % s, j * s + off // s
                    out_index = w2 + W * s * (h2 + H * s * (c2 + oc * b))
                    if forward:
                        out[out_index] = flat[in_index]
                    else:
                        out[in_index] = flat[out_index]
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reverse", [False, True])
def test_reorg(dtype, reverse):
    x = np.random.default_rng(5).standard_normal((2, 8, 4, 6))
    layer = make_layer('type: "Reorg" reorg_param { stride: 2 reverse: %s }' % str(reverse).lower(),
                       dtype=dtype)
    (y,) = run_layer(layer, make_blobs([x], dtype), make_blobs(1, dtype))
    assert y.shape == ((2, 2, 8, 12) if reverse else (2, 32, 2, 3))
    np.testing.assert_allclose(y.ravel(), reorg_ref(x, 2, reverse).astype(dtype))
    if dtype == np.float64:
        check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


def test_tiling_forward_backward_and_refusals(tmp_path):
    from caffepy.errors import ShapeError
    x = np.random.default_rng(7).standard_normal((2, 8, 3, 5))
    layer = make_layer('type: "Tiling" tiling_param { tile_dim: 2 }', dtype=np.float64)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    assert y.shape == (2, 2, 6, 10)
    for n in range(2):
        for c in range(2):
            for h in range(3):
                for w in range(5):
                    for ty in range(2):
                        for tx in range(2):
                            assert y[n, c, h * 2 + ty, w * 2 + tx] == x[n, c * 4 + ty * 2 + tx, h, w]
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))
    with pytest.raises(ShapeError, match="multiple of tile_dim"):
        make_layer('type: "Tiling" tiling_param { tile_dim: 3 }').setup(make_blobs([x]), make_blobs(1))
    with pytest.raises(NetError, match="tile_dim must be specified"):
        make_layer('type: "Tiling"').setup(make_blobs([x]), make_blobs(1))
    from caffepy.net import Net
    from caffepy.proto import caffe_pb2
    path = tmp_path / "net.prototxt"
    path.write_text('input: "data" input_shape { dim: 1 dim: 16 dim: 2 dim: 2 }\n'
                    'layer { name: "t" type: "Tiling" bottom: "data" top: "y"\n'
                    '  tiling_param { tile_dim: 4 } }\n')
    net = Net(str(path), caffe_pb2.TEST)
    assert net.blobs["y"].shape == (1, 1, 8, 8)
