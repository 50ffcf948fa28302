"""CPU math primitives shared by layers and solvers (Caffe's math_functions + im2col, in numpy).

im2col / col2im work on a whole batch at once and on any number of spatial axes:

    x:   (N, C, *S)                        S = spatial shape, len(S) = D
    col: (N, C * prod(K), prod(O))         layout="image"   (Caffe's per-image column buffer)
         (C * prod(K), N * prod(O))        layout="batch"   (one GEMM for the whole batch)
         (C * prod(K), prod(O) * N)        layout="last"    (the same, image index innermost)

with O[d] = (S[d] + 2 P[d] - (D[d] (K[d] - 1) + 1)) / St[d] + 1 for kernel K, pad P, stride St
and dilation D, divided as Caffe does (truncated toward zero, caffepy.math.sizes): a kernel that
overhangs the padded input by less than the stride gives one output, whose taps past the input read
zeros (the padded buffers get that overhang as extra trailing zeros). Rows are ordered
(c, k_0, ..., k_{D-1}) as in Caffe, so a weight blob (M, C, *K) reshaped to (M, C * prod(K))
multiplies ``col`` directly. im2col is one strided copy out of a zero-padded input
(``numpy.lib.stride_tricks.as_strided``); col2im is its adjoint: a loop over the prod(K) kernel
offsets, each adding a whole strided slab back into the padded input.
With layout="last" the batch axis is innermost in both the column and the (transposed, padded)
input, so for stride 1 every slab is a run of ``O[-1] * N`` contiguous numbers: numpy's inner loops
are long (with N first they are ``O[-1]`` long, and the per-loop overhead dominates small images).
"""
import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import kernels
from .sizes import conv_out_shape, overhangs  # noqa: F401  (conv_out_shape: used by layers)


def padded_shape(spatial, kernel, pad, stride, dilation):
    """Spatial shape of the zero-padded input im2col reads: S + 2 pad, plus the last window's
    overhang past it (nonzero only where Caffe's truncating division gives that window)."""
    out_shape = conv_out_shape(spatial, kernel, pad, stride, dilation)
    return tuple(s + 2 * p + e for s, p, e in
                 zip(spatial, pad, overhangs(spatial, kernel, pad, stride, dilation, out_shape)))


def pad_spatial(x, pad, value=0, extra=None, out=None):
    """Pad the trailing len(pad) axes of ``x`` by ``pad`` before and ``pad + extra`` after.

    ``out``: an optional preallocated array of the padded shape (its border is overwritten).
    """
    nd = len(pad)
    extra = extra or (0,) * nd
    lead = x.shape[:x.ndim - nd]
    shape = lead + tuple(s + 2 * p + e for s, p, e in zip(x.shape[-nd:], pad, extra))
    if not any(pad) and not any(extra):
        return x
    if out is None or out.shape != shape or out.dtype != x.dtype:
        out = np.empty(shape, dtype=x.dtype)
    out.fill(value)
    inner = (Ellipsis,) + tuple(slice(p, p + s) for p, s in zip(pad, x.shape[-nd:]))
    out[inner] = x
    return out


def _window_view(xp, kernel, out_shape, stride, dilation):
    """Strided view (N, C, *K, *O) of the padded input ``xp`` (N, C, *Sp)."""
    st = xp.strides
    sp_strides = st[2:]
    shape = xp.shape[:2] + tuple(kernel) + tuple(out_shape)
    strides = st[:2] + tuple(s * d for s, d in zip(sp_strides, dilation)) \
        + tuple(s * t for s, t in zip(sp_strides, stride))
    return as_strided(xp, shape=shape, strides=strides, writeable=False)


def _kernel_offsets(kernel, dilation, stride, out_shape):
    """(offset, spatial slices) for each kernel offset: the slab of the padded input that holds
    that offset of every window (col2im adds each column slab back there)."""
    for offs in itertools.product(*[range(k) for k in kernel]):
        yield offs, tuple(slice(o * d, o * d + st * (m - 1) + 1, st)
                          for o, d, st, m in zip(offs, dilation, stride, out_shape))


def _last_padded(x, pad, padded, out=None):
    """x (N, C, *S) -> zero-padded (C, *padded, N) (the batch axis last)."""
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    shape = (c,) + tuple(padded) + (n,)
    if out is None or out.shape != shape or out.dtype != x.dtype:
        out = np.empty(shape, dtype=x.dtype)
    if tuple(padded) != tuple(spatial):
        out.fill(0)
    inner = (slice(None),) + tuple(slice(p, p + s) for p, s in zip(pad, spatial)) + (slice(None),)
    np.copyto(out[inner], np.moveaxis(x, 0, -1))
    return out


def _im2col_last(x, kernel, pad, stride, dilation, out=None, pad_buffer=None):
    n, c = x.shape[:2]
    out_shape = conv_out_shape(x.shape[2:], kernel, pad, stride, dilation)
    k = kernels.get() if len(kernel) == 2 else None
    if k is not None:
        shape = (c * kernel[0] * kernel[1], out_shape[0] * out_shape[1] * n)
        if out is None or out.shape != shape or out.dtype != x.dtype:
            out = np.empty(shape, dtype=x.dtype)
        if n == 1:      # one image: its columns straight from x, no padded copy
            k.im2col_image(np.ascontiguousarray(x[0]), kernel[0], kernel[1], pad[0], pad[1],
                           stride[0], stride[1], dilation[0], dilation[1], out_shape[0],
                           out_shape[1], out)
            return out
        pshape = (c,) + padded_shape(x.shape[2:], kernel, pad, stride, dilation) + (n,)
        xp = pad_buffer
        if xp is None or xp.shape != pshape or xp.dtype != x.dtype:
            xp = np.empty(pshape, dtype=x.dtype)
        k.pad_last(np.ascontiguousarray(x), pad[0], pad[1], xp)
        k.im2col_last(xp, kernel[0], kernel[1], stride[0], stride[1], dilation[0], dilation[1],
                      out_shape[0], out_shape[1], out)
        return out
    xp = _last_padded(x, pad, padded_shape(x.shape[2:], kernel, pad, stride, dilation),
                      pad_buffer)                      # (C, *Sp, N)
    view = np.moveaxis(_window_view(np.moveaxis(xp, -1, 0), kernel, out_shape, stride, dilation),
                       0, -1)                          # (C, *K, *O, N)
    shape = (c * int(np.prod(kernel)), int(np.prod(out_shape)) * n)
    if out is None or out.shape != shape or out.dtype != x.dtype:
        out = np.empty(shape, dtype=x.dtype)
    np.copyto(out.reshape(view.shape), view)
    return out


def _col2im_last(col, x_shape, kernel, pad, stride, dilation, out=None):
    n, c = x_shape[:2]
    spatial = tuple(x_shape[2:])
    out_shape = conv_out_shape(spatial, kernel, pad, stride, dilation)
    k = kernels.get() if len(kernel) == 2 and col.flags.c_contiguous else None
    if k is not None and (out is None or out.flags.c_contiguous):
        if out is None:
            out = np.empty(x_shape, dtype=col.dtype)
        dx = out.reshape(x_shape)
        k.col2im_last(col.reshape(col.shape[0], -1) if col.ndim != 2 else col,
                      kernel[0], kernel[1], pad[0], pad[1], stride[0], stride[1],
                      dilation[0], dilation[1], out_shape[0], out_shape[1], dx)
        return dx
    colv = col.reshape((c,) + tuple(kernel) + tuple(out_shape) + (n,))
    xp = np.zeros((c,) + padded_shape(spatial, kernel, pad, stride, dilation) + (n,),
                  dtype=col.dtype)
    for offs, slab in _kernel_offsets(kernel, dilation, stride, out_shape):
        target = xp[(slice(None),) + slab]
        np.add(target, colv[(slice(None),) + offs], out=target)
    inner = (slice(None),) + tuple(slice(p, p + s) for p, s in zip(pad, spatial))
    result = np.moveaxis(xp[inner], -1, 0)
    if out is None:
        return np.ascontiguousarray(result)
    out.reshape(x_shape)[...] = result
    return out.reshape(x_shape)


def im2col(x, kernel, pad, stride, dilation, layout="image", out=None, pad_buffer=None):
    """Column buffer of a batch ``x`` (N, C, *S); see the module docstring for the layouts.

    ``out``: optional preallocated column array of the right shape and dtype.
    ``pad_buffer``: optional preallocated padded-input array (reused between calls).
    """
    if layout == "last":
        return _im2col_last(x, kernel, pad, stride, dilation, out, pad_buffer)
    nd = len(kernel)
    n, c = x.shape[:2]
    out_shape = conv_out_shape(x.shape[2:], kernel, pad, stride, dilation)
    xp = pad_spatial(x, pad, out=pad_buffer,
                     extra=overhangs(x.shape[2:], kernel, pad, stride, dilation, out_shape))
    view = _window_view(xp, kernel, out_shape, stride, dilation)
    kcount = int(np.prod(kernel))
    ocount = int(np.prod(out_shape))
    if layout == "image":
        shape = (n, c * kcount, ocount)
        dst_shape = (n, c) + tuple(kernel) + tuple(out_shape)
        src = view
    else:
        shape = (c * kcount, n * ocount)
        perm = (1,) + tuple(range(2, 2 + nd)) + (0,) + tuple(range(2 + nd, 2 + 2 * nd))
        dst_shape = (c,) + tuple(kernel) + (n,) + tuple(out_shape)
        src = view.transpose(perm)
    if out is None or out.shape != shape or out.dtype != x.dtype:
        out = np.empty(shape, dtype=x.dtype)
    np.copyto(out.reshape(dst_shape), src)
    return out


def col2im(col, x_shape, kernel, pad, stride, dilation, layout="image", out=None,
           pad_buffer=None):
    """Adjoint of :func:`im2col`: sum the columns back into an array of shape ``x_shape``.

    Writes (overwrites) ``out`` when given, else returns a new array.
    """
    if layout == "last":
        return _col2im_last(col, x_shape, kernel, pad, stride, dilation, out)
    nd = len(kernel)
    n, c = x_shape[:2]
    spatial = tuple(x_shape[2:])
    out_shape = conv_out_shape(spatial, kernel, pad, stride, dilation)
    if layout == "image":
        colv = col.reshape((n, c) + tuple(kernel) + tuple(out_shape))
    else:
        colv = col.reshape((c,) + tuple(kernel) + (n,) + tuple(out_shape))
        perm = (1 + nd, 0) + tuple(range(1, 1 + nd)) + tuple(range(2 + nd, 2 + 2 * nd))
        colv = colv.transpose(perm)
    padded = padded_shape(spatial, kernel, pad, stride, dilation)
    pshape = (n, c) + padded
    grown = padded != spatial
    if grown:
        if pad_buffer is None or pad_buffer.shape != pshape or pad_buffer.dtype != col.dtype:
            pad_buffer = np.empty(pshape, dtype=col.dtype)
        xp = pad_buffer
    else:
        if out is None:
            out = np.empty(pshape, dtype=col.dtype)
        xp = out.reshape(pshape)
    xp.fill(0)
    for offs, slab in _kernel_offsets(kernel, dilation, stride, out_shape):
        xp[(Ellipsis,) + slab] += colv[(slice(None), slice(None)) + offs]
    if grown:
        inner = (Ellipsis,) + tuple(slice(p, p + s) for p, s in zip(pad, spatial))
        if out is None:
            return xp[inner].copy()
        out.reshape(x_shape)[...] = xp[inner]
    return out.reshape(x_shape)


def relu_into(x, slope, y):
    """y = max(x, 0) + slope * min(x, 0), Caffe's ReLU (std::max / std::min: +0 for x < 0 at slope
    0, NaN stays NaN); y may be x. Below ``PARALLEL_MIN`` elements numpy's passes (the same
    bits) are faster than a kernel (:func:`flat_kernel`).

    The numpy passes have no branches: ``np.maximum(0, x)`` is std::max(x, 0) (numpy returns its
    second operand on equal zeros, as std::max its first: -0 stays -0; NaN propagates), and
    ``np.minimum(0, x)`` is std::min(x, 0). At slope 0 the second term is a zero of either sign
    (adding it changes nothing) except at x = -inf, where 0 * -inf makes Caffe's NaN: the term is
    left out unless x holds -inf. (``np.where`` on a mask of mixed signs took 4 ns an element,
    the max 1.)"""
    k = flat_kernel(x, y)
    if k is not None:
        k.relu(x.reshape(-1), slope, y.reshape(-1))
        return
    t = x.dtype.type
    if slope == 0 and not (x.size and np.fmin.reduce(x, axis=None) == -np.inf):
        np.maximum(t(0), x, out=y)
    else:
        np.add(np.maximum(t(0), x), t(slope) * np.minimum(t(0), x), out=y)


def relu_inplace(y, slope):
    """:func:`relu_into` in place (a fused activation); nothing if slope is None."""
    if slope is not None:
        relu_into(y, slope, y)


def caffe_sign(x):
    """Caffe's caffe_cpu_sign: (0 < x) - (x < 0) in x's type: +1, -1, and +0 for both zeros."""
    t = x.dtype.type
    return (t(0) < x).astype(x.dtype) - (x < t(0)).astype(x.dtype)


PARALLEL_MIN = 1 << 16    # elements: below this numpy's one-core pass beats a kernel's start-up


def flat_kernel(*arrays):
    """The numba kernels where they may run on these arrays (same dtype, C-contiguous, large
    enough), else None. The size is checked first: a small net never loads the kernels."""
    first = arrays[0]
    if first.size < PARALLEL_MIN or not all(
            a.flags.c_contiguous and a.dtype == first.dtype and a.size == first.size
            for a in arrays):
        return None
    return kernels.get()


def add_into(a, b, out):
    """``out[...] = a + b`` for arrays of one shape, in one pass over the cores (numba) or numpy's
    one; the same float sums either way."""
    k = flat_kernel(a, b, out)
    if k is None:
        np.add(a, b, out=out)
    else:
        k.add(a.reshape(-1), b.reshape(-1), out.reshape(-1))
    return out


def copy_into(src, out):
    """``out[...] = src`` (one shape), over the cores where the numba kernels may run."""
    k = flat_kernel(src, out)
    if k is None:
        np.copyto(out, src)
    else:
        k.copy(src.reshape(-1), out.reshape(-1))
    return out


def transpose_into(a, out):
    """``out[...] = a.T`` for a 2-d ``a`` (R, C), copied in slabs of rows that stay in the cache:
    128 rows of a tall ``a``, 16 of a wide one (measured 2-3x faster than numpy's one strided copy
    for the (positions x images) <-> (images x positions) transposes of the 'last' layout); small
    arrays and batches of fewer than 8 images in one copy."""
    r, c = a.shape
    if min(r, c) < 8:         # a vector or nearly (batch 1): one copy of contiguous runs
        block = 0
    else:
        block = (128 if r >= 256 else 0) if r >= c else (16 if c >= 4096 else 0)
    if not block:
        np.copyto(out, a.T)
        return out
    for i in range(0, r, block):
        np.copyto(out[:, i:i + block], a[i:i + block].T)
    return out


# -- BLAS-style helpers (row-major; numpy.matmul dispatches to the BLAS gemm) --------------------
def gemm(a, b, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, out=None):
    """``out = alpha * op(a) @ op(b) + beta * out`` (op = transpose when asked)."""
    a = a.T if trans_a else a
    b = b.T if trans_b else b
    if out is None or beta == 0:
        r = np.matmul(a, b, out=out) if out is not None else np.matmul(a, b)
        if alpha != 1:
            r *= alpha
        return r
    prod = np.matmul(a, b)
    if beta != 1:
        out *= beta
    if alpha != 1:
        prod *= alpha
    out += prod
    return out


_BLAS = {}


def _scipy_gemm(dtype):
    """scipy's BLAS gemm for float32 / float64 (None without scipy): it accumulates in place
    (beta = 1), which numpy's matmul cannot."""
    if dtype not in _BLAS:
        try:
            from scipy.linalg import blas
            _BLAS[dtype] = {np.dtype(np.float32): blas.sgemm,
                            np.dtype(np.float64): blas.dgemm}.get(dtype)
        except ImportError:
            _BLAS[dtype] = None
    return _BLAS[dtype]


def _fortran_operand(m):
    """(array, trans) giving the matrix ``m`` to a Fortran BLAS without a copy, or None."""
    if m.flags.f_contiguous:
        return m, 0
    if m.flags.c_contiguous:
        return m.T, 1
    return None


def gemm_accumulate(a, b, out):
    """``out += a @ b`` (2-d, ``out`` C-contiguous) without a temporary of out's size when scipy
    is installed: a Fortran gemm with beta = 1 on out^T += b^T a^T (a weight gradient summed into
    the diff, as Caffe's caffe_cpu_gemm with beta 1 does). numpy's matmul + add otherwise."""
    gemm_fn = _scipy_gemm(out.dtype) if out.flags.c_contiguous and out.ndim == 2 else None
    if gemm_fn is not None and a.dtype == b.dtype == out.dtype and out.size:
        x, y = _fortran_operand(b.T), _fortran_operand(a.T)
        if x is not None and y is not None:
            gemm_fn(1.0, x[0], y[0], beta=1.0, c=out.T, trans_a=x[1], trans_b=y[1],
                    overwrite_c=1)
            return out
    out += np.matmul(a, b)
    return out


def gemv(a, x, trans_a=False, alpha=1.0, beta=0.0, out=None):
    return gemm(a, x, trans_a=trans_a, alpha=alpha, beta=beta, out=out)


def axpy(alpha, x, y):
    """``y += alpha * x`` in place."""
    if alpha == 1:
        y += x
    else:
        y += alpha * x
    return y


def axpby(alpha, x, beta, y):
    """``y = alpha * x + beta * y`` in place."""
    y *= beta
    return axpy(alpha, x, y)


def scal(alpha, x):
    x *= alpha
    return x


def asum(x):
    return float(np.abs(x).sum(dtype=np.float64))


def dot(x, y):
    return float(np.dot(x.ravel(), y.ravel()))
