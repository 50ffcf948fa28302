import itertools
import math

import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

P3D = 'type: "Pooling3D" pooling3d_param { pool: %s %s }'


def _pool_ref(x, kernel, stride, pad, is_max):
    """pooling3d_layer.cpp's loops: ceil sizes, the padded clip, windows cut to the input."""
    size = x.shape[2:]
    out = [int(math.ceil((n + 2 * p - k) / s)) + 1 for n, k, s, p in zip(size, kernel, stride, pad)]
    if any(pad):
        out = [o - 1 if (o - 1) * s >= n + p else o for o, n, s, p in zip(out, size, stride, pad)]
    y = np.zeros(x.shape[:2] + tuple(out))
    for idx in itertools.product(*[range(o) for o in out]):
        start = [i * s - p for i, s, p in zip(idx, stride, pad)]
        end = [min(b + k, n + p) for b, k, n, p in zip(start, kernel, size, pad)]
        count = np.prod([e - b for b, e in zip(start, end)])
        lo = [max(b, 0) for b in start]
        hi = [min(e, n) for e, n in zip(end, size)]
        win = x[:, :, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]
        y[(slice(None), slice(None)) + idx] = (win.max(axis=(2, 3, 4)) if is_max
                                               else win.sum(axis=(2, 3, 4)) / count)
    return y


@pytest.mark.parametrize("pool,fields,kernel,stride,pad", [
    ("MAX", "kernel_l: 2 stride_l: 2 pad_l: 0 kernel_size: 3 stride: 2 pad: 0",
     (2, 3, 3), (2, 2, 2), (0, 0, 0)),
    ("MAX", "kernel_l: 3 stride_l: 2 pad_l: 1 kernel_h: 3 kernel_w: 2 stride: 2 pad: 1",
     (3, 3, 2), (2, 2, 2), (1, 1, 1)),
    ("AVE", "kernel_l: 2 stride_l: 1 pad_l: 1 kernel_size: 3 stride_h: 2 stride_w: 1 "
     "pad_h: 1 pad_w: 0", (2, 3, 3), (1, 2, 1), (1, 1, 0)),
])
def test_p3d_pooling_matches_the_forks_loops(pool, fields, kernel, stride, pad):
    x = np.random.default_rng(0).standard_normal((2, 2, 5, 6, 7))
    (y,) = run_layer(make_layer(P3D % (pool, fields)), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, _pool_ref(x, kernel, stride, pad, pool == "MAX"), rtol=1e-6)
    check_layer_gradient(make_layer(P3D % (pool, fields)), make_blobs([x]), make_blobs(1))


def test_p3d_global_pooling_and_refusals():
    x = np.random.default_rng(1).standard_normal((1, 3, 4, 5, 6))
    (y,) = run_layer(make_layer(P3D % ("AVE", "global_pooling: true stride_l: 1")),
                     make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y[:, :, 0, 0, 0], x.mean(axis=(2, 3, 4)), rtol=1e-6)
    for fields, msg in (("kernel_size: 2 stride_l: 2", "kernel_l is required"),
                        ("kernel_l: 2 kernel_size: 2 kernel_h: 2 kernel_w: 2", "kernel_size OR"),
                        ("kernel_l: 2 kernel_size: 2 pad_h: 1", "pad_h and pad_w"),
                        ("kernel_l: 2 kernel_size: 2 pad_l: 2", "smaller than its kernel")):
        with pytest.raises(CaffeError, match=msg):
            run_layer(make_layer(P3D % ("MAX", fields)), make_blobs([x]), make_blobs(1))
