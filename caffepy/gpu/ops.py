"""Element-wise device helpers shared by the GPU layers and solvers (the "util" kernel family),
and reductions through cuBLAS: sums are dot products with a cached vector of ones, per-row sums
are GEMVs (Caffe's ``caffe_gpu_gemv`` with a sum multiplier), so no kernel needs shared memory.
"""
from . import current as _device
from .kernels import register_source

SOURCE = register_source("util", r"""
__global__ void fill(const int n, const Dtype v, Dtype* y) {
  CUDA_KERNEL_LOOP(i, n) { y[i] = v; }
}
__global__ void scale_copy(const int n, const Dtype a, const Dtype* x, Dtype* y) {
  CUDA_KERNEL_LOOP(i, n) { y[i] = a * x[i]; }
}
__global__ void vadd(const int n, const Dtype* a, const Dtype* b, Dtype* y) {
  CUDA_KERNEL_LOOP(i, n) { y[i] = a[i] + b[i]; }
}
__global__ void vsub(const int n, const Dtype* a, const Dtype* b, Dtype* y) {
  CUDA_KERNEL_LOOP(i, n) { y[i] = a[i] - b[i]; }
}
__global__ void vmul(const int n, const Dtype* a, const Dtype* b, Dtype* y) {
  CUDA_KERNEL_LOOP(i, n) { y[i] = a[i] * b[i]; }
}
__global__ void vdiv(const int n, const Dtype* a, const Dtype* b, Dtype* y) {
  CUDA_KERNEL_LOOP(i, n) { y[i] = a[i] / b[i]; }
}
__global__ void axpby(const int n, const Dtype a, const Dtype* x, const Dtype b, Dtype* y) {
  CUDA_KERNEL_LOOP(i, n) { y[i] = a * x[i] + b * y[i]; }
}
__global__ void sqr(const int n, const Dtype* x, Dtype* y) {
  CUDA_KERNEL_LOOP(i, n) { y[i] = x[i] * x[i]; }
}
__global__ void mul_scalar_at(const int n, const Dtype* s, Dtype* y) {
  CUDA_KERNEL_LOOP(i, n) { y[i] = y[i] * s[0]; }
}
""")


def util(dev, dtype):
    return dev.kernels("util", dtype)


_ones = {}


def ones(dev, n, dtype):
    """A device vector of at least n ones (cached per device and dtype; grown when needed)."""
    key = (id(dev), str(dtype))
    v = _ones.get(key)
    if v is None or v.size < n:
        v = dev.empty(max(int(n), 1024), dtype)
        util(dev, dtype).fill(v.size, 1, v)
        _ones[key] = v
    return v[:n] if v.size != n else v


def dsum(dev, n, x):
    """sum(x[:n]) as a Python float (waits for the stream)."""
    if n == 0:
        return 0.0
    return dev.blas.dot(n, x, ones(dev, n, x.dtype))


def row_sums(dev, rows, cols, x, out, alpha=1.0, beta=0.0):
    """out[r] = alpha * sum_c x[r, c] + beta * out[r] for row-major x (rows x cols)."""
    dev.blas.gemv(False, rows, cols, alpha, x, ones(dev, cols, x.dtype), beta, out)


def col_sums(dev, rows, cols, x, out, alpha=1.0, beta=0.0):
    """out[c] = alpha * sum_r x[r, c] + beta * out[c]."""
    dev.blas.gemv(True, rows, cols, alpha, x, ones(dev, rows, x.dtype), beta, out)


def channel_sums(dev, n, c, s, x, out, tmp, alpha=1.0, beta=0.0):
    """out[ch] = alpha * sum over (n, s) of x viewed (n, c, s) + beta * out; tmp holds n * c."""
    row_sums(dev, n * c, s, x, tmp)
    col_sums(dev, n, c, tmp, out, alpha, beta)


def workspace(layer, name, count, dtype):
    """A device buffer kept on the layer between calls (reallocated when it must grow)."""
    key = "_gpu_ws_" + name
    buf = getattr(layer, key, None)
    if buf is None or buf.size < count or buf.dtype != dtype:
        buf = _device().empty(max(int(count), 1), dtype)
        setattr(layer, key, buf)
    return buf[:count] if buf.size != count else buf
