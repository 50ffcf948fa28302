"""numba kernels of the convolution's training step (through :mod:`caffepy.math.kernels`, as
:mod:`caffepy.math._numba_kernels`, which re-exports them): the transposes between the images
(N, M, P) and the GEMM's 'last' column order (M, P * N), the bias gradient summed in the same
pass, and the stride > 1 im2col of that order. Parallel over the M rows; cached on disk."""
from numba import njit, prange

_opts = dict(parallel=True, cache=True, nogil=True, fastmath=False)


@njit(**_opts)
def image_to_rows(dy, bsum, out):
    """dy (N, M, P) -> out (M, P * N) (image index innermost); bsum[m] += sum of dy[:, m] when
    bsum is not empty (the bias gradient, summed in float64)."""
    n, m, p = dy.shape
    want = bsum.shape[0] > 0
    for mi in prange(m):
        dst = out[mi]
        s = 0.0
        for q0 in range(0, p, 16):
            q1 = min(q0 + 16, p)
            for b in range(n):
                src = dy[b, mi]
                for q in range(q0, q1):
                    v = src[q]
                    s += v
                    dst[q * n + b] = v
        if want:
            bsum[mi] += s


@njit(**_opts)
def rows_to_image(a, bias, slope, relu, out):
    """a (M, P * N) -> out (N, M, P) [+ bias[m]] [then leaky ReLU with ``slope`` if relu]: each
    image's row written in one contiguous run (the strided reads stay in the cache)."""
    n, m, p = out.shape
    has_bias = bias.shape[0] > 0
    for mi in prange(m):
        bv = bias[mi] if has_bias else 0.0
        src = a[mi]
        for b in range(n):
            dst = out[b, mi]
            for q in range(p):
                v = src[q * n + b] + bv
                if relu and v <= 0:
                    v = v * slope
                dst[q] = v
