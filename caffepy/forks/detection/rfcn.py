"""R-FCN's own caffe (daijifeng001/caffe-rfcn, the MATLAB R-FCN): its ``SoftmaxWithLoss`` and
``SmoothL1Loss`` with a per-instance loss top, which its OHEM train nets feed to BoxAnnotatorOHEM.

They keep the BVLC / Fast R-CNN type names, so they are variants chosen per layer
(``register_variant``): a SoftmaxWithLoss with 3 tops, and a SmoothL1Loss with 3 bottoms or 2
tops (py-faster-rcnn's SmoothL1Loss takes 2 or 4 bottoms and 1 top). py-R-FCN's separate
``SoftmaxWithLossOHEM`` / ``SmoothL1LossOHEM`` types are in ``ohem.py``.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_variant
from ...layers.loss import SoftmaxWithLossLayer, normalization_mode


@register_variant("SoftmaxWithLoss", lambda lp: len(lp.top) == 3)
class RFCNSoftmaxWithLossLayer(SoftmaxWithLossLayer):
    """BVLC SoftmaxWithLoss plus R-FCN's third top, the loss of every instance.

    l_i = -log(max(p[i, label_i], FLT_MIN)), 0 where the label is ignored (not normalised);
    the first two tops and the gradient are BVLC's (the third top's diff is not read).

    prototxt: as SoftmaxWithLoss (``loss_param { ignore_label normalization normalize }``,
    ``softmax_param { axis }``). Tops: loss (scalar), prob (shape of the scores), per-instance
    loss (shape of the labels, e.g. R x 1 x 1 x 1 for R RoIs).
    """
    max_top_blobs = 3

    def reshape(self, bottom, top):
        SoftmaxWithLossLayer.reshape(self, bottom, top)
        if len(top) >= 3:
            top[2].reshape(bottom[1].shape)

    def forward_cpu(self, bottom, top):
        SoftmaxWithLossLayer.forward_cpu(self, bottom, top)
        if len(top) >= 3:
            p = self._label_prob()
            per = np.where(self.valid, -np.log(np.maximum(p, np.finfo(np.float32).tiny)), 0.0)
            top[2].data[...] = per.reshape(top[2].shape)


def _is_rfcn_smooth_l1(lp):
    """R-FCN's form: a weight bottom (3 bottoms) or the per-instance top with 2 bottoms; 4
    bottoms (inside and outside weights) are py-faster-rcnn's / Cascade R-CNN's."""
    return len(lp.bottom) == 3 or (len(lp.top) == 2 and len(lp.bottom) == 2)


@register_variant("SmoothL1Loss", _is_rfcn_smooth_l1)
class RFCNSmoothL1LossLayer(Layer):
    """R-FCN's smooth L1 loss: one optional weight bottom, LossParameter normalisation and a
    per-instance loss top.

        d = w * (a - b)  (w = 1 without a third bottom)
        f(d) = 0.5 d^2 if |d| < 1 else |d| - 0.5       (sigma is not used by this fork)
        loss = sum f(d) / max(1, norm)
        norm: FULL and VALID = N * H * W, BATCH_SIZE = N, PRE_FIXED = pre_fixed_normalizer,
              NONE = 1 (``loss_param.normalization``, default VALID; legacy ``normalize``)
        per-instance top: l[n, 0, h, w] = sum_c f(d[n, c, h, w])
        backward (the fork's): dL/da = -dL/db = top_diff / norm * f'(d), f'(d) = d if |d| < 1
        else sign(d). The weight is not applied again, so this is the exact gradient for 0/1
        weights (what R-FCN feeds it) and the fork's approximation otherwise.

    prototxt: ``loss_param { normalization: VALID pre_fixed_normalizer: 1 }``.
    Bottoms: predictions a (N x C x H x W, or N x C), targets b, [weights w] (all alike).
    Tops: loss (scalar), [per-instance loss N x 1 x H x W]. Gradients reach a and b only (one
    asked for w is ignored, as the fork does).
    """
    type = "SmoothL1Loss"
    exact_num_bottom_blobs = None
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2
    auto_top_blobs = True
    is_loss = True

    def layer_setup(self, bottom, top):
        lp = self.layer_param.loss_param
        self.mode = normalization_mode(lp)
        modes = type(lp)
        if self.mode not in (modes.FULL, modes.VALID, modes.BATCH_SIZE, modes.NONE,
                             getattr(modes, "PRE_FIXED", -1)):
            raise self.error("unknown loss_param normalization %d" % self.mode)

    def reshape(self, bottom, top):
        for i in range(1, len(bottom)):
            if bottom[i].count_range(1) != bottom[0].count_range(1):
                raise self.error("bottom %d has shape %s; expected the per-example size of "
                                 "bottom 0 %s" % (i, bottom[i].shape, bottom[0].shape), ShapeError)
        shape = tuple(bottom[0].shape) + (1,) * max(0, 4 - bottom[0].num_axes)
        self.N, self.HW = shape[0], int(np.prod(shape[2:]))
        top[0].reshape(())
        if len(top) > 1:
            top[1].reshape((shape[0], 1) + shape[2:])

    def _norm(self):
        lp = self.layer_param.loss_param
        modes = type(lp)
        if self.mode == getattr(modes, "PRE_FIXED", -1):
            value = lp.pre_fixed_normalizer
        else:
            value = {modes.FULL: self.N * self.HW, modes.VALID: self.N * self.HW,
                     modes.BATCH_SIZE: self.N, modes.NONE: 1}[self.mode]
        return max(1.0, float(value))

    def forward_cpu(self, bottom, top):
        d = bottom[0].data - bottom[1].data.reshape(bottom[0].shape)
        if len(bottom) > 2:
            d = d * bottom[2].data.reshape(d.shape)
        self.d = d
        ad = np.abs(d)
        err = np.where(ad < 1.0, 0.5 * d * d, ad - 0.5)
        self.norm = self._norm()
        top[0].data[...] = err.sum() / self.norm
        if len(top) > 1:
            top[1].data[...] = err.reshape(self.N, -1, self.HW).sum(axis=1).reshape(top[1].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        # the weights (bottom 2) get no gradient, asked or not: the fork's backward loops over
        # bottoms 0 and 1 only
        d = self.d
        g = np.where(np.abs(d) < 1.0, d, np.sign(d)) * (float(top[0].diff) / self.norm)
        for i, sign in ((0, 1.0), (1, -1.0)):
            if propagate_down[i]:
                bottom[i].diff[...] = (sign * g).reshape(bottom[i].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index < 2
