import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.misc.spatial_transformer import SpatialTransformerLayer
from caffepy.forks.misc.st_carey import CareySpatialTransformerLayer
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(12)


def _kernel(u, theta, ho, wo):
    """st_layer.cu's forward, pixel by pixel (theta: N x 6, full)."""
    n, c, h, w = u.shape
    v = np.zeros((n, c, ho, wo))
    for i in range(n):
        t = theta[i]
        for s in range(ho):
            for q in range(wo):
                gs, gt = s * 1.0 / ho * 2 - 1, q * 1.0 / wo * 2 - 1
                px, py = t[0] * gs + t[1] * gt + t[2], t[3] * gs + t[4] * gt + t[5]
                x, y = (px + 1) / 2 * h, (py + 1) / 2 * w
                for m in (int(np.floor(x)), int(np.floor(x)) + 1):
                    for k in (int(np.floor(y)), int(np.floor(y)) + 1):
                        if 0 <= m < h and 0 <= k < w:
                            v[i, :, s, q] += (1 - abs(x - m)) * (1 - abs(y - k)) * u[i, :, m, k]
    return v


def test_chosen_by_its_own_fields():
    assert isinstance(make_layer('type: "SpatialTransformer" st_param { to_compute_dU: false }'),
                      CareySpatialTransformerLayer)
    assert isinstance(make_layer('type: "SpatialTransformer" st_param { theta_1_2: 0 }'),
                      CareySpatialTransformerLayer)
    assert isinstance(make_layer('type: "SpatialTransformer" st_param { output_H: 4 }'),
                      SpatialTransformerLayer)


def test_forward_is_the_forks_kernel_with_fixed_thetas():
    u = RNG.standard_normal((2, 3, 5, 6))
    free = RNG.standard_normal((2, 2)) * 0.3
    layer = make_layer('type: "SpatialTransformer" st_param { output_H: 4 output_W: 7 '
                       'theta_1_1: 0.8 theta_1_2: 0.1 theta_2_1: -0.2 theta_2_2: 0.9 }')
    (v,) = run_layer(layer, make_blobs([u, free]), make_blobs(1))
    theta = np.array([[0.8, 0.1, f[0], -0.2, 0.9, f[1]] for f in free])
    np.testing.assert_allclose(v, _kernel(u, theta, 4, 7), rtol=1e-12, atol=1e-12)
    # identity theta: the grid samples s H / Ho, so Ho = H gives U back
    ident = np.tile([1.0, 0, 0, 0, 1.0, 0], (2, 1))
    (v,) = run_layer(make_layer('type: "SpatialTransformer" st_param { to_compute_dU: true }'),
                     make_blobs([u, ident]), make_blobs(1))
    np.testing.assert_allclose(v, u, rtol=1e-12)


@pytest.mark.parametrize("params", ["to_compute_dU: true",
                                    "output_H: 3 output_W: 4 theta_1_1: 0.7 theta_2_3: 0.1"])
def test_gradient(params):
    u = RNG.standard_normal((2, 2, 5, 4))
    k = 6 - params.count("theta")
    theta = np.tile([0.9, 0.15, 0.05, -0.1, 0.8, -0.05][:k], (2, 1)) + \
        RNG.standard_normal((2, k)) * 0.05
    check_layer_gradient(make_layer('type: "SpatialTransformer" st_param { %s }' % params),
                         make_blobs([u, theta]), make_blobs(1))


def test_to_compute_du_false_leaves_the_input_gradient_alone():
    u = RNG.standard_normal((1, 2, 4, 4))
    theta = np.array([[0.9, 0.1, 0.0, 0.0, 0.9, 0.1]])
    layer = make_layer('type: "SpatialTransformer" st_param { to_compute_dU: false }')
    bottom, top = make_blobs([u, theta]), make_blobs(1)
    run_layer(layer, bottom, top)
    bottom[0].diff[...] = 7.0
    top[0].diff[...] = 1.0
    layer.backward(top, [True, True], bottom)
    assert (bottom[0].diff == 7.0).all() and np.abs(bottom[1].diff).sum() > 0


def test_refusals():
    with pytest.raises(NetError, match="N x 4"):
        run_layer(make_layer('type: "SpatialTransformer" st_param { theta_1_1: 1 '
                             'theta_2_2: 1 }'),
                  make_blobs([np.zeros((1, 1, 3, 3)), np.zeros((1, 6))]), make_blobs(1))
    with pytest.raises(NetError, match="affine"):
        make_layer('type: "SpatialTransformer" st_param { transform_type: "projective" '
                   'to_compute_dU: false }').setup(
            make_blobs([np.zeros((1, 1, 3, 3)), np.zeros((1, 6))]), make_blobs(1))
