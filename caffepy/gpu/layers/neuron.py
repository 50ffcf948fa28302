"""GPU neuron layers: one forward and one backward kernel, the op chosen by a code (uniform
across the launch, so the switch costs no divergence); Dropout with a Philox mask recomputed in
backward; PReLU with per-channel slopes.

Op codes and their three scalar parameters (a, b, c), matching ``caffepy.layers.neuron`` /
``power``: ReLU (slope), ReLU6, Sigmoid, TanH, AbsVal, BNLL, ELU (alpha), Swish (beta),
Clip (min, max), Threshold (threshold; no backward), Power (scale, shift, power),
Exp (inner_scale, outer_scale), Log (scale, shift, base_scale).
"""
import numpy as np

from ... import gpu
from ..kernels import register_source
from ..random import PHILOX_DEVICE, draw_seed, seed_args
from . import gpu_impl

OPS = {"ReLU": 0, "ReLU6": 1, "Sigmoid": 2, "TanH": 3, "AbsVal": 4, "BNLL": 5, "ELU": 6,
       "Swish": 7, "Clip": 8, "Threshold": 9, "Power": 10, "Exp": 11, "Log": 12}

SOURCE = register_source("neuron", PHILOX_DEVICE + r"""
__device__ __forceinline__ Dtype sigmoid_(const Dtype x) {
  return (Dtype)0.5 * tanh((Dtype)0.5 * x) + (Dtype)0.5;
}
__global__ void neuron_forward(const int n, const int op, const Dtype* x, Dtype* y,
    const Dtype a, const Dtype b, const Dtype c) {
  CUDA_KERNEL_LOOP(i, n) {
    const Dtype v = x[i];
    Dtype r;
    switch (op) {
      case 0: r = v > 0 ? v : v * a; break;
      case 1: r = min(max(v, (Dtype)0), (Dtype)6); break;
      case 2: r = sigmoid_(v); break;
      case 3: r = tanh(v); break;
      case 4: r = fabs(v); break;
      case 5: r = max(v, (Dtype)0) + log1p(exp(-fabs(v))); break;
      case 6: r = v > 0 ? v : a * expm1(min(v, (Dtype)0)); break;
      case 7: r = v * sigmoid_(a * v); break;
      case 8: r = min(max(v, a), b); break;
      case 9: r = v > a ? (Dtype)1 : (Dtype)0; break;
      case 10: r = c == (Dtype)1 ? b + a * v : pow(b + a * v, c); break;
      case 11: r = b * exp(a * v); break;
      case 12: r = log(b + a * v) * c; break;
      default: r = v;
    }
    y[i] = r;
  }
}
__global__ void neuron_backward(const int n, const int op, const Dtype* dy, const Dtype* x,
    const Dtype* y, Dtype* dx, const Dtype a, const Dtype b, const Dtype c) {
  CUDA_KERNEL_LOOP(i, n) {
    const Dtype v = x[i], w = y[i];
    Dtype d;
    switch (op) {
      case 0: d = v > 0 ? (Dtype)1 : a; break;
      case 1: d = (w > 0 && w < 6) ? (Dtype)1 : (Dtype)0; break;
      case 2: d = w * ((Dtype)1 - w); break;
      case 3: d = (Dtype)1 - w * w; break;
      case 4: d = (Dtype)((v > 0) - (v < 0)); break;
      case 5: d = sigmoid_(v); break;
      case 6: d = v > 0 ? (Dtype)1 : w + a; break;
      case 7: { const Dtype s = sigmoid_(a * v); d = a * w + s * ((Dtype)1 - a * w); } break;
      case 8: d = (v >= a && v <= b) ? (Dtype)1 : (Dtype)0; break;
      case 10: d = c * a == (Dtype)0 ? (Dtype)0
                   : (c == (Dtype)1 ? c * a : c * a * pow(b + a * v, c - (Dtype)1)); break;
      case 11: d = w * a; break;
      case 12: d = a * c / (b + a * v); break;
      default: d = (Dtype)0;
    }
    dx[i] = dy[i] * d;
  }
}
__global__ void dropout_forward(const int n, const Dtype* x, Dtype* y, const Dtype ratio,
    const Dtype scale, const unsigned int k0, const unsigned int k1, const unsigned int o0,
    const unsigned int o1) {
  CUDA_KERNEL_LOOP(i, n) {
    y[i] = philox_uniform(i, k0, k1, o0, o1) >= ratio ? x[i] * scale : (Dtype)0;
  }
}
__global__ void dropout_backward(const int n, const Dtype* dy, Dtype* dx, const Dtype ratio,
    const Dtype scale, const unsigned int k0, const unsigned int k1, const unsigned int o0,
    const unsigned int o1) {
  CUDA_KERNEL_LOOP(i, n) {
    dx[i] = philox_uniform(i, k0, k1, o0, o1) >= ratio ? dy[i] * scale : (Dtype)0;
  }
}
__global__ void prelu_forward(const int n, const Dtype* x, Dtype* y, const Dtype* slope,
    const int channels, const int dim, const int shared) {
  CUDA_KERNEL_LOOP(i, n) {
    const int c = shared ? 0 : (i / dim) % channels;
    y[i] = x[i] > 0 ? x[i] : x[i] * slope[c];
  }
}
__global__ void prelu_backward(const int n, const Dtype* dy, const Dtype* x, Dtype* dx,
    const Dtype* slope, const int channels, const int dim, const int shared) {
  CUDA_KERNEL_LOOP(i, n) {
    const int c = shared ? 0 : (i / dim) % channels;
    dx[i] = x[i] > 0 ? dy[i] : dy[i] * slope[c];
  }
}
__global__ void prelu_param_terms(const int n, const Dtype* dy, const Dtype* x, Dtype* out) {
  CUDA_KERNEL_LOOP(i, n) { out[i] = x[i] > 0 ? (Dtype)0 : dy[i] * x[i]; }
}
""")


def _kernels(layer):
    return gpu.current().kernels("neuron", layer.dtype)


def _params(layer):
    t = layer.type
    if t == "ReLU":
        return (layer.negative_slope, 0, 0)
    if t == "ELU":
        return (layer.alpha, 0, 0)
    if t == "Swish":
        return (layer.beta, 0, 0)
    if t == "Clip":
        return (layer.lo, layer.hi, 0)
    if t == "Threshold":
        return (layer.threshold, 0, 0)
    if t == "Power":
        return (layer.scale, layer.shift, layer.power)
    if t == "Exp":
        return (layer.inner_scale, layer.outer_scale, 0)
    if t == "Log":
        return (layer.scale, layer.shift, layer.base_scale)
    return (0, 0, 0)


_NEEDS_X = {"ReLU": False, "ReLU6": False, "Sigmoid": False, "TanH": False, "Exp": False}


@gpu_impl(*OPS)
class Neuron(object):
    def forward_gpu(self, bottom, top):
        n = bottom[0].count
        x = bottom[0].gpu_data
        if top[0] is bottom[0] and _NEEDS_X.get(self.type, True):
            dev = gpu.current()
            self._gpu_x = dev.empty(n, self.dtype)
            dev.copy(x, self._gpu_x)
        else:
            self._gpu_x = None
        y = top[0].mutable_gpu_data
        _kernels(self).neuron_forward(n, OPS[self.type], x, y, *_params(self))

    def backward_gpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        if self.type == "Threshold":
            raise self.error("backward is not implemented for this layer type")
        n = bottom[0].count
        y = top[0].gpu_data
        x = self._gpu_x if getattr(self, "_gpu_x", None) is not None else (
            y if top[0] is bottom[0] else bottom[0].gpu_data)
        dy = top[0].gpu_diff
        _kernels(self).neuron_backward(n, OPS[self.type], dy, x, y, bottom[0].mutable_gpu_diff,
                                       *_params(self))


@gpu_impl("Dropout")
class Dropout(object):
    def forward_gpu(self, bottom, top):
        n = bottom[0].count
        x = bottom[0].gpu_data
        y = top[0].mutable_gpu_data
        k = _kernels(self)
        if self.train:
            self._gpu_seed = draw_seed()
            k.dropout_forward(n, x, y, self.ratio, self._scale(), *seed_args(self._gpu_seed))
        else:
            gpu.current().kernels("util", self.dtype).scale_copy(n, self._scale(), x, y)

    def backward_gpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        n = bottom[0].count
        dy = top[0].gpu_diff
        dx = bottom[0].mutable_gpu_diff
        if self.train:
            _kernels(self).dropout_backward(n, dy, dx, self.ratio, self._scale(),
                                            *seed_args(self._gpu_seed))
        else:
            gpu.current().kernels("util", self.dtype).scale_copy(n, self._scale(), dy, dx)


@gpu_impl("PReLU")
class PReLU(object):
    def _gpu_geometry(self, x):
        channels = 1 if self.channel_shared else x.shape[1]
        dim = x.count_range(2) if x.num_axes > 2 else 1
        return channels, dim

    def forward_gpu(self, bottom, top):
        dev = gpu.current()
        n = bottom[0].count
        x = bottom[0].gpu_data
        if top[0] is bottom[0]:
            self._gpu_x = dev.empty(n, self.dtype)
            dev.copy(x, self._gpu_x)
        else:
            self._gpu_x = None
        channels, dim = self._gpu_geometry(bottom[0])
        _kernels(self).prelu_forward(n, x, top[0].mutable_gpu_data, self.blobs[0].gpu_data,
                                     channels, dim, int(self.channel_shared))

    def backward_gpu(self, top, propagate_down, bottom):
        from ..ops import channel_sums, dsum, workspace
        dev = gpu.current()
        n = bottom[0].count
        x = self._gpu_x if self._gpu_x is not None else bottom[0].gpu_data
        dy = top[0].gpu_diff
        channels, dim = self._gpu_geometry(bottom[0])
        k = _kernels(self)
        if self.param_propagate_down and self.param_propagate_down[0]:
            terms = workspace(self, "terms", n, self.dtype)
            k.prelu_param_terms(n, dy, x, terms)
            slope_diff = self.blobs[0].mutable_gpu_diff
            if self.channel_shared:
                total = dsum(dev, n, terms)
                dev.blas.axpy(1, 1.0, dev.to_device(np.array([total], self.dtype)), slope_diff)
            else:
                num = bottom[0].shape[0]
                tmp = workspace(self, "tmp", num * channels, self.dtype)
                channel_sums(dev, num, channels, dim, terms, slope_diff, tmp, 1.0, 1.0)
        if propagate_down[0]:
            k.prelu_backward(n, dy, x, bottom[0].mutable_gpu_diff, self.blobs[0].gpu_data,
                             channels, dim, int(self.channel_shared))
