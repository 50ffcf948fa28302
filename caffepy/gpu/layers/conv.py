"""GPU Convolution (2-d, grouped, dilated) and InnerProduct: im2col / col2im kernels + cuBLAS.

Convolution works on chunks of ``nb`` images at once (the column buffer is capped at
``COL_LIMIT`` elements): im2col writes the batch layout col (C * kh * kw, nb * OH * OW), one GEMM
per group gives ybuf (M, nb * OH * OW), and ``to_image`` scatters it (plus the bias) into y
(N, M, OH, OW). Backward: ``from_image`` gathers dy into the same layout, db += row sums (GEMV),
dW[g] += dy[g] col[g]^T, dcol[g] = W[g]^T dy[g] and col2im gathers dcol back into dx (each input
pixel sums the columns that read it: no atomics). Other geometries (n-d, axis != 1) and
Deconvolution run on the CPU.

With cuDNN (``convolution_param.engine`` DEFAULT or CUDNN, and a loadable libcudnn; see
:mod:`caffepy.gpu.cudnn` for the switch), 2-d convolution is one cuDNN call per blob instead.
"""
from ... import gpu
from ...math.sizes import overhangs
from ..kernels import register_source
from ..ops import col_sums, ones, row_sums, workspace
from . import gpu_impl

COL_LIMIT = 1 << 26

SOURCE = register_source("conv", r"""
__global__ void im2col_batch(const int n, const Dtype* x, const int nb, const int channels,
    const int height, const int width, const int kh, const int kw, const int ph, const int pw,
    const int sh, const int sw, const int dh, const int dw, const int oh, const int ow,
    Dtype* col) {
  CUDA_KERNEL_LOOP(index, n) {
    const int w_out = index % ow;
    const int h_out = (index / ow) % oh;
    const int img = (index / (ow * oh)) % nb;
    const int c = index / (ow * oh * nb);
    const int cols = nb * oh * ow;
    const int col_index = (img * oh + h_out) * ow + w_out;
    const Dtype* xc = x + ((long long)img * channels + c) * height * width;
    const int h0 = h_out * sh - ph, w0 = w_out * sw - pw;
    for (int i = 0; i < kh; ++i) {
      for (int j = 0; j < kw; ++j) {
        const int h = h0 + i * dh, w = w0 + j * dw;
        const int row = (c * kh + i) * kw + j;
        col[(long long)row * cols + col_index] =
            (h >= 0 && w >= 0 && h < height && w < width) ? xc[h * width + w] : (Dtype)0;
      }
    }
  }
}
__global__ void col2im_batch(const int n, const Dtype* col, const int nb, const int channels,
    const int height, const int width, const int kh, const int kw, const int ph, const int pw,
    const int sh, const int sw, const int dh, const int dw, const int oh, const int ow,
    Dtype* x) {
  CUDA_KERNEL_LOOP(index, n) {
    const int w = index % width + pw;
    const int h = (index / width) % height + ph;
    const int c = (index / (width * height)) % channels;
    const int img = index / (width * height * channels);
    const int cols = nb * oh * ow;
    Dtype val = 0;
    for (int i = 0; i < kh; ++i) {
      const int hh = h - i * dh;
      if (hh < 0 || hh % sh) continue;
      const int h_out = hh / sh;
      if (h_out >= oh) continue;
      for (int j = 0; j < kw; ++j) {
        const int ww = w - j * dw;
        if (ww < 0 || ww % sw) continue;
        const int w_out = ww / sw;
        if (w_out >= ow) continue;
        const int row = (c * kh + i) * kw + j;
        val += col[(long long)row * cols + (img * oh + h_out) * ow + w_out];
      }
    }
    x[index] = val;
  }
}
__global__ void to_image(const int n, const Dtype* buf, const Dtype* bias, const int has_bias,
    const int nb, const int m, const int spatial, Dtype* y) {
  CUDA_KERNEL_LOOP(index, n) {
    const int s = index % spatial;
    const int ch = (index / spatial) % m;
    const int img = index / (spatial * m);
    const Dtype v = buf[((long long)ch * nb + img) * spatial + s];
    y[index] = has_bias ? v + bias[ch] : v;
  }
}
__global__ void from_image(const int n, const Dtype* y, const int nb, const int m,
    const int spatial, Dtype* buf) {
  CUDA_KERNEL_LOOP(index, n) {
    const int s = index % spatial;
    const int ch = (index / spatial) % m;
    const int img = index / (spatial * m);
    buf[((long long)ch * nb + img) * spatial + s] = y[index];
  }
}
""")


def _kernels(layer):
    return gpu.current().kernels("conv", layer.dtype)


@gpu_impl("Convolution", "DepthwiseConvolution")
class Convolution(object):
    def supports_gpu(self):
        return self.num_spatial == 2 and self.axis == 1

    def _gpu_plan(self):
        c, (h, w) = self.channels, self.in_spatial
        (oh, ow) = self.out_spatial
        kh, kw = self.kernel
        rows = c * kh * kw
        nb = max(1, min(self.outer, COL_LIMIT // max(1, rows * oh * ow)))
        return c, h, w, oh, ow, rows, nb

    def _gpu_geometry(self):
        (kh, kw), (ph, pw), (sh, sw), (dh, dw) = self.kernel, self.pad, self.stride, self.dilation
        return kh, kw, ph, pw, sh, sw, dh, dw

    def _gpu_cudnn_plan(self):
        """The cuDNN plan for the current shapes, or None where im2col + cuBLAS runs."""
        from .. import cudnn
        if self.outer == 0 or not cudnn.wanted(self.layer_param.convolution_param.engine):
            return None
        if any(overhangs(self.in_spatial, self.kernel, self.pad, self.stride, self.dilation,
                         self.out_spatial)):
            # Caffe's truncating division gave a window that overhangs the padded input; cuDNN's
            # symmetric padding and floor division cannot describe it: the im2col kernels run it
            return None
        cud = getattr(gpu.current(), "cudnn", None)
        if cud is None:
            if cudnn.mode() == "on":
                raise cudnn.CudnnNotFound("CAFFEPY_CUDNN=1 but cuDNN is not available on this "
                                          "device")
            return None
        key = (self.outer, self.channels, tuple(self.in_spatial), self.num_output, self.group,
               self._gpu_geometry(), tuple(self.out_spatial), self.dtype, cud.tf32)
        cached = getattr(self, "_gpu_cudnn", None)
        if cached is None or cached[0] != key:
            (kh, kw, ph, pw, sh, sw, dh, dw) = key[5]
            plan = cud.conv_plan(self.dtype, self.outer, self.channels, *self.in_spatial,
                                 self.num_output, self.group, (kh, kw), (ph, pw), (sh, sw),
                                 (dh, dw), self.out_spatial)
            cached = self._gpu_cudnn = (key, plan)
        return cached[1]

    def _gpu_im2col(self, x, n0, nb, col):
        c, h, w, oh, ow, rows, _ = self._gpu_plan()
        _kernels(self).im2col_batch(c * nb * oh * ow, x[n0 * c * h * w:], nb, c, h, w,
                                    *self._gpu_geometry(), oh, ow, col)

    def forward_gpu(self, bottom, top):
        plan = self._gpu_cudnn_plan()
        if plan is not None:
            bias = self.blobs[1].gpu_data if self.bias_term else None
            for b, t in zip(bottom, top):
                plan.forward(b.gpu_data, self.blobs[0].gpu_data, t.mutable_gpu_data, bias)
            return
        dev = gpu.current()
        c, h, w, oh, ow, rows, nb_max = self._gpu_plan()
        m, g = self.num_output, self.group
        spatial = oh * ow
        wt = self.blobs[0].gpu_data
        bias = self.blobs[1].gpu_data if self.bias_term else None
        k = _kernels(self)
        for b, t in zip(bottom, top):
            x, y = b.gpu_data, t.mutable_gpu_data
            for n0 in range(0, self.outer, nb_max):
                nb = min(nb_max, self.outer - n0)
                cols = nb * spatial
                col = workspace(self, "col", rows * cols, self.dtype)
                ybuf = workspace(self, "ybuf", m * cols, self.dtype)
                self._gpu_im2col(x, n0, nb, col)
                mg, kg = m // g, rows // g
                for gi in range(g):
                    dev.blas.gemm(False, False, mg, cols, kg, 1.0, wt[gi * mg * kg:],
                                  col[gi * kg * cols:], 0.0, ybuf[gi * mg * cols:])
                k.to_image(nb * m * spatial, ybuf, bias, int(self.bias_term), nb, m, spatial,
                           y[n0 * m * spatial:])

    def backward_gpu(self, top, propagate_down, bottom):
        plan = self._gpu_cudnn_plan()
        if plan is not None:
            self._gpu_cudnn_backward(plan, top, propagate_down, bottom)
            return
        dev = gpu.current()
        c, h, w, oh, ow, rows, nb_max = self._gpu_plan()
        m, g = self.num_output, self.group
        mg, kg = m // g, rows // g
        spatial = oh * ow
        wt = self.blobs[0].gpu_data
        need_w = self.param_propagate_down[0]
        need_b = self.bias_term and self.param_propagate_down[1]
        dw = self.blobs[0].mutable_gpu_diff if need_w else None
        db = self.blobs[1].mutable_gpu_diff if need_b else None
        k = _kernels(self)
        for i, (b, t) in enumerate(zip(bottom, top)):
            if not (need_w or need_b or propagate_down[i]):
                continue
            dy = t.gpu_diff
            x = b.gpu_data if need_w else None
            dx = b.mutable_gpu_diff if propagate_down[i] else None
            for n0 in range(0, self.outer, nb_max):
                nb = min(nb_max, self.outer - n0)
                cols = nb * spatial
                dybuf = workspace(self, "ybuf", m * cols, self.dtype)
                k.from_image(nb * m * spatial, dy[n0 * m * spatial:], nb, m, spatial, dybuf)
                if need_b:
                    row_sums(dev, m, cols, dybuf, db, 1.0, 1.0)
                col = workspace(self, "col", rows * cols, self.dtype)
                if need_w:
                    self._gpu_im2col(x, n0, nb, col)
                    for gi in range(g):
                        dev.blas.gemm(False, True, mg, kg, cols, 1.0, dybuf[gi * mg * cols:],
                                      col[gi * kg * cols:], 1.0, dw[gi * mg * kg:])
                if dx is not None:
                    for gi in range(g):
                        dev.blas.gemm(True, False, kg, cols, mg, 1.0, wt[gi * mg * kg:],
                                      dybuf[gi * mg * cols:], 0.0, col[gi * kg * cols:])
                    k.col2im_batch(nb * c * h * w, col, nb, c, h, w, *self._gpu_geometry(),
                                   oh, ow, dx[n0 * c * h * w:])


    def _gpu_cudnn_backward(self, plan, top, propagate_down, bottom):
        need_w = self.param_propagate_down[0]
        need_b = self.bias_term and self.param_propagate_down[1]
        for i, (b, t) in enumerate(zip(bottom, top)):
            if not (need_w or need_b or propagate_down[i]):
                continue
            plan.backward(b.gpu_data if need_w else None, self.blobs[0].gpu_data, t.gpu_diff,
                          dw=self.blobs[0].mutable_gpu_diff if need_w else None,
                          db=self.blobs[1].mutable_gpu_diff if need_b else None,
                          dx=b.mutable_gpu_diff if propagate_down[i] else None)


@gpu_impl("InnerProduct")
class InnerProduct(object):
    def forward_gpu(self, bottom, top):
        dev = gpu.current()
        m, n, kk = self.m, self.num_output, self.k
        x, y = bottom[0].gpu_data, top[0].mutable_gpu_data
        dev.blas.gemm(False, not self.transpose, m, n, kk, 1.0, x, self.blobs[0].gpu_data, 0.0, y)
        if self.bias_term:
            dev.blas.gemm(False, False, m, n, 1, 1.0, ones(dev, m, self.dtype),
                          self.blobs[1].gpu_data, 1.0, y)

    def backward_gpu(self, top, propagate_down, bottom):
        dev = gpu.current()
        m, n, kk = self.m, self.num_output, self.k
        dy = top[0].gpu_diff
        if self.param_propagate_down[0]:
            x, dw = bottom[0].gpu_data, self.blobs[0].mutable_gpu_diff
            if self.transpose:
                dev.blas.gemm(True, False, kk, n, m, 1.0, x, dy, 1.0, dw)
            else:
                dev.blas.gemm(True, False, n, kk, m, 1.0, dy, x, 1.0, dw)
        if self.bias_term and self.param_propagate_down[1]:
            col_sums(dev, m, n, dy, self.blobs[1].mutable_gpu_diff, 1.0, 1.0)
        if propagate_down[0]:
            dev.blas.gemm(False, self.transpose, m, kk, n, 1.0, dy, self.blobs[0].gpu_data, 0.0,
                          bottom[0].mutable_gpu_diff)
