"""GPU Scale and Bias: per-channel affine maps broadcast over (outer, channels, inner).

x is viewed as (outer, C, inner) with C the product of the operand's dims (``self.dims`` from the
CPU layer's reshape); ch(i) = (i / inner) % C.

    Scale: y[i] = x[i] * s[ch(i)] (+ b[ch(i)])     Bias: y[i] = x[i] + b[ch(i)]

Backward: dL/db = sum over outer and inner of dL/dy and dL/ds = the same sum of dL/dy * x (two
cuBLAS GEMVs, ``channel_sums``; accumulated into learned parameters, written into a bottom[1]);
dL/dx = dL/dy * s (Scale) or dL/dy (Bias). In place, Scale keeps a device copy of x for dL/ds;
otherwise, as Caffe, the product dL/dy * x is formed in bottom[0]'s diff (left there when
bottom[0] gets no gradient).
"""
from ... import gpu
from ..kernels import register_source
from ..ops import channel_sums, workspace
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
__global__ void product(const int n, const Dtype* a, const Dtype* b, Dtype* y) {
  CUDA_KERNEL_LOOP(i, n) { y[i] = a[i] * b[i]; }
}
""")


def _k(layer):
    return gpu.current().kernels("scale", layer.dtype)


def _sums(layer, dev, x, out, beta):
    """out = sum over outer and inner of x (+ beta * out)."""
    outer, c, inner = layer.dims
    tmp = workspace(layer, "sums", outer * c, layer.dtype)
    channel_sums(dev, outer, c, inner, x, out, tmp, 1.0, beta)


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
        dev = gpu.current()
        n = bottom[0].count
        dy = top[0].gpu_diff
        k = _k(self)
        if self.bias_index is not None and self.param_propagate_down[self.bias_index]:
            _sums(self, dev, dy, self.blobs[self.bias_index].mutable_gpu_diff, 1.0)
        from_param = len(bottom) == 1
        if (self.param_propagate_down[0] if from_param else propagate_down[1]):
            in_place = top[0] is bottom[0]
            x = workspace(self, "saved_x", n, self.dtype) if in_place else bottom[0].gpu_data
            if in_place or self.dims[1] == n:
                prod = workspace(self, "product", n, self.dtype)
            else:
                prod = bottom[0].mutable_gpu_diff        # Caffe's scratch (see the module doc)
            k.product(n, dy, x, prod)
            if from_param:
                _sums(self, dev, prod, self.blobs[0].mutable_gpu_diff, 1.0)
            else:
                _sums(self, dev, prod, bottom[1].mutable_gpu_diff, 0.0)
        if propagate_down[0]:
            s = (bottom[1] if len(bottom) > 1 else self.blobs[0]).gpu_data
            k.channel_affine(n, dy, s, None, 1, 0, self.dims[1], self.dims[2],
                             bottom[0].mutable_gpu_diff)


@gpu_impl("Bias")
class Bias(object):
    def forward_gpu(self, bottom, top):
        b = (bottom[1] if len(bottom) > 1 else self.blobs[0]).gpu_data
        _k(self).channel_affine(bottom[0].count, bottom[0].gpu_data, None, b, 0, 1, self.dims[1],
                                self.dims[2], top[0].mutable_gpu_data)

    def backward_gpu(self, top, propagate_down, bottom):
        dev = gpu.current()
        dy = top[0].gpu_diff
        from_param = len(bottom) == 1
        if (self.param_propagate_down[0] if from_param else propagate_down[1]):
            if from_param:
                _sums(self, dev, dy, self.blobs[0].mutable_gpu_diff, 1.0)
            else:
                _sums(self, dev, dy, bottom[1].mutable_gpu_diff, 0.0)
        if propagate_down[0] and top[0] is not bottom[0]:
            dev.copy(dy, bottom[0].mutable_gpu_diff, bottom[0].count)
