import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.forks.segmentation.densecrf import fast_exp
from caffepy.forks.segmentation.permutohedral import Lattice
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

DT = ('type: "DomainTransform" domain_transform_param { num_iter: 2 spatial_sigma: 3 '
      'range_sigma: 2 min_weight: 0.05 }')


def _dt_ref(x, g, h, w, T=2, ss=3.0, rs=2.0, mw=0.05):
    """A transcription of domain_transform_layer.cpp's forward loops (one image)."""
    y = x.copy()
    for t in range(T):
        sigma = ss * np.sqrt(3) * 2.0 ** (T - t - 1) / np.sqrt(4.0 ** T - 1)
        a = np.clip(np.exp(-np.sqrt(2) / sigma * (1 + g * ss / rs)), mw, 1)
        for c in range(x.shape[0]):
            o = y[c]
            for r in range(h):
                for i in range(1, w):
                    o[r, i] += a[r, i] * (o[r, i - 1] - o[r, i])
            for r in range(h):
                for i in range(w - 2, -1, -1):
                    o[r, i] += a[r, i + 1] * (o[r, i + 1] - o[r, i])
            for i in range(w):
                for r in range(1, h):
                    o[r, i] += a[r, i] * (o[r - 1, i] - o[r, i])
            for i in range(w):
                for r in range(h - 2, -1, -1):
                    o[r, i] += a[r + 1, i] * (o[r + 1, i] - o[r, i])
    return y


def test_domain_transform_matches_loops_and_gradient():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 4, 5))
    g = rng.uniform(0.1, 1.0, (2, 1, 4, 5))
    size = np.array([[4, 5], [3, 4]], dtype=float).reshape(2, 2, 1, 1)
    top, = run_layer(make_layer(DT), make_blobs([x, g, size]), make_blobs(1))
    for n, (h, w) in enumerate([(4, 5), (3, 4)]):
        np.testing.assert_allclose(top[n], _dt_ref(x[n], g[n, 0], h, w), rtol=1e-12)
    np.testing.assert_array_equal(top[1, :, 3], x[1, :, 3])      # outside the input size
    check_layer_gradient(make_layer(DT), make_blobs([x, g, size]), make_blobs(1),
                         check_bottom=[0, 1])
    only = make_layer(DT.replace('"DomainTransform"', '"DomainTransformForwardOnly"'))
    np.testing.assert_allclose(run_layer(only, make_blobs([x, g, size]), make_blobs(1))[0], top)
    with pytest.raises(CaffeError, match="exceeds"):
        run_layer(make_layer(DT), make_blobs([x, g, size + 1]), make_blobs(1))


def test_fast_exp_is_the_forks_approximation():
    x = np.linspace(-25, 0, 2001).astype(np.float32)
    e = fast_exp(x)
    inside = x >= -20
    np.testing.assert_allclose(e[inside], np.exp(x[inside].astype(np.float64)), rtol=2e-5)
    assert np.all(e[~inside] == 0)


def _crf_ref(scores, image, iters, pos, bi):
    """The layer's mean field written with Lattice directly and numpy's exp (no fast_exp)."""
    M, H, W = scores.shape
    r, c = np.mgrid[0:H, 0:W].astype(np.float32)
    xy = np.stack([c.ravel(), r.ravel()], 1)
    feats = [(xy / np.float32(s), w) for w, s in pos]
    rgb = image.reshape(3, -1).T.astype(np.float32)
    feats += [(np.concatenate([xy / np.float32(s), rgb / np.float32(t)], 1), w)
              for w, s, t in bi]
    filters = []
    for f, w in feats:
        lat = Lattice(f)
        filters.append((lat, w, 1 / (lat.compute(np.ones(H * W, np.float32)) + 1e-20)))
    u = scores.reshape(M, -1).astype(np.float64)

    def softmax(v):
        e = np.exp(v - v.max(0))
        return e / e.sum(0)
    q = softmax(u)
    for _ in range(iters):
        q = softmax(u + sum(w * nrm * lat.compute(q.astype(np.float32)) for lat, w, nrm in filters))
    return q.reshape(M, H, W)


def test_densecrf_mean_field_with_padding():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 6, 7)) * 2
    img = rng.uniform(-50, 50, (2, 3, 6, 7))
    dims = np.array([[6, 7], [4, 5]], dtype=float).reshape(2, 1, 1, 2)
    text = ('type: "DenseCRF" dense_crf_param { max_iter: 3 pos_xy_std: 2 pos_w: 3 '
            'bi_xy_std: 5 bi_rgb_std: 10 bi_w: 4 %s }')
    layer = make_layer(text % "", dtype=np.float32)
    top, = run_layer(layer, make_blobs([x, dims, img], np.float32), make_blobs(1, np.float32))
    ref0 = _crf_ref(x[0], img[0], 3, [(3, 2)], [(4, 5, 10)])
    np.testing.assert_allclose(top[0], ref0, atol=1e-4)
    # image 1 is 4 x 5 (padded); the fork filters it with image 0's colours
    ref1 = _crf_ref(x[1, :, :4, :5], img[0, :, :4, :5], 3, [(3, 2)], [(4, 5, 10)])
    np.testing.assert_allclose(top[1, :, :4, :5], ref1, atol=1e-4)
    assert np.all(top[1, :, 4:] == 0) and np.all(top[1, :, :, 5:] == 0)
    logs = make_layer(text % "output_probability: false", dtype=np.float32)
    top2, = run_layer(logs, make_blobs([x, dims, img], np.float32), make_blobs(1, np.float32))
    np.testing.assert_allclose(top2[0], np.log(top[0]), rtol=1e-5)
    none = make_layer('type: "DenseCRF" dense_crf_param { max_iter: 0 }', dtype=np.float32)
    top3, = run_layer(none, make_blobs([x, dims], np.float32), make_blobs(1, np.float32))
    e = np.exp(x[0] - x[0].max(0))
    np.testing.assert_allclose(top3[0], e / e.sum(0), atol=1e-5)


def test_ccnn_densecrf_variant_gives_the_label_map():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 3, 5, 6)) * 2
    img = rng.uniform(0, 255, (1, 3, 5, 6))
    layer = make_layer('type: "DenseCRF" bottom: "s" bottom: "im" densecrf_param { x_gauss: 2 '
                       'y_gauss: 2 wt_gauss: 3 x_bilateral: 5 y_bilateral: 5 r_bilateral: 30 '
                       'g_bilateral: 30 b_bilateral: 30 wt_bilateral: 4 }', dtype=np.float32)
    assert type(layer).__name__ == "CCNNDenseCRFLayer"
    top, = run_layer(layer, make_blobs([x, img], np.float32), make_blobs(1, np.float32))
    assert top.shape == (1, 1, 5, 6)
    rgb = np.trunc(img[0, ::-1])          # BGR -> RGB, cast to unsigned char
    q = _crf_ref(x[0], rgb, 10, [(3, 2)], [(4, 5, 30)])
    np.testing.assert_array_equal(top[0, 0], np.argmax(q, axis=0))
    plain = make_layer('type: "DenseCRF" bottom: "s" bottom: "im"')
    assert type(plain).__name__ == "CCNNDenseCRFLayer"
    deeplab = make_layer('type: "DenseCRF" bottom: "s" bottom: "d" bottom: "im"')
    assert type(deeplab).__name__ == "DenseCRFLayer"
