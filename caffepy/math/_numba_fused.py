"""numba kernels of the layer chains a net runs as one step (caffepy.net.fusion): a training
net's BatchNorm -> Scale -> ReLU, and Eltwise SUM -> ReLU (:func:`sum2_relu`,
:func:`relu_grad_to2`), and the ReLU of one value every fused path writes
(:func:`relu_value`); imported through :mod:`caffepy.math._numba_kernels`.

Per channel c of x (N, C, S), one channel at a time (its values stay in cache between passes),
``prange`` over the channels; sums in float64:

forward   mu, var = batch mean and biased variance of x (two passes), std = sqrt(var + eps),
          x_norm = (x - mu) / std (BatchNorm's top, rounded to the blob's dtype),
          z = x_norm * scale[c] + shift[c] (Scale), y = max(z, 0) + slope * min(z, 0) (ReLU, as
          Caffe's: +0 for a negative z at slope 0; y = z without it).
backward  g = dy if y > 0 else slope * dy (ReLU; g = dy without it),
          dscale[c] += sum(g x_norm), dshift[c] += sum(g) (Scale's parameter gradients),
          gs = scale[c] g (Scale's bottom gradient, BatchNorm's top gradient),
          dx = (gs - mean(gs) - x_norm mean(gs x_norm)) / std (BatchNorm's gradient), where
          mean(gs) = scale[c] sum(g) / m and mean(gs x_norm) = scale[c] sum(g x_norm) / m,
          m = N S: two passes over dy, y and x_norm instead of the three layers' six.

The separate layers' kernels (_numba_norm.py, _numba_kernels.py) give the same values up to the
float32 rounding of the intermediate gs (one ulp-level difference in the sums).
"""
from numba import njit, prange

from ._numba_norm import channel_stats

_opts = dict(parallel=True, cache=True, nogil=True, fastmath={"reassoc", "contract"})


@njit(inline="always")
def relu_value(v, slope):
    """Caffe's ReLU of one value: max(v, 0) + slope * min(v, 0) (std::max / std::min keep the first
    argument unless the other compares greater / smaller): a negative v gives +0 at slope 0, not
    the -0 of ``v * slope``; a NaN stays NaN. The fused paths (a convolution's, BatchNorm-Scale's or
    Eltwise SUM's ReLU) write it as caffepy's ReLU layer does."""
    mx = 0.0 if v < 0.0 else v
    mn = 0.0 if 0.0 < v else v
    return mx + slope * mn


@njit(**_opts)
def bn_scale_relu_train(x, eps, scale, shift, slope, relu, mu, var, std, x_norm, y):
    """The forward (module doc); y may be x itself (in place)."""
    n, c, s = x.shape
    for ci in prange(c):
        m, sd = channel_stats(x, ci, eps, mu, var, std)
        a, o = scale[ci], shift[ci]
        for b in range(n):
            for k in range(s):
                x_norm[b, ci, k] = (x[b, ci, k] - m) / sd
                z = x_norm[b, ci, k] * a + o
                y[b, ci, k] = relu_value(z, slope) if relu else z


@njit(**_opts)
def bn_scale_relu_train_backward(dy, y, x_norm, scale, std, slope, relu, dscale, dshift,
                                 want_scale, want_shift, gs, write_gs, dx):
    """The backward (module doc); dx may be dy itself (in place). ``write_gs``: also store gs
    (the gradient at BatchNorm's top, when that is a blob of its own)."""
    n, c, s = dy.shape
    count = n * s
    for ci in prange(c):
        sg = 0.0
        sgx = 0.0
        for b in range(n):
            for k in range(s):
                g = dy[b, ci, k]
                if relu and not y[b, ci, k] > 0:
                    g = g * slope
                sg += g
                sgx += g * x_norm[b, ci, k]
        if want_scale:
            dscale[ci] += sgx
        if want_shift:
            dshift[ci] += sg
        a, sd = scale[ci], std[ci]
        ma, mb = a * sg / count, a * sgx / count
        for b in range(n):
            for k in range(s):
                g = dy[b, ci, k]
                if relu and not y[b, ci, k] > 0:
                    g = g * slope
                g = g * a
                if write_gs:
                    gs[b, ci, k] = g
                dx[b, ci, k] = (g - ma - x_norm[b, ci, k] * mb) / sd


@njit(parallel=True, cache=True, nogil=True, fastmath=False)     # numpy's float32 sum, bit for bit
def sum2_relu(a, b, slope, y):
    """Flat a, b, y: y = relu(a + b) (Eltwise SUM of two bottoms, then an in-place ReLU)."""
    for i in prange(a.shape[0]):
        y[i] = relu_value(a[i] + b[i], slope)


@njit(parallel=True, cache=True, nogil=True, fastmath=False)
def relu_grad_to2(y, dy, slope, dx0, dx1, want0, want1):
    """Flat: g = dy if y > 0 else slope dy; dy = g (the in-place ReLU's own diff), dx0 = dx1 = g
    (Eltwise SUM's bottoms, each when wanted)."""
    for i in prange(y.shape[0]):
        g = dy[i] if y[i] > 0 else dy[i] * slope
        dy[i] = g
        if want0:
            dx0[i] = g
        if want1:
            dx1[i] = g


@njit(parallel=True, cache=True, nogil=True, fastmath=False)
def relu_grad_sum2_to2(y, dt0, dt1, slope, dy, dx0, dx1, want0, want1):
    """Flat: d = dt0 + dt1 (a Split's two tops' diffs, summed into its bottom's), g = d if
    y > 0 else slope d; dy = g (the in-place ReLU's own diff), dx0 = dx1 = g (Eltwise SUM's
    bottoms, each when wanted)."""
    for i in prange(y.shape[0]):
        d = dt0[i] + dt1[i]
        g = d if y[i] > 0 else d * slope
        dy[i] = g
        if want0:
            dx0[i] = g
        if want1:
            dx1[i] = g
