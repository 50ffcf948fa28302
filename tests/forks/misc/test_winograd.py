import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.misc.winograd import TRANSFORMS, to_winograd_domain
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from caffepy.testing.gradient_check import GradientChecker


def _conv_ref(x, w, b, pad):
    """Direct cross-correlation (N, C, H, W) * (O, C, k, k), stride 1."""
    n, c, h, wd = x.shape
    o, _, k, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - k + 1, wd + 2 * pad - k + 1
    y = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            y[:, :, i, j] = np.einsum("ncab,ocab->no", xp[:, :, i:i + k, j:j + k], w)
    return y + b[None, :, None, None]


@pytest.mark.parametrize("k", [3, 5])
def test_winograd_transforms_compute_a_convolution(k):
    t = TRANSFORMS[k]
    rng = np.random.default_rng(k)
    d, g = rng.standard_normal((k + 3, k + 3)), rng.standard_normal((k, k))
    u = t["G"] @ g @ t["G"].T
    y = t["A"].T @ (u * (t["B"].T @ d @ t["B"])) @ t["A"]
    ref = np.array([[np.sum(d[i:i + k, j:j + k] * g) for j in range(4)] for i in range(4)])
    np.testing.assert_allclose(y, ref, atol=1e-10)


@pytest.mark.parametrize("k,pad,group", [(3, 1, 1), (5, 2, 2), (3, 0, 1)])
def test_winograd_layer_from_spatial_weights_is_a_convolution(k, pad, group):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4, 9, 7))
    g = rng.standard_normal((6, 4 // group, k, k))
    bias = rng.standard_normal(6)
    text = ('type: "Winograd" convolution_param { num_output: 6 kernel_size: %d pad: %d '
            'group: %d }' % (k, pad, group))
    layer = make_layer(text)
    layer.blobs = make_blobs([g, bias])
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    assert layer.blobs[0].shape == (k + 3, k + 3, 6, 4 // group)
    ref = np.concatenate([_conv_ref(x[:, i * (4 // group):(i + 1) * (4 // group)],
                                    g[i * (6 // group):(i + 1) * (6 // group)],
                                    bias[i * (6 // group):(i + 1) * (6 // group)], pad)
                          for i in range(group)], axis=1)
    np.testing.assert_allclose(y, ref, atol=1e-9)


def test_winograd_filler_draw_is_transformed():
    layer = make_layer('type: "Winograd" convolution_param { num_output: 2 kernel_size: 3 '
                       'weight_filler { type: "constant" value: 1 } }')
    run_layer(layer, make_blobs([np.zeros((1, 3, 5, 5))]), make_blobs(1))
    np.testing.assert_allclose(layer.blobs[0].data,
                               to_winograd_domain(np.ones((2, 3, 3, 3)), 3))


@pytest.mark.parametrize("k,pad,group", [(3, 1, 2), (5, 1, 1)])
def test_winograd_gradient_in_the_winograd_domain(k, pad, group):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 2, 6, 5))
    text = ('type: "Winograd" convolution_param { num_output: 2 kernel_size: %d pad: %d '
            'group: %d weight_filler { type: "gaussian" std: 0.3 } '
            'bias_filler { type: "gaussian" } }' % (k, pad, group))
    layer = make_layer(text)
    run_layer(layer, make_blobs([x]), make_blobs(1))
    # a free Winograd-domain weight: not G g G^T for any g
    layer.blobs[0].data[...] = rng.standard_normal(layer.blobs[0].shape) * 0.1
    GradientChecker().check(layer, make_blobs([x]), make_blobs(1), first_setup=False)


def test_winograd_refuses_stride_and_other_kernels():
    with pytest.raises(NetError, match="stride"):
        run_layer(make_layer('type: "Winograd" convolution_param { num_output: 1 kernel_size: 3 '
                             'stride: 2 }'), make_blobs([np.zeros((1, 1, 6, 6))]), make_blobs(1))
    with pytest.raises(NetError, match="3 x 3 or 5 x 5"):
        run_layer(make_layer('type: "Winograd" convolution_param { num_output: 1 kernel_size: 2 }'),
                  make_blobs([np.zeros((1, 1, 6, 6))]), make_blobs(1))


@pytest.mark.parametrize("kind", ["Winograd2x2Trans", "Winograd2x2Conv"])
@pytest.mark.parametrize("k", [2, 3])
def test_winograd2x2_is_a_convolution(kind, k):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 7, 6))
    text = ('type: "%s" convolution_param { num_output: 3 kernel_size: %d pad: 1 '
            'weight_filler { type: "gaussian" } bias_filler { type: "gaussian" } }' % (kind, k))
    layer = make_layer(text)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    ref = _conv_ref(x, layer.blobs[0].data, layer.blobs[1].data, 1)
    np.testing.assert_allclose(y, ref, atol=1e-10)
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_winograd2x2_refuses_strided_3x3():
    with pytest.raises(NetError, match="group 1, stride 1"):
        run_layer(make_layer('type: "Winograd2x2Conv" convolution_param { num_output: 1 '
                             'kernel_size: 3 stride: 2 }'),
                  make_blobs([np.zeros((1, 1, 6, 6))]), make_blobs(1))
