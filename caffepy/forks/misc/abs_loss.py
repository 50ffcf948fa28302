"""AbsLoss: the L1 loss of the unsupervised-depth Caffe fork
(panzhenfu/caffe_Unsupervised_Depth_Estimation, src/caffe/layers/abs_loss_layer.cpp), which the
light-field and stereo nets of other repositories name."""
import numpy as np

from ...layers.base import LossLayer, register_layer


@register_layer("AbsLoss")
class AbsLossLayer(LossLayer):
    """Sum of absolute differences over the batch, divided by the batch size N:

        d = a - b,   loss = sum |d| / N
        dL/da = w sign(d) / N,   dL/db = -w sign(d) / N     (w: the top's diff, the loss_weight)

    with sign(0) = 0, as the fork's Backward_cpu writes it (+alpha, -alpha or 0 per element).
    Either bottom may receive a gradient (both are predictions in the stereo nets that use it).

    prototxt: no parameters of its own (``loss_weight`` as every loss). Bottoms: a (N x ...),
    b (the same count per sample, any shape); top: the loss (). The fork's ``ignore_label``
    masking reads a ``loss_param.ignore_mode`` field that caffepy's schema does not declare; with
    ``loss_param { ignore_label }`` set the layer refuses to build instead of computing without it.
    """

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        if self.layer_param.loss_param.HasField("ignore_label"):
            raise self.error("loss_param.ignore_label: the fork masks by it with an ignore_mode "
                             "field caffepy does not have; remove it to compute the plain L1 loss")

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        if bottom[0].count != bottom[1].count or bottom[0].shape[0] != bottom[1].shape[0]:
            raise self.shape_mismatch("inputs must have the same dimension (%s vs %s)"
                                      % (bottom[0].shape, bottom[1].shape), 1, 0, bottom)

    def forward_cpu(self, bottom, top):
        self._d = bottom[0].data - bottom[1].data.reshape(bottom[0].shape)
        top[0].data[...] = np.sum(np.abs(self._d)) / bottom[0].shape[0]

    def backward_cpu(self, top, propagate_down, bottom):
        w = float(top[0].diff.reshape(()))
        s = np.sign(self._d)
        for i, sign in ((0, 1.0), (1, -1.0)):
            if propagate_down[i]:
                bottom[i].diff[...] = (sign * w / bottom[i].shape[0] * s).reshape(bottom[i].shape)

    def allow_force_backward(self, bottom_index):
        return True
