"""GPU EuclideanLoss and SigmoidCrossEntropyLoss (SoftmaxWithLoss lives with Softmax).

Per-element terms are written by a kernel and summed with cuBLAS (the scalar loss is read back:
one wait per forward). Gradients as in ``caffepy.layers.loss`` / ``loss_regression``.
"""
from ... import gpu
from ...layers.loss import normalizer, reject_label_gradient
from ..kernels import register_source
from ..ops import dsum, workspace
from . import gpu_impl

SOURCE = register_source("loss", r"""
__global__ void sigmoid_ce_forward(const int n, const Dtype* x, const Dtype* t,
    const int has_ignore, const int ignore_label, Dtype* loss, Dtype* counts) {
  CUDA_KERNEL_LOOP(i, n) {
    const Dtype v = x[i];
    if (has_ignore && (int)t[i] == ignore_label) {
      loss[i] = 0;
      counts[i] = 0;
    } else {
      loss[i] = -(v * (t[i] - (Dtype)(v >= 0)) - log1p(exp(-fabs(v))));
      counts[i] = 1;
    }
  }
}
__global__ void sigmoid_ce_backward(const int n, const Dtype* x, const Dtype* t,
    const int has_ignore, const int ignore_label, const Dtype scale, Dtype* dx) {
  CUDA_KERNEL_LOOP(i, n) {
    if (has_ignore && (int)t[i] == ignore_label) {
      dx[i] = 0;
    } else {
      const Dtype s = (Dtype)0.5 * ((Dtype)1 + tanh((Dtype)0.5 * x[i]));
      dx[i] = (s - t[i]) * scale;
    }
  }
}
""")


@gpu_impl("EuclideanLoss")
class EuclideanLoss(object):
    def forward_gpu(self, bottom, top):
        dev = gpu.current()
        n = bottom[0].count
        diff = workspace(self, "diff", n, self.dtype)
        dev.kernels("util", self.dtype).vsub(n, bottom[0].gpu_data, bottom[1].gpu_data, diff)
        top[0].data[...] = dev.blas.dot(n, diff, diff) / bottom[0].shape[0] / 2.0
        self._gpu_diff = diff

    def backward_gpu(self, top, propagate_down, bottom):
        dev = gpu.current()
        for i, sign in ((0, 1.0), (1, -1.0)):
            if propagate_down[i]:
                alpha = sign * float(top[0].diff) / bottom[i].shape[0]
                dev.kernels("util", self.dtype).scale_copy(bottom[i].count, alpha, self._gpu_diff,
                                                           bottom[i].mutable_gpu_diff)


@gpu_impl("SigmoidCrossEntropyLoss")
class SigmoidCrossEntropyLoss(object):
    def _gpu_ignore(self):
        return (0, 0) if self.ignore_label is None else (1, int(self.ignore_label))

    def forward_gpu(self, bottom, top):
        dev = gpu.current()
        x = bottom[0]
        n = x.count
        loss, counts = workspace(self, "loss", n, self.dtype), workspace(self, "cnt", n, self.dtype)
        dev.kernels("loss", self.dtype).sigmoid_ce_forward(
            n, x.gpu_data, bottom[1].gpu_data, *self._gpu_ignore(), loss, counts)
        valid = int(round(dev.blas.asum(n, counts)))
        num = x.shape[0]
        self.norm = normalizer(self.normalization, self.layer_param.loss_param, num,
                               n // max(num, 1), valid)
        top[0].data[...] = dsum(dev, n, loss) / self.norm

    def backward_gpu(self, top, propagate_down, bottom):
        reject_label_gradient(self, propagate_down)
        if not propagate_down[0]:
            return
        dev = gpu.current()
        dev.kernels("loss", self.dtype).sigmoid_ce_backward(
            bottom[0].count, bottom[0].gpu_data, bottom[1].gpu_data, *self._gpu_ignore(),
            float(top[0].diff) / self.norm, bottom[0].mutable_gpu_diff)
