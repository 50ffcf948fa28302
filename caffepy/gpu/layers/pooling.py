"""GPU Pooling: MAX (with the argmax mask), AVE, STOCHASTIC; forward and backward (Caffe's
pooling_layer.cu, same window rules as ``caffepy.layers.pooling``).

Forward runs one work item per output; backward one per input pixel, gathering from the windows
that contain it (no atomics). MAX keeps the flat argmax h * W + w per output (first maximum
wins); STOCHASTIC TRAIN draws its uniforms with Philox into a buffer, then samples the element
where the running window sum first reaches u * sum (windows ignore padding, as on the CPU);
STOCHASTIC TEST outputs sum x^2 / (sum x + FLT_MIN) and keeps the denominators for backward.
"""
from ... import gpu
from ..kernels import register_source
from ..random import uniform
from ..ops import workspace
from . import gpu_impl

SOURCE = register_source("pooling", r"""
__global__ void max_pool_forward(const int n, const Dtype* x, const int channels,
    const int height, const int width, const int oh, const int ow, const int kh, const int kw,
    const int sh, const int sw, const int ph, const int pw, Dtype* y, int* mask,
    Dtype* top_mask, const int has_top_mask) {
  CUDA_KERNEL_LOOP(index, n) {
    const int pwi = index % ow, phi = (index / ow) % oh;
    const int nc = index / (ow * oh);
    int hstart = phi * sh - ph, wstart = pwi * sw - pw;
    const int hend = min(hstart + kh, height), wend = min(wstart + kw, width);
    hstart = max(hstart, 0);
    wstart = max(wstart, 0);
    Dtype best = -DTYPE_MAX;
    int arg = -1;
    const Dtype* xs = x + (long long)nc * height * width;
    for (int h = hstart; h < hend; ++h)
      for (int w = wstart; w < wend; ++w)
        if (xs[h * width + w] > best) { best = xs[h * width + w]; arg = h * width + w; }
    y[index] = best;
    mask[index] = arg;
    if (has_top_mask) top_mask[index] = (Dtype)arg;
  }
}
__global__ void max_pool_backward(const int n, const Dtype* dy, const int* mask,
    const int channels, const int height, const int width, const int oh, const int ow,
    const int kh, const int kw, const int sh, const int sw, const int ph, const int pw,
    Dtype* dx) {
  CUDA_KERNEL_LOOP(index, n) {
    const int w = index % width, h = (index / width) % height;
    const int nc = index / (width * height);
    const int phstart = (h + ph < kh) ? 0 : (h + ph - kh) / sh + 1;
    const int phend = min((h + ph) / sh + 1, oh);
    const int pwstart = (w + pw < kw) ? 0 : (w + pw - kw) / sw + 1;
    const int pwend = min((w + pw) / sw + 1, ow);
    const long long off = (long long)nc * oh * ow;
    Dtype g = 0;
    for (int p = phstart; p < phend; ++p)
      for (int q = pwstart; q < pwend; ++q)
        if (mask[off + p * ow + q] == h * width + w) g += dy[off + p * ow + q];
    dx[index] = g;
  }
}
__global__ void ave_pool_forward(const int n, const Dtype* x, const int channels,
    const int height, const int width, const int oh, const int ow, const int kh, const int kw,
    const int sh, const int sw, const int ph, const int pw, Dtype* y) {
  CUDA_KERNEL_LOOP(index, n) {
    const int pwi = index % ow, phi = (index / ow) % oh;
    const int nc = index / (ow * oh);
    int hstart = phi * sh - ph, wstart = pwi * sw - pw;
    int hend = min(hstart + kh, height + ph), wend = min(wstart + kw, width + pw);
    const int pool_size = (hend - hstart) * (wend - wstart);
    hstart = max(hstart, 0);
    wstart = max(wstart, 0);
    hend = min(hend, height);
    wend = min(wend, width);
    const Dtype* xs = x + (long long)nc * height * width;
    Dtype s = 0;
    for (int h = hstart; h < hend; ++h)
      for (int w = wstart; w < wend; ++w) s += xs[h * width + w];
    y[index] = s / (Dtype)pool_size;
  }
}
__global__ void ave_pool_backward(const int n, const Dtype* dy, const int channels,
    const int height, const int width, const int oh, const int ow, const int kh, const int kw,
    const int sh, const int sw, const int ph, const int pw, Dtype* dx) {
  CUDA_KERNEL_LOOP(index, n) {
    const int w = index % width + pw, h = (index / width) % height + ph;
    const int nc = index / (width * height);
    const int phstart = (h < kh) ? 0 : (h - kh) / sh + 1;
    const int phend = min(h / sh + 1, oh);
    const int pwstart = (w < kw) ? 0 : (w - kw) / sw + 1;
    const int pwend = min(w / sw + 1, ow);
    const long long off = (long long)nc * oh * ow;
    Dtype g = 0;
    for (int p = phstart; p < phend; ++p) {
      for (int q = pwstart; q < pwend; ++q) {
        const int hstart = p * sh - ph, wstart = q * sw - pw;
        const int hend = min(hstart + kh, height + ph), wend = min(wstart + kw, width + pw);
        g += dy[off + p * ow + q] / (Dtype)((hend - hstart) * (wend - wstart));
      }
    }
    dx[index] = g;
  }
}
__global__ void sto_pool_forward_train(const int n, const Dtype* x, const Dtype* u,
    const int channels, const int height, const int width, const int oh, const int ow,
    const int kh, const int kw, const int sh, const int sw, Dtype* y, int* mask) {
  CUDA_KERNEL_LOOP(index, n) {
    const int pwi = index % ow, phi = (index / ow) % oh;
    const int nc = index / (ow * oh);
    const int hstart = phi * sh, wstart = pwi * sw;
    const int hend = min(hstart + kh, height), wend = min(wstart + kw, width);
    const Dtype* xs = x + (long long)nc * height * width;
    Dtype total = 0;
    for (int h = hstart; h < hend; ++h)
      for (int w = wstart; w < wend; ++w) total += xs[h * width + w];
    const Dtype thres = u[index] * total;
    Dtype cum = 0, val = 0;
    int arg = -1;
    for (int h = hstart; h < hend && arg < 0; ++h) {
      for (int w = wstart; w < wend; ++w) {
        cum += xs[h * width + w];
        if (cum >= thres) { arg = h * width + w; val = xs[arg]; break; }
      }
    }
    y[index] = val;
    mask[index] = arg;
  }
}
__global__ void sto_pool_forward_test(const int n, const Dtype* x, const int channels,
    const int height, const int width, const int oh, const int ow, const int kh, const int kw,
    const int sh, const int sw, Dtype* y, Dtype* denom) {
  CUDA_KERNEL_LOOP(index, n) {
    const int pwi = index % ow, phi = (index / ow) % oh;
    const int nc = index / (ow * oh);
    const int hstart = phi * sh, wstart = pwi * sw;
    const int hend = min(hstart + kh, height), wend = min(wstart + kw, width);
    const Dtype* xs = x + (long long)nc * height * width;
    Dtype total = 0, sq = 0;
    for (int h = hstart; h < hend; ++h)
      for (int w = wstart; w < wend; ++w) {
        const Dtype v = xs[h * width + w];
        total += v;
        sq += v * v;
      }
    denom[index] = total + CAFFE_FLT_MIN;
    y[index] = sq / (total + CAFFE_FLT_MIN);
  }
}
__global__ void sto_pool_backward(const int n, const Dtype* dy, const Dtype* x, const Dtype* y,
    const int* mask, const Dtype* denom, const int train, const int channels, const int height,
    const int width, const int oh, const int ow, const int kh, const int kw, const int sh,
    const int sw, Dtype* dx) {
  CUDA_KERNEL_LOOP(index, n) {
    const int w = index % width, h = (index / width) % height;
    const int nc = index / (width * height);
    const int phstart = (h < kh) ? 0 : (h - kh) / sh + 1;
    const int phend = min(h / sh + 1, oh);
    const int pwstart = (w < kw) ? 0 : (w - kw) / sw + 1;
    const int pwend = min(w / sw + 1, ow);
    const long long off = (long long)nc * oh * ow;
    Dtype g = 0;
    for (int p = phstart; p < phend; ++p)
      for (int q = pwstart; q < pwend; ++q) {
        const long long o = off + p * ow + q;
        if (train) {
          if (mask[o] == h * width + w) g += dy[o];
        } else {
          g += dy[o] * ((Dtype)2 * x[index] - y[o]) / denom[o];
        }
      }
    dx[index] = g;
  }
}
""")


def _kernels(layer):
    return gpu.current().kernels("pooling", layer.dtype)


@gpu_impl("Pooling")
class Pooling(object):
    def _gpu_dims(self, b):
        g = self.geom
        (h, w), (oh, ow) = g.in_hw, g.out_hw
        (kh, kw), (sh, sw), (ph, pw) = g.kernel, g.stride, g.pad
        return b.shape[1], h, w, oh, ow, kh, kw, sh, sw, ph, pw

    def forward_gpu(self, bottom, top):
        import numpy as np
        P = type(self.layer_param.pooling_param)
        dev = gpu.current()
        c, h, w, oh, ow, kh, kw, sh, sw, ph, pw = self._gpu_dims(bottom[0])
        n = top[0].count
        x, y = bottom[0].gpu_data, top[0].mutable_gpu_data
        k = _kernels(self)
        if self.method == P.MAX:
            mask = workspace(self, "mask", n, np.int32)
            has_top_mask = len(top) > 1
            top_mask = top[1].mutable_gpu_data if has_top_mask else None
            k.max_pool_forward(n, x, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, y, mask, top_mask,
                               int(has_top_mask))
        elif self.method == P.AVE:
            k.ave_pool_forward(n, x, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, y)
        elif self.phase == self._caffe_pb2.TRAIN:
            u = workspace(self, "rand", n, self.dtype)
            uniform(dev, u)
            k.sto_pool_forward_train(n, x, u, c, h, w, oh, ow, kh, kw, sh, sw, y,
                                     workspace(self, "mask", n, np.int32))
        else:
            k.sto_pool_forward_test(n, x, c, h, w, oh, ow, kh, kw, sh, sw, y,
                                    workspace(self, "denom", n, self.dtype))

    def backward_gpu(self, top, propagate_down, bottom):
        import numpy as np
        if not propagate_down[0]:
            return
        P = type(self.layer_param.pooling_param)
        c, h, w, oh, ow, kh, kw, sh, sw, ph, pw = self._gpu_dims(bottom[0])
        n, m = bottom[0].count, top[0].count
        dy, dx = top[0].gpu_diff, bottom[0].mutable_gpu_diff
        k = _kernels(self)
        if self.method == P.MAX:
            k.max_pool_backward(n, dy, workspace(self, "mask", m, np.int32), c, h, w, oh, ow,
                                kh, kw, sh, sw, ph, pw, dx)
        elif self.method == P.AVE:
            k.ave_pool_backward(n, dy, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dx)
        else:
            train = self.phase == self._caffe_pb2.TRAIN
            mask = workspace(self, "mask", m, np.int32) if train else None
            denom = None if train else workspace(self, "denom", m, self.dtype)
            k.sto_pool_backward(n, dy, bottom[0].gpu_data, top[0].gpu_data, mask, denom,
                                int(train), c, h, w, oh, ow, kh, kw, sh, sw, dx)
