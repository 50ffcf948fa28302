"""jolibrain/caffe's (DeepDetect's) DiceCoefLoss, its V1 type DICE_LOSS."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import LossLayer, register_layer


@register_layer("DiceCoefLoss")
class DiceCoefLossLayer(LossLayer):
    """Soft Dice loss on per-class maps (jolibrain/caffe,
    src/caffe/layers/dice_coef_loss_layer.cpp).

    With p the prediction of image j (C x H x W, usually a softmax or sigmoid), t the one-hot of
    its label map (label values rounded) and m a mask over the channels (1; 0 on the channel
    ``ignore_label`` with ``generalization: MULTICLASS``):

        B_j = s + sum m p^2 + sum m t^2;  r_j = (s + 2 sum m p t) / B_j;  loss = 1 - sum |r_j| / N
        dL/dp_j = 2 g (r_j p - t) / B_j

    s = 1 / N with ``generalization: NONE`` (the default), 0 with MULTICLASS. The gradient is the
    fork's: the derivative of the loss times N, without the channel mask (g is the top's diff).
    prototxt: ``dice_coef_loss_param { generalization: NONE | MULTICLASS ignore_label: -1 }``;
    the weighted modes, ``weights`` (a per-class weight file) and ``contour_shape`` (contour
    weights) are refused. Bottoms: prediction N x C x H x W, labels N x 1 x H x W. Top: loss.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.dice_coef_loss_param
        modes = type(p).GeneralizationMode
        if p.generalization not in (modes.Value("NONE"), modes.Value("MULTICLASS")):
            raise self.error("dice_coef_loss_param: generalization %s is not supported (NONE and "
                             "MULTICLASS are)" % modes.Name(p.generalization))
        if p.weights or p.contour_shape != 0:
            raise self.error("dice_coef_loss_param: weights and contour_shape are not supported")
        self.multiclass = p.generalization == modes.Value("MULTICLASS")
        self.ignore = p.ignore_label if self.multiclass else -1

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        if bottom[1].num_axes < 2 or bottom[1].shape[1] != 1:
            raise self.error("labels must have 1 channel, got %s" % (bottom[1].shape,),
                             ShapeError)
        if bottom[0].count_range(2) != bottom[1].count_range(2):
            raise self.error("prediction %s and labels %s differ in size"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)

    def forward_cpu(self, bottom, top):
        n, c = bottom[0].shape[:2]
        p = bottom[0].data.reshape(n, c, -1).astype(np.float64)
        lab = np.round(bottom[1].data.reshape(n, -1)).astype(int)
        if lab.min() < 0 or lab.max() >= c:
            raise self.error("label values must lie in [0, %d)" % c)
        t = np.zeros_like(p)
        np.put_along_axis(t, lab[:, None, :], 1.0, axis=1)
        m = np.ones((1, c, 1))
        if self.multiclass and 0 <= self.ignore < c and c > 1:
            m[0, self.ignore] = 0
        s = 0.0 if self.multiclass else 1.0 / n
        self.b = s + (m * p * p).sum((1, 2)) + (m * t * t).sum((1, 2))
        self.r = (s + 2 * (m * p * t).sum((1, 2))) / self.b
        self.p, self.t = p, t
        top[0].data[...] = 1 - np.abs(self.r).sum() / n

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the labels")
        if propagate_down[0]:
            g = float(top[0].diff)
            d = 2 * g * (self.r[:, None, None] * self.p - self.t) / self.b[:, None, None]
            bottom[0].diff[...] = d.reshape(bottom[0].shape)
