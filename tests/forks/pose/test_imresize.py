import math

import numpy as np
import pytest

from caffepy.errors import ShapeError
from caffepy.testing import make_blobs, make_layer, run_layer


def _cubic(v0, v1, v2, v3, t):
    a = -0.5 * v0 + 1.5 * v1 - 1.5 * v2 + 0.5 * v3
    b = v0 - 2.5 * v1 + 2.0 * v2 - 0.5 * v3
    c = -0.5 * v0 + 0.5 * v2
    return ((a * t + b) * t + c) * t + v1


def _neighbours(v, size, pad):
    i1 = max(int(v + 1e-5), 0)
    i0 = i1 if i1 - 1 < 0 else i1 - 1
    i2 = size - 1 if i1 + 1 >= size else i1 + 1
    i3 = size - 1 if i2 + 1 >= size else i2 + 1
    return [i0 + pad, i1 + pad, i2 + pad, i3 + pad], v - i1


def imresize_ref(x, th, tw, start_scale=1.0, scale_gap=0.1):
    """caffe_rtpose's imresize_cubic_kernel, one output pixel at a time."""
    S, C, H, W = x.shape
    out = np.zeros((1, C, th, tw))
    for c in range(C):
        for y in range(th):
            for xx in range(tw):
                total = 0.0
                for n in range(S):
                    pw = math.floor(W // 2 * (1 - start_scale + n * scale_gap))
                    ph = math.floor(H // 2 * (1 - start_scale + n * scale_gap))
                    ow, oh = W - 2 * pw, H - 2 * ph
                    xo = (xx - (tw / ow / 2 - 0.5)) * (ow / tw)
                    yo = (y - (th / oh / 2 - 0.5)) * (oh / th)
                    xn, dx = _neighbours(xo, ow, pw)
                    yn, dy = _neighbours(yo, oh, ph)
                    rows = [_cubic(*[x[n, c, yn[i], xn[j]] for j in range(4)], dx)
                            for i in range(4)]
                    total += _cubic(*rows, dy)
                out[0, c, y, xx] = total / S
    return out


def test_imresize_same_size_is_identity():
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 5))
    layer = make_layer('type: "ImResize" imresize_param { target_spatial_width: 5 '
                       'target_spatial_height: 4 }')
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, x, atol=1e-12)


@pytest.mark.parametrize("param,S,th,tw", [
    ("factor: 2.5", 1, 10, 12),
    ("target_spatial_width: 7 target_spatial_height: 3", 1, 3, 7),
    ("factor: 2 start_scale: 1 scale_gap: 0.5", 2, 8, 10),
    ("target_spatial_width: 9 target_spatial_height: 6 start_scale: 0.9 scale_gap: 0.3", 3, 6, 9),
])
def test_imresize_matches_fork_kernel(param, S, th, tw):
    x = np.random.default_rng(1).standard_normal((S, 2, 4, 5))
    p = dict(start_scale=1.0, scale_gap=0.1)
    for key in p:
        if key in param:
            p[key] = float(param.split(key + ": ")[1].split()[0])
    (y,) = run_layer(make_layer('type: "ImResize" imresize_param { %s }' % param),
                     make_blobs([x]), make_blobs(1))
    assert y.shape == (1, 2, th, tw)
    np.testing.assert_allclose(y, imresize_ref(x, th, tw, **p), rtol=1e-10, atol=1e-12)


def test_imresize_rejects_empty_crop():
    with pytest.raises(ShapeError, match="crops"):
        run_layer(make_layer('type: "ImResize" imresize_param { scale_gap: 1 }'),
                  make_blobs([np.ones((3, 1, 4, 4))]), make_blobs(1))
