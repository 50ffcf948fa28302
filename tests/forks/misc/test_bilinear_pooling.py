import ctypes
import ctypes.util

import numpy as np
import pytest

from caffepy.forks.misc.bilinear_pooling import glibc_rand
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_glibc_rand_matches_the_c_library():
    name = ctypes.util.find_library("c")
    if name is None or "libc.so" not in name:
        pytest.skip("no glibc here")
    libc = ctypes.CDLL(name)
    libc.srand(1)
    assert glibc_rand(1, 50) == [libc.rand() for _ in range(50)]


def test_bilinear_sums_outer_products_over_positions():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 2, 2)), rng.standard_normal((2, 4, 2, 2))
    y, = run_layer(make_layer('type: "Bilinear"'), make_blobs([a, b]), make_blobs(1))
    want = np.einsum("ncp,ndp->ncd", a.reshape(2, 3, 4), b.reshape(2, 4, 4))
    np.testing.assert_allclose(y.reshape(2, 3, 4), want)
    check_layer_gradient(make_layer('type: "Bilinear"'), make_blobs([a, b]), make_blobs(1))


@pytest.mark.parametrize("pool", ["true", "false"])
def test_compact_bilinear_is_the_fork_tensor_sketch(pool):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 3, 2, 3)), rng.standard_normal((2, 5, 2, 3))
    d = 8
    text = 'type: "CompactBilinear" compact_bilinear_param { num_output: %d sum_pool: %s }' % (
        d, pool)
    y, = run_layer(make_layer(text), make_blobs([a, b]), make_blobs(1))
    r = glibc_rand(1, 16)
    h0, s0 = [v % d for v in r[0:3]], [2 * (v % 2) - 1 for v in r[3:6]]
    h1, s1 = [v % d for v in r[6:11]], [2 * (v % 2) - 1 for v in r[11:16]]
    want = np.zeros((2, d, 2, 3))
    for n in range(2):
        for hh in range(2):
            for ww in range(3):
                for i in range(3):
                    for j in range(5):     # sketch outer product: bin (h0 + h1) mod D, times D
                        want[n, (h0[i] + h1[j]) % d, hh, ww] += (
                            d * s0[i] * s1[j] * a[n, i, hh, ww] * b[n, j, hh, ww])
    if pool == "true":
        want = want.sum(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(y, want, atol=1e-9)
    check_layer_gradient(make_layer(text), make_blobs([a, b]), make_blobs(1))
