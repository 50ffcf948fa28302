"""GPU BatchNorm (per-channel statistics through cuBLAS GEMVs) and LRN across channels.

BatchNorm views x as (N, C, S). Channel means are two GEMVs (sum over S, then over N) scaled by
1 / (N S); the variance is the mean of (x - mu)^2 (two-pass, as the CPU layer). The moving
averages are updated on the device, and global statistics are read from the parameter blobs on
the device too (no host round trip). LRN (ACROSS_CHANNELS) runs one work item per element with a
loop over the channel window; WITHIN_CHANNEL runs on the CPU.
"""
from ... import gpu
from ..kernels import register_source
from ..ops import channel_sums, workspace
from . import gpu_impl

SOURCE = register_source("normalization", r"""
__global__ void bn_center(const int n, const Dtype* x, const Dtype* mu, const int channels,
    const int spatial, Dtype* y) {
  CUDA_KERNEL_LOOP(i, n) { y[i] = x[i] - mu[(i / spatial) % channels]; }
}
__global__ void bn_scale(const int n, const Dtype* std, const int channels, const int spatial,
    Dtype* y) {
  CUDA_KERNEL_LOOP(i, n) { y[i] = y[i] / std[(i / spatial) % channels]; }
}
__global__ void bn_std(const int n, const Dtype* var, const Dtype eps, Dtype* std) {
  CUDA_KERNEL_LOOP(i, n) { std[i] = sqrt(var[i] + eps); }
}
__global__ void bn_moving_average(const int n, const Dtype* mu, const Dtype* var,
    const Dtype maf, const Dtype correction, Dtype* sum_mu, Dtype* sum_var, Dtype* s) {
  CUDA_KERNEL_LOOP(i, n) {
    sum_mu[i] = maf * sum_mu[i] + mu[i];
    sum_var[i] = maf * sum_var[i] + correction * var[i];
    if (i == 0) s[0] = maf * s[0] + (Dtype)1;
  }
}
__global__ void bn_global_stats(const int n, const Dtype* sum_mu, const Dtype* sum_var,
    const Dtype* s, Dtype* mu, Dtype* var) {
  CUDA_KERNEL_LOOP(i, n) {
    const Dtype f = s[0] == (Dtype)0 ? (Dtype)0 : (Dtype)1 / s[0];
    mu[i] = f * sum_mu[i];
    var[i] = f * sum_var[i];
  }
}
__global__ void bn_backward(const int n, const Dtype* dy, const Dtype* y, const Dtype* mean_dy,
    const Dtype* mean_dyy, const Dtype* std, const int channels, const int spatial,
    const int global_stats, Dtype* dx) {
  CUDA_KERNEL_LOOP(i, n) {
    const int c = (i / spatial) % channels;
    dx[i] = global_stats ? dy[i] / std[c]
                         : (dy[i] - mean_dy[c] - y[i] * mean_dyy[c]) / std[c];
  }
}
__global__ void lrn_scale(const int n, const Dtype* x, const int channels, const int spatial,
    const int size, const Dtype alpha_over_size, const Dtype k, Dtype* scale) {
  CUDA_KERNEL_LOOP(i, n) {
    const int c = (i / spatial) % channels;
    const int half = (size - 1) / 2;
    const long long base = i - (long long)c * spatial;
    Dtype s = 0;
    for (int j = max(c - half, 0); j <= min(c + half, channels - 1); ++j) {
      const Dtype v = x[base + (long long)j * spatial];
      s += v * v;
    }
    scale[i] = s * alpha_over_size + k;
  }
}
__global__ void lrn_output(const int n, const Dtype* x, const Dtype* scale, const Dtype beta,
    Dtype* y) {
  CUDA_KERNEL_LOOP(i, n) { y[i] = x[i] * pow(scale[i], -beta); }
}
__global__ void lrn_ratio(const int n, const Dtype* dy, const Dtype* y, const Dtype* scale,
    Dtype* ratio) {
  CUDA_KERNEL_LOOP(i, n) { ratio[i] = dy[i] * y[i] / scale[i]; }
}
__global__ void lrn_backward(const int n, const Dtype* x, const Dtype* dy, const Dtype* scale,
    const Dtype* ratio, const int channels, const int spatial, const int size, const Dtype beta,
    const Dtype factor, Dtype* dx) {
  CUDA_KERNEL_LOOP(i, n) {
    const int c = (i / spatial) % channels;
    const int half = (size - 1) / 2;
    const long long base = i - (long long)c * spatial;
    Dtype acc = 0;
    for (int j = max(c - half, 0); j <= min(c + half, channels - 1); ++j)
      acc += ratio[base + (long long)j * spatial];
    dx[i] = dy[i] * pow(scale[i], -beta) - x[i] * acc * factor;
  }
}
""")


def _k(layer):
    return gpu.current().kernels("normalization", layer.dtype)


@gpu_impl("BatchNorm")
class BatchNorm(object):
    def _gpu_dims(self, b):
        n = b.shape[0] if b.num_axes else 1
        return n, self.channels, b.count // max(1, n * self.channels)

    def _gpu_channel_mean(self, x, out, dims):
        n, c, s = dims
        dev = gpu.current()
        channel_sums(dev, n, c, s, x, out, workspace(self, "nc", n * c, self.dtype),
                     1.0 / (n * s), 0.0)

    def forward_gpu(self, bottom, top):
        dims = n, c, s = self._gpu_dims(bottom[0])
        count = bottom[0].count
        k = _k(self)
        mu, var = workspace(self, "mu", c, self.dtype), workspace(self, "var", c, self.dtype)
        x = bottom[0].gpu_data
        y = top[0].mutable_gpu_data
        if self.use_global_stats:
            sum_mu, sum_var, sc = (b.gpu_data for b in self.blobs)
            k.bn_global_stats(c, sum_mu, sum_var, sc, mu, var)
            k.bn_center(count, x, mu, c, s, y)
        else:
            self._gpu_channel_mean(x, mu, dims)
            k.bn_center(count, x, mu, c, s, y)
            sq = workspace(self, "sq", count, self.dtype)
            gpu.current().kernels("util", self.dtype).sqr(count, y, sq)
            self._gpu_channel_mean(sq, var, dims)
            m = count // c
            corr = m / (m - 1.0) if m > 1 else 1.0
            sum_mu, sum_var, sc = (b.mutable_gpu_data for b in self.blobs)
            k.bn_moving_average(c, mu, var, self.maf, corr, sum_mu, sum_var, sc)
        std = workspace(self, "std", c, self.dtype)
        k.bn_std(c, var, self.eps, std)
        k.bn_scale(count, std, c, s, y)

    def backward_gpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        dims = n, c, s = self._gpu_dims(bottom[0])
        count = bottom[0].count
        k = _k(self)
        dy, y = top[0].gpu_diff, top[0].gpu_data
        std = workspace(self, "std", c, self.dtype)
        mean_dy = workspace(self, "mu", c, self.dtype)
        mean_dyy = workspace(self, "var", c, self.dtype)
        if not self.use_global_stats:
            self._gpu_channel_mean(dy, mean_dy, dims)
            prod = workspace(self, "sq", count, self.dtype)
            gpu.current().kernels("util", self.dtype).vmul(count, dy, y, prod)
            self._gpu_channel_mean(prod, mean_dyy, dims)
        k.bn_backward(count, dy, y, mean_dy, mean_dyy, std, c, s, int(self.use_global_stats),
                      bottom[0].mutable_gpu_diff)


@gpu_impl("LRN")
class LRN(object):
    def supports_gpu(self):
        return self.across

    def forward_gpu(self, bottom, top):
        b = bottom[0]
        n, c, spatial = b.count, b.shape[1], b.count_range(2)
        scale = workspace(self, "scale", n, self.dtype)
        k = _k(self)
        k.lrn_scale(n, b.gpu_data, c, spatial, self.size, self.alpha / self.size, self.k, scale)
        k.lrn_output(n, b.gpu_data, scale, self.beta, top[0].mutable_gpu_data)

    def backward_gpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        b = bottom[0]
        n, c, spatial = b.count, b.shape[1], b.count_range(2)
        k = _k(self)
        scale = workspace(self, "scale", n, self.dtype)
        ratio = workspace(self, "ratio", n, self.dtype)
        dy = top[0].gpu_diff
        k.lrn_ratio(n, dy, top[0].gpu_data, scale, ratio)
        k.lrn_backward(n, b.gpu_data, dy, scale, ratio, c, spatial, self.size, self.beta,
                       2.0 * self.alpha * self.beta / self.size, b.mutable_gpu_diff)
