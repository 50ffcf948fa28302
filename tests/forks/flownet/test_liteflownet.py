import numpy as np
import pytest

from caffepy.errors import NetError, ShapeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def warp_ref(img, coords):
    """LiteFlowNet's WarpLayer::Forward_cpu as loops."""
    N, C, H, W = img.shape
    out = np.zeros(img.shape)

    def get(n, c, x, y):
        return 0.0 if x < 0 or x > W - 1 or y < 0 or y > H - 1 else img[n, c, y, x]
    for n in range(N):
        for h in range(H):
            for w in range(W):
                x, y = coords[n, 0, h, w], coords[n, 1, h, w]
                x0, y0 = int(np.floor(x)), int(np.floor(y))
                wx, wy = x - x0, y - y0
                for c in range(C):
                    out[n, c, h, w] = ((1 - wx) * (1 - wy) * get(n, c, x0, y0)
                                       + (1 - wx) * wy * get(n, c, x0, y0 + 1)
                                       + wx * (1 - wy) * get(n, c, x0 + 1, y0)
                                       + wx * wy * get(n, c, x0 + 1, y0 + 1))
    return out


def test_warp_forward_matches_fork_loops():
    rng = np.random.default_rng(0)
    img = rng.standard_normal((2, 3, 4, 5))
    coords = rng.uniform(-1.5, 5.5, (2, 2, 4, 5))
    (y,) = run_layer(make_layer('type: "Warp"'), make_blobs([img, coords]), make_blobs(1))
    np.testing.assert_allclose(y, warp_ref(img, coords), rtol=1e-12)
    # the identity grid gives the image back
    grid = np.stack(np.meshgrid(np.arange(5.0), np.arange(4.0)))[None].repeat(2, 0)
    (y,) = run_layer(make_layer('type: "Warp"'), make_blobs([img, grid]), make_blobs(1))
    np.testing.assert_allclose(y, img)


def test_warp_gradient():
    rng = np.random.default_rng(1)
    img = rng.standard_normal((1, 2, 3, 4))
    coords = rng.integers(-1, 4, (1, 2, 3, 4)) + rng.uniform(0.2, 0.8, (1, 2, 3, 4))
    check_layer_gradient(make_layer('type: "Warp"'), make_blobs([img, coords]), make_blobs(1),
                         stepsize=1e-4)


def test_warp_shape_check():
    with pytest.raises(ShapeError, match="coords"):
        run_layer(make_layer('type: "Warp"'),
                  make_blobs([np.ones((1, 3, 4, 5)), np.ones((1, 2, 4, 4))]), make_blobs(1))


def test_grid_forward_shape_and_no_backward():
    from caffepy.errors import NetError
    flow = np.random.default_rng(2).standard_normal((2, 3, 4, 5))
    layer = make_layer('type: "Grid"')
    bottom, top = make_blobs([flow]), make_blobs(1)
    (grid,) = run_layer(layer, bottom, top)
    assert grid.shape == (2, 2, 4, 5)
    for n in range(2):
        for h in range(4):
            for w in range(5):
                assert (grid[n, 0, h, w], grid[n, 1, h, w]) == (w, h)
    layer.backward(top, [False], bottom)                       # nothing asked: nothing done
    with pytest.raises(NetError, match="backward is not implemented"):
        layer.backward(top, [True], bottom)
    with pytest.raises(ShapeError, match="N x C x H x W"):
        make_layer('type: "Grid"').setup(make_blobs([np.zeros((2, 3))]), make_blobs(1))


GRID_NET = """
input: "img" input_shape { dim: 1 dim: 2 dim: 4 dim: 5 }
input: "flow" input_shape { dim: 1 dim: 2 dim: 4 dim: 5 }
layer {
   name: "gxy_L6"
   type: "Grid"
   top: "gxy_L6"
   bottom: "flow"
   propagate_down: false
}
layer { name: "coords" type: "Eltwise" bottom: "flow" bottom: "gxy_L6" top: "coords"
  eltwise_param { operation: SUM coeff: 1 coeff: 1 } }
layer { name: "warp" type: "Warp" bottom: "img" bottom: "coords" top: "warped" }
"""


def test_grid_then_warp_in_a_net():
    from caffepy.net import Net
    from caffepy.proto import caffe_pb2, io as proto_io
    net = Net(proto_io.read_net(GRID_NET), caffe_pb2.TEST)
    rng = np.random.default_rng(3)
    img = rng.standard_normal((1, 2, 4, 5))
    net.blobs["img"].data[...] = img
    net.blobs["flow"].data[...] = 0
    net.forward()
    np.testing.assert_allclose(net.blobs["warped"].data, img, rtol=1e-6)   # zero flow: identity
    flow = np.zeros((1, 2, 4, 5))
    flow[:, 0] = 1.0                                                       # one pixel right
    net.blobs["flow"].data[...] = flow
    net.forward()
    want = np.zeros_like(img)
    want[..., :4] = img[..., 1:]                                           # last column: outside
    np.testing.assert_allclose(net.blobs["warped"].data, want, rtol=1e-6, atol=1e-6)


def test_negsquare_forward_gradient_and_in_place():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4, 5))
    (y,) = run_layer(make_layer('type: "NegSquare"'), make_blobs([x]), make_blobs(1))
    want = np.array([-(v * v) for v in x.ravel()]).reshape(x.shape)
    np.testing.assert_allclose(y, want, rtol=1e-12)
    assert (y <= 0).all()
    check_layer_gradient(make_layer('type: "NegSquare"'), make_blobs([x[:1, :2]]), make_blobs(1),
                         stepsize=1e-4)
    # in place: the backward still uses the input, -2 x dy
    layer = make_layer('type: "NegSquare"')
    blobs = make_blobs([x])
    layer.setup(blobs, blobs)
    layer.forward(blobs, blobs)
    np.testing.assert_allclose(blobs[0].data, want, rtol=1e-12)
    blobs[0].diff[...] = 1.0
    layer.backward(blobs, [True], blobs)
    np.testing.assert_allclose(blobs[0].diff, -2 * x, rtol=1e-12)


NEGSQ_NET = """
input: "dist_R_L6" input_shape { dim: 1 dim: 9 dim: 3 dim: 4 }
layer {
  name: "neg_sq_dist_R_L6"
  type: "NegSquare"
  bottom: "dist_R_L6"
  top: "neg_sq_dist_R_L6"
}
layer { name: "exp" type: "Exp" bottom: "neg_sq_dist_R_L6" top: "kernel" }
"""


def test_negsquare_in_a_net():
    from caffepy.net import Net
    from caffepy.proto import caffe_pb2, io as proto_io
    net = Net(proto_io.read_net(NEGSQ_NET), caffe_pb2.TEST)
    d = np.random.default_rng(5).standard_normal((1, 9, 3, 4))
    net.blobs["dist_R_L6"].data[...] = d
    net.forward()
    assert net.blobs["kernel"].shape == (1, 9, 3, 4)
    np.testing.assert_allclose(net.blobs["kernel"].data, np.exp(-d ** 2), rtol=1e-5)


def test_expmax_subtracts_the_first_items_channel_max_and_scales():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 2, 2))
    text = 'type: "ExpMax" expmax_param { base: 2 scale: 0.5 shift: 1 }'
    layer, bottom, top = make_layer(text), make_blobs([x]), make_blobs(1)
    (y,) = run_layer(layer, bottom, top)
    shifted = x.copy()
    shifted[0] -= x[0].max(axis=0)                     # item 1: nothing subtracted, as the fork
    np.testing.assert_allclose(y, 2.0 * 2.0 ** (0.5 * shifted))
    dy = rng.standard_normal(y.shape)
    top[0].diff[...] = dy
    layer.backward(top, [True], bottom)
    np.testing.assert_allclose(bottom[0].diff, dy * y * 0.5 * np.log(2.0))
    # where no max is subtracted the fork's gradient is the exact one
    h = 1e-6
    for idx in [(1, 0, 0, 0), (1, 2, 1, 1)]:
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        yp = run_layer(make_layer(text), make_blobs([xp]), make_blobs(1))[0]
        ym = run_layer(make_layer(text), make_blobs([xm]), make_blobs(1))[0]
        np.testing.assert_allclose(np.sum(dy * (yp - ym)) / (2 * h), bottom[0].diff[idx],
                                   rtol=1e-5)
    with pytest.raises(NetError, match="strictly positive"):
        run_layer(make_layer('type: "ExpMax" expmax_param { base: 0 }'), make_blobs([x]),
                  make_blobs(1))
