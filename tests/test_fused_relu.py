"""The ReLU every fused path writes (caffepy.math._numba_fused.relu_value inside a convolution's
output, the depthwise kernel, BatchNorm-Scale-ReLU and Eltwise SUM + ReLU) against Caffe's form,
byte for byte. Without numba there are no fused kernels and the test skips."""
import numpy as np
import pytest

from caffepy.math import kernels

needs_numba = pytest.mark.skipif(not kernels.available(), reason="numba not installed or off")


@needs_numba
@pytest.mark.parametrize("slope", [0.0, 0.25])
def test_fused_relus_write_caffes_relu(slope):
    """The ReLUs fused into a convolution's output (rows_to_image, the depthwise kernel), the
    BatchNorm-Scale chain and Eltwise SUM give max(z, 0) + slope * min(z, 0) byte for byte: a
    negative z gives +0 at slope 0 (z * slope would be -0), as Caffe's ReLU layer writes it."""
    from caffepy.math import _numba_kernels as K
    rng = np.random.RandomState(3)
    s = np.float32(slope)

    def caffe_relu(z):
        return np.maximum(z, np.float32(0)) + s * np.minimum(z, np.float32(0))

    def same_bytes(got, z):
        want = caffe_relu(z)
        assert got.tobytes() == want.tobytes()
        if slope == 0:
            assert (z < 0).any() and not np.signbit(got).any()

    a = rng.randn(4, 6).astype(np.float32)                  # M = 4 rows, P = 3 positions, N = 2
    bias = rng.randn(4).astype(np.float32)
    out = np.empty((2, 4, 3), np.float32)
    K.rows_to_image(a, bias, s, True, out)
    z = (a.reshape(4, 3, 2).transpose(2, 0, 1) + bias[None, :, None]).astype(np.float32)
    same_bytes(out, z)

    x = rng.randn(1, 2, 5, 5).astype(np.float32)
    w = rng.randn(2, 1, 3, 3).astype(np.float32)
    y = np.empty((1, 2, 3, 3), np.float32)
    K.dw_forward(x, w, np.zeros(0, np.float32), 3, 3, 0, 0, 1, 1, 1, 1, s, True, y)
    z = np.empty_like(y)
    K.dw_forward(x, w, np.zeros(0, np.float32), 3, 3, 0, 0, 1, 1, 1, 1, s, False, z)
    same_bytes(y, z)

    x = rng.randn(2, 3, 8).astype(np.float32)
    scale, shift = rng.rand(3).astype(np.float32) + 0.5, rng.randn(3).astype(np.float32)
    stats = [np.empty(3, np.float32) for _ in range(3)]
    xn, yr, yl = (np.empty_like(x) for _ in range(3))
    K.bn_scale_relu_train(x, 1e-5, scale, shift, s, True, *stats, xn, yr)
    K.bn_scale_relu_train(x, 1e-5, scale, shift, s, False, *stats, xn, yl)
    same_bytes(yr, yl)

    p, q = rng.randn(50).astype(np.float32), rng.randn(50).astype(np.float32)
    y = np.empty(50, np.float32)
    K.sum2_relu(p, q, s, y)
    same_bytes(y, p + q)
