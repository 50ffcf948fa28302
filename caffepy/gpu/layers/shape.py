"""GPU Concat, Slice, Split (data movement) and Eltwise (SUM / PROD / MAX).

Concat and Slice share one copy kernel (Caffe's concat_layer.cu): a bottom of ``axis`` size
``part`` sits at ``offset`` within a blob of ``axis`` size ``whole``; ``forward`` copies part ->
whole, otherwise whole -> part. Split's tops share the bottom's memory (mirrors included), its
backward sums the tops' diffs. Eltwise MAX keeps the arg max index per element (Caffe's ties).
"""
import numpy as np

from ... import gpu
from ...proto import caffe_pb2
from ..kernels import register_source
from ..ops import workspace
from . import gpu_impl

_ELT = caffe_pb2.EltwiseParameter

SOURCE = register_source("shape", r"""
__global__ void concat_copy(const int n, const Dtype* src, const int to_whole, const int part,
    const int whole, const int offset, const int inner, Dtype* dst) {
  CUDA_KERNEL_LOOP(index, n) {
    const int chunk = part * inner;
    const int o = index / chunk, r = index % chunk;
    const long long w = ((long long)o * whole + offset) * inner + r;
    if (to_whole) dst[w] = src[index];
    else dst[index] = src[w];
  }
}
__global__ void eltwise_max_forward(const int n, const Dtype* a, const Dtype* b, const int idx,
    Dtype* y, int* mask) {
  CUDA_KERNEL_LOOP(i, n) {
    if (idx == 0) {
      if (a[i] > b[i]) { y[i] = a[i]; mask[i] = 0; } else { y[i] = b[i]; mask[i] = 1; }
    } else if (b[i] > y[i]) {
      y[i] = b[i];
      mask[i] = idx;
    }
  }
}
__global__ void eltwise_max_backward(const int n, const Dtype* dy, const int* mask, const int idx,
    Dtype* dx) {
  CUDA_KERNEL_LOOP(i, n) { dx[i] = mask[i] == idx ? dy[i] : (Dtype)0; }
}
""")


def _k(layer):
    return gpu.current().kernels("shape", layer.dtype)


def _outer_inner(blob, axis):
    return blob.count_range(0, axis), blob.count_range(axis + 1)


def _move(layer, whole_blob, parts, offsets, to_whole, diff):
    k = _k(layer)
    axis = layer.axis
    outer, inner = _outer_inner(whole_blob, axis)
    whole = whole_blob.shape[axis]
    if to_whole:
        dst = whole_blob.mutable_gpu_diff if diff else whole_blob.mutable_gpu_data
    else:
        src_whole = whole_blob.gpu_diff if diff else whole_blob.gpu_data
    for b, off in zip(parts, offsets):
        if b is None:
            continue
        part = b.shape[axis]
        n = outer * part * inner
        if to_whole:
            src = b.gpu_diff if diff else b.gpu_data
            k.concat_copy(n, src, 1, part, whole, off, inner, dst)
        else:
            k.concat_copy(n, src_whole, 0, part, whole, off, inner,
                          b.mutable_gpu_diff if diff else b.mutable_gpu_data)


def _offsets(blobs, axis):
    out, start = [], 0
    for b in blobs:
        out.append(start)
        start += b.shape[axis]
    return out


@gpu_impl("Concat")
class Concat(object):
    def forward_gpu(self, bottom, top):
        _move(self, top[0], bottom, _offsets(bottom, self.axis), True, False)

    def backward_gpu(self, top, propagate_down, bottom):
        parts = [b if d else None for b, d in zip(bottom, propagate_down)]
        _move(self, top[0], parts, _offsets(bottom, self.axis), False, True)


@gpu_impl("Slice")
class Slice(object):
    def forward_gpu(self, bottom, top):
        _move(self, bottom[0], top, self.bounds[:-1], False, False)

    def backward_gpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            _move(self, bottom[0], top, self.bounds[:-1], True, True)


@gpu_impl("Split")
class Split(object):
    def forward_gpu(self, bottom, top):
        pass

    def backward_gpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        dev = gpu.current()
        n = bottom[0].count
        dx = bottom[0].mutable_gpu_diff
        dev.copy(top[0].gpu_diff, dx, n)
        for t in top[1:]:
            dev.blas.axpy(n, 1.0, t.gpu_diff, dx)


@gpu_impl("Eltwise")
class Eltwise(object):
    def forward_gpu(self, bottom, top):
        dev = gpu.current()
        n = top[0].count
        u = dev.kernels("util", self.dtype)
        xs = [b.gpu_data for b in bottom]
        y = top[0].mutable_gpu_data
        if self.op == _ELT.PROD:
            u.vmul(n, xs[0], xs[1], y)
            for x in xs[2:]:
                u.vmul(n, y, x, y)
        elif self.op == _ELT.SUM:
            acc = workspace(self, "acc", n, self.dtype) if top[0] in bottom else y
            u.scale_copy(n, self.coeffs[0], xs[0], acc)
            for c, x in zip(self.coeffs[1:], xs[1:]):
                dev.blas.axpy(n, c, x, acc)
            if acc is not y:
                dev.copy(acc, y, n)
        else:
            mask = workspace(self, "mask", n, np.int32)
            k = _k(self)
            k.eltwise_max_forward(n, xs[0], xs[1], 0, y, mask)
            for i, x in enumerate(xs[2:], 2):
                k.eltwise_max_forward(n, y, x, i, y, mask)

    def backward_gpu(self, top, propagate_down, bottom):
        dev = gpu.current()
        n = top[0].count
        u = dev.kernels("util", self.dtype)
        dy = top[0].gpu_diff
        for i, (b, down) in enumerate(zip(bottom, propagate_down)):
            if not down:
                continue
            dx = b.mutable_gpu_diff
            if self.op == _ELT.PROD:
                g = workspace(self, "prod", n, self.dtype)
                if self.stable_prod_grad:
                    others = [o.gpu_data for j, o in enumerate(bottom) if j != i]
                    dev.copy(others[0], g, n)
                    for o in others[1:]:
                        u.vmul(n, g, o, g)
                else:
                    u.vdiv(n, top[0].gpu_data, b.gpu_data, g)
                u.vmul(n, dy, g, dx)
            elif self.op == _ELT.SUM:
                u.scale_copy(n, self.coeffs[i], dy, dx)
            else:
                _k(self).eltwise_max_backward(n, dy, workspace(self, "mask", n, np.int32), i, dx)
