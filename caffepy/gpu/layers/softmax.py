"""GPU Softmax over an axis and SoftmaxWithLoss (Caffe's softmax_layer.cu / softmax_loss_layer.cu).

The bottom is viewed (outer, channels, inner); per (outer, inner) column: max, subtract, exp,
sum, divide (five grid-stride kernels, no shared memory). Backward: dot over the channels, then
dx = (dy - dot) * y. SoftmaxWithLoss writes per-position losses -log(max(p, FLT_MIN)) and valid
counts, sums them with cuBLAS (one wait per forward, for the scalar loss) and in backward turns
p into p - onehot(label), zero at ignored positions, scaled by top_diff / normalizer.
"""
import numpy as np

from ... import gpu
from ..kernels import register_source
from ..ops import dsum, workspace
from . import gpu_impl

SOURCE = register_source("softmax", r"""
__global__ void channel_max(const int n, const Dtype* x, const int channels, const int inner,
    Dtype* out) {
  CUDA_KERNEL_LOOP(index, n) {
    const int o = index / inner, s = index % inner;
    Dtype m = -DTYPE_MAX;
    for (int c = 0; c < channels; ++c) m = max(x[((long long)o * channels + c) * inner + s], m);
    out[index] = m;
  }
}
__global__ void channel_subtract_exp(const int n, const Dtype* x, const Dtype* m,
    const int channels, const int inner, Dtype* y) {
  CUDA_KERNEL_LOOP(index, n) {
    const int o = index / channels / inner, s = index % inner;
    y[index] = exp(x[index] - m[o * inner + s]);
  }
}
__global__ void channel_sum(const int n, const Dtype* x, const int channels, const int inner,
    Dtype* out) {
  CUDA_KERNEL_LOOP(index, n) {
    const int o = index / inner, s = index % inner;
    Dtype t = 0;
    for (int c = 0; c < channels; ++c) t += x[((long long)o * channels + c) * inner + s];
    out[index] = t;
  }
}
__global__ void channel_div(const int n, const Dtype* sums, const int channels, const int inner,
    Dtype* y) {
  CUDA_KERNEL_LOOP(index, n) {
    const int o = index / channels / inner, s = index % inner;
    y[index] /= sums[o * inner + s];
  }
}
__global__ void channel_dot(const int n, const Dtype* a, const Dtype* b, const int channels,
    const int inner, Dtype* out) {
  CUDA_KERNEL_LOOP(index, n) {
    const int o = index / inner, s = index % inner;
    Dtype t = 0;
    for (int c = 0; c < channels; ++c) {
      const long long i = ((long long)o * channels + c) * inner + s;
      t += a[i] * b[i];
    }
    out[index] = t;
  }
}
__global__ void softmax_backward(const int n, const Dtype* dy, const Dtype* y, const Dtype* dots,
    const int channels, const int inner, Dtype* dx) {
  CUDA_KERNEL_LOOP(index, n) {
    const int o = index / channels / inner, s = index % inner;
    dx[index] = (dy[index] - dots[o * inner + s]) * y[index];
  }
}
__global__ void softmax_loss_forward(const int n, const Dtype* prob, const Dtype* label,
    const int channels, const int inner, const int has_ignore, const int ignore_label,
    Dtype* loss, Dtype* counts, Dtype* bad) {
  CUDA_KERNEL_LOOP(index, n) {
    const int o = index / inner, s = index % inner;
    const int l = (int)label[index];
    loss[index] = 0;
    counts[index] = 0;
    bad[index] = 0;
    if (has_ignore && l == ignore_label) continue;
    if (l < 0 || l >= channels) { bad[index] = 1; continue; }
    const Dtype p = prob[((long long)o * channels + l) * inner + s];
    loss[index] = -log(max(p, CAFFE_FLT_MIN));
    counts[index] = 1;
  }
}
__global__ void softmax_loss_backward(const int n, const Dtype* label, const int channels,
    const int inner, const int has_ignore, const int ignore_label, Dtype* dx) {
  CUDA_KERNEL_LOOP(index, n) {
    const int o = index / inner, s = index % inner;
    const int l = (int)label[index];
    if ((has_ignore && l == ignore_label) || l < 0 || l >= channels) {
      for (int c = 0; c < channels; ++c) dx[((long long)o * channels + c) * inner + s] = 0;
    } else {
      dx[((long long)o * channels + l) * inner + s] -= 1;
    }
  }
}
""")


def softmax_forward(layer, x, y, outer, channels, inner):
    """y = softmax(x) over the channel axis of the (outer, channels, inner) view."""
    k = gpu.current().kernels("softmax", layer.dtype)
    cols = outer * inner
    tmp = workspace(layer, "softmax_cols", cols, layer.dtype)
    n = outer * channels * inner
    k.channel_max(cols, x, channels, inner, tmp)
    k.channel_subtract_exp(n, x, tmp, channels, inner, y)
    k.channel_sum(cols, y, channels, inner, tmp)
    k.channel_div(n, tmp, channels, inner, y)


@gpu_impl("Softmax")
class Softmax(object):
    def _gpu_view(self, b):
        shape = b.shape
        outer = int(np.prod(shape[:self.axis], dtype=np.int64))
        return outer, shape[self.axis], int(np.prod(shape[self.axis + 1:], dtype=np.int64))

    def forward_gpu(self, bottom, top):
        softmax_forward(self, bottom[0].gpu_data, top[0].mutable_gpu_data,
                        *self._gpu_view(bottom[0]))

    def backward_gpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        outer, channels, inner = self._gpu_view(top[0])
        k = gpu.current().kernels("softmax", self.dtype)
        y, dy = top[0].gpu_data, top[0].gpu_diff
        dots = workspace(self, "softmax_cols", outer * inner, self.dtype)
        k.channel_dot(outer * inner, dy, y, channels, inner, dots)
        k.softmax_backward(top[0].count, dy, y, dots, channels, inner, bottom[0].mutable_gpu_diff)


@gpu_impl("SoftmaxWithLoss")
class SoftmaxWithLoss(object):
    def _gpu_ignore(self):
        return (0, 0) if self.ignore_label is None else (1, int(self.ignore_label))

    def forward_gpu(self, bottom, top):
        dev = gpu.current()
        outer, channels, inner = self.outer, self.channels, self.inner
        n = outer * channels * inner
        prob = top[1].mutable_gpu_data if len(top) >= 2 else workspace(self, "prob", n, self.dtype)
        softmax_forward(self, bottom[0].gpu_data, prob, outer, channels, inner)
        cols = outer * inner
        loss, counts, bad = (workspace(self, w, cols, self.dtype) for w in ("loss", "cnt", "bad"))
        label = bottom[1].gpu_data
        dev.kernels("softmax", self.dtype).softmax_loss_forward(
            cols, prob, label, channels, inner, *self._gpu_ignore(), loss, counts, bad)
        if dev.blas.asum(cols, bad):
            labels = bottom[1].cpu_data.reshape(-1).astype(np.int64)
            wrong = labels[(labels < 0) | (labels >= channels)]
            if self.ignore_label is not None:
                wrong = wrong[wrong != self.ignore_label]
            raise self.error("label %d out of range [0, %d)" % (wrong[0], channels))
        valid = int(round(dev.blas.asum(cols, counts)))
        self.norm = self._normalizer(valid)
        top[0].data[...] = dsum(dev, cols, loss) / self.norm
        self._gpu_prob = prob

    def backward_gpu(self, top, propagate_down, bottom):
        from ...layers.loss import reject_label_gradient
        reject_label_gradient(self, propagate_down)
        if not propagate_down[0]:
            return
        dev = gpu.current()
        n = bottom[0].count
        dx = bottom[0].mutable_gpu_diff
        prob = top[1].gpu_data if len(top) >= 2 else self._gpu_prob
        dev.copy(prob, dx, n)
        dev.kernels("softmax", self.dtype).softmax_loss_backward(
            self.outer * self.inner, bottom[1].gpu_data, self.channels, self.inner,
            *self._gpu_ignore(), dx)
        dev.blas.scal(n, float(top[0].diff) / self.norm, dx)

