"""GPU Scale and Bias: per-channel affine maps broadcast over (outer, channels, inner).

x is viewed as (outer, C, inner) with C the product of the operand's dims (``self.dims`` from the
CPU layer's reshape); ch(i) = (i / inner) % C.

    Scale: y[i] = x[i] * s[ch(i)] (+ b[ch(i)])     Bias: y[i] = x[i] + b[ch(i)]

Backward is one pass (``channel_grads``: a block per channel reduces over outer and inner):
dL/db = sum dL/dy and dL/ds = sum dL/dy * x (accumulated into learned parameters, written into a
bottom[1]), and in the same pass dL/dx = dL/dy * s (Scale) or dL/dy (Bias). In place, Scale keeps
a device copy of x for dL/ds; as Caffe, a bottom[0] that gets no gradient is left holding the
product dL/dy * x in its diff (not in place, and unless the scale covers all of x).
"""
from ... import gpu
from ..kernels import register_source
from ..ops import workspace
from . import gpu_impl

SOURCE = register_source("scale", r"""
__global__ void channel_affine(const int n, const Dtype* x, const Dtype* s, const Dtype* b,
    const int has_scale, const int has_bias, const int channels, const int inner, Dtype* y) {
  CUDA_KERNEL_LOOP(i, n) {
    const int c = (i / inner) % channels;
    Dtype v = has_scale ? x[i] * s[c] : x[i];
    y[i] = has_bias ? v + b[c] : v;
  }
}
__global__ void channel_grads(const int n, const Dtype* dy, const Dtype* x, const Dtype* s,
    const int outer, const int channels, const int inner, const int want_db, const int want_ds,
    const Dtype beta_ds, const int dx_mode, Dtype* db, Dtype* ds, Dtype* dx) {
  // n = channels * blockDim.x. dx_mode: 0 none, 1 dy * s[c], 2 dy * x, 3 dy
  __shared__ Dtype sum_dy[1024];
  __shared__ Dtype sum_dyx[1024];
  const int m = outer * inner;
  for (int c = blockIdx.x; c < channels; c += gridDim.x) {
    Dtype a = 0, b = 0;
    for (int j = threadIdx.x; j < m; j += blockDim.x) {
      const long long i = ((long long)(j / inner) * channels + c) * inner + (j % inner);
      const Dtype g = dy[i];
      a += g;
      if (want_ds || dx_mode == 2) {
        const Dtype gx = g * x[i];
        b += gx;
        if (dx_mode == 2) dx[i] = gx;
      }
      if (dx_mode == 1) dx[i] = g * s[c];
      else if (dx_mode == 3) dx[i] = g;
    }
    sum_dy[threadIdx.x] = a;
    sum_dyx[threadIdx.x] = b;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
      if (threadIdx.x < k) {
        sum_dy[threadIdx.x] += sum_dy[threadIdx.x + k];
        sum_dyx[threadIdx.x] += sum_dyx[threadIdx.x + k];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (want_db) db[c] += sum_dy[0];
      if (want_ds) ds[c] = sum_dyx[0] + beta_ds * ds[c];
    }
    __syncthreads();
  }
}
""")

NONE, BY_SCALE, BY_X, COPY = 0, 1, 2, 3


def _k(layer):
    return gpu.current().kernels("scale", layer.dtype)


def _grads(layer, dy, x, s, db, ds, beta_ds, dx_mode, dx):
    from ..kernels import THREADS
    outer, c, inner = layer.dims
    _k(layer).channel_grads(c * THREADS, dy, x, s, outer, c, inner, int(db is not None),
                            int(ds is not None), beta_ds, dx_mode, db, ds, dx)


@gpu_impl("Scale")
class Scale(object):
    def forward_gpu(self, bottom, top):
        dev = gpu.current()
        n = bottom[0].count
        x = bottom[0].gpu_data
        if top[0] is bottom[0] and self._gpu_wants_scale_grad(bottom):
            saved = workspace(self, "saved_x", n, self.dtype)
            dev.copy(x, saved, n)
        s = (bottom[1] if len(bottom) > 1 else self.blobs[0]).gpu_data
        has_b = self.bias_index is not None
        b = self.blobs[self.bias_index].gpu_data if has_b else None
        _k(self).channel_affine(n, x, s, b, 1, int(has_b), self.dims[1], self.dims[2],
                                top[0].mutable_gpu_data)

    def _gpu_wants_scale_grad(self, bottom):
        return self.param_propagate_down[0] if len(bottom) == 1 else True

    def backward_gpu(self, top, propagate_down, bottom):
        n = bottom[0].count
        dy = top[0].gpu_diff
        db = (self.blobs[self.bias_index].mutable_gpu_diff
              if self.bias_index is not None and self.param_propagate_down[self.bias_index]
              else None)
        from_param = len(bottom) == 1
        want_ds = self.param_propagate_down[0] if from_param else propagate_down[1]
        ds = x = None
        in_place = top[0] is bottom[0]
        if want_ds:
            ds = self.blobs[0].mutable_gpu_diff if from_param else bottom[1].mutable_gpu_diff
            x = workspace(self, "saved_x", n, self.dtype) if in_place else bottom[0].gpu_data
        s = (bottom[1] if len(bottom) > 1 else self.blobs[0]).gpu_data
        if propagate_down[0]:
            mode = BY_SCALE
        elif want_ds and not in_place and self.dims[1] != n:
            mode = BY_X                               # Caffe's scratch (see the module doc)
        else:
            mode = NONE
        if db is None and ds is None and mode == NONE:
            return
        _grads(self, dy, x, s, db, ds, 1.0 if from_param else 0.0, mode,
               bottom[0].mutable_gpu_diff if mode != NONE else None)


@gpu_impl("Bias")
class Bias(object):
    def forward_gpu(self, bottom, top):
        b = (bottom[1] if len(bottom) > 1 else self.blobs[0]).gpu_data
        _k(self).channel_affine(bottom[0].count, bottom[0].gpu_data, None, b, 0, 1, self.dims[1],
                                self.dims[2], top[0].mutable_gpu_data)

    def backward_gpu(self, top, propagate_down, bottom):
        from_param = len(bottom) == 1
        want = self.param_propagate_down[0] if from_param else propagate_down[1]
        copy = propagate_down[0] and top[0] is not bottom[0]
        if not (want or copy):
            return
        db = None
        if want:
            db = self.blobs[0].mutable_gpu_diff if from_param else bottom[1].mutable_gpu_diff
            if not from_param:
                gpu.current().fill(db, 0)             # written, not accumulated, for a bottom
        _grads(self, top[0].gpu_diff, None, None, db, None, 0.0, COPY if copy else NONE,
               bottom[0].mutable_gpu_diff if copy else None)
