"""Online hard example mining layers of R-FCN's caffe: SoftmaxWithLossOHEM, SmoothL1LossOHEM
(losses that also output the loss of every ROI) and BoxAnnotatorOHEM (keeps the hardest ROIs).
"""
import numpy as np

from ...layers.base import Layer, register_layer


@register_layer("SoftmaxWithLossOHEM")
class SoftmaxWithLossOHEMLayer(Layer):
    """Softmax cross-entropy over axis 1, with the per-instance losses as an extra top.

        p = softmax(x, axis 1);  l_i = -log(max(p[i, label_i], FLT_MIN)) (0 where label is ignored)
        loss = sum(l) / (number of non-ignored labels);  dx = (p - onehot(label)) / count

    prototxt: ``loss_param { ignore_label (unset) }`` (normalization VALID). Bottoms: scores
    (N x C x ...), labels (N x 1 x ... or N x ...). Tops: loss (scalar), [prob (like scores)],
    [per-instance loss (N x ...)]; usually all with loss_weight 0 in OHEM nets.
    """
    exact_num_bottom_blobs = 2
    min_top_blobs = 1
    max_top_blobs = 3
    is_loss = True

    def layer_setup(self, bottom, top):
        lp = self.layer_param.loss_param
        self.ignore = lp.ignore_label if lp.HasField("ignore_label") else None

    def reshape(self, bottom, top):
        x = bottom[0]
        self.outer, self.C = x.shape[0], x.shape[1]
        self.inner = x.count_range(2)
        if bottom[1].count != self.outer * self.inner:
            raise self.error("labels (%s) must have N * spatial = %d values for scores %s"
                             % (bottom[1].shape, self.outer * self.inner, x.shape))
        top[0].reshape(())
        if len(top) > 1:
            top[1].reshape(x.shape)
        if len(top) > 2:
            top[2].reshape(bottom[1].shape)     # R-FCN: per-RoI loss shaped like the labels

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(self.outer, self.C, self.inner)
        z = x - x.max(axis=1, keepdims=True)
        e = np.exp(z)
        self.prob = e / e.sum(axis=1, keepdims=True)
        label = bottom[1].data.reshape(self.outer, self.inner).astype(np.int64)
        self.valid = np.ones(label.shape, bool) if self.ignore is None else label != self.ignore
        if np.any((label[self.valid] < 0) | (label[self.valid] >= self.C)):
            raise self.error("label out of range [0, %d)" % self.C)
        self.label = np.where(self.valid, label, 0)
        p = np.take_along_axis(self.prob, self.label[:, None, :], axis=1)[:, 0, :]
        per = np.where(self.valid, -np.log(np.maximum(p, np.finfo(np.float32).tiny)), 0.0)
        self.count = max(int(self.valid.sum()), 1)
        top[0].data[...] = per.sum() / self.count
        if len(top) > 1:
            top[1].data[...] = self.prob.reshape(top[1].shape)
        if len(top) > 2:
            top[2].data[...] = per.reshape(top[2].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the labels")
        if not propagate_down[0]:
            return
        d = self.prob.copy()
        np.put_along_axis(d, self.label[:, None, :],
                          np.take_along_axis(d, self.label[:, None, :], axis=1) - 1, axis=1)
        d *= self.valid[:, None, :]
        bottom[0].diff[...] = (d * (top[0].diff / self.count)).reshape(bottom[0].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("SmoothL1LossOHEM")
class SmoothL1LossOHEMLayer(Layer):
    """Smooth L1 loss with the per-instance losses as an extra top (R-FCN).

        d = w_in * (x - t);  f(d) = 0.5 (sigma d)^2 if |d| < 1 / sigma^2 else |d| - 0.5 / sigma^2
        l_n = sum over the non-batch axes of w_out * f(d);  loss = sum(l) / N

    prototxt: ``smooth_l1_loss_param { sigma: 1 }``. Bottoms: predictions (N x ...), targets,
    [inside weights], [outside weights] (all alike). Tops: loss (scalar), [per-instance loss (N)].
    """
    min_bottom_blobs = 2
    max_bottom_blobs = 4
    min_top_blobs = 1
    max_top_blobs = 2
    is_loss = True

    def layer_setup(self, bottom, top):
        self.s2 = self.layer_param.smooth_l1_loss_param.sigma ** 2

    def reshape(self, bottom, top):
        for i, b in enumerate(bottom[1:], 1):
            if b.count != bottom[0].count:
                raise self.needs("bottom[%d] %s must match the predictions %s"
                                 % (i, b.shape, bottom[0].shape), [(i, bottom[0].shape, 0)])
        top[0].reshape(())
        if len(top) > 1:   # R-FCN: Reshape(num, 1, height, width) with Caffe's legacy accessors
            shape = tuple(bottom[0].shape) + (1, 1, 1)
            top[1].reshape((shape[0], 1, shape[2], shape[3]))

    def forward_cpu(self, bottom, top):
        N = bottom[0].shape[0]
        d = bottom[0].data - bottom[1].data.reshape(bottom[0].shape)
        if len(bottom) > 2:
            d = d * bottom[2].data.reshape(d.shape)
        self.d = d
        a = np.abs(d)
        f = np.where(a < 1 / self.s2, 0.5 * self.s2 * d * d, a - 0.5 / self.s2)
        if len(bottom) > 3:
            f = f * bottom[3].data.reshape(d.shape)
        per = f.reshape(N, f.shape[1] if f.ndim > 1 else 1, -1).sum(axis=1)
        top[0].data[...] = per.sum() / N
        if len(top) > 1:
            top[1].data[...] = per.reshape(top[1].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        d = self.d
        g = np.where(np.abs(d) < 1 / self.s2, self.s2 * d, np.sign(d))
        for w in bottom[2:4]:
            g = g * w.data.reshape(d.shape)
        g = g * (top[0].diff / d.shape[0])
        for i, sign in ((0, 1), (1, -1)):
            if propagate_down[i]:
                bottom[i].diff[...] = sign * g.reshape(bottom[i].shape)
        # the weights get no gradient, asked or not: R-FCN's backward loops over bottoms 0 and 1
        # only (its nets' weights come from BoxAnnotatorOHEM, below layers with parameters)


@register_layer("BoxAnnotatorOHEM")
class BoxAnnotatorOHEMLayer(Layer):
    """Keep the ``roi_per_img`` hardest ROIs of each image (R-FCN's online hard example mining).

    ROIs are ranked by their loss (descending, per image given by rois[:, 0]); the kept ones keep
    their label and box-regression weights, the others get ``ignore_label`` and weight 0.

    prototxt: ``box_annotator_ohem_param { roi_per_img (required), ignore_label: -1 }``.
    Bottoms: rois (R x 5), per-ROI loss (R), labels (R), bbox weights (R x ...).
    Tops: labels_ohem (like labels), bbox_weights_ohem (like the weights). No backward.
    """
    exact_num_bottom_blobs = 4
    exact_num_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.box_annotator_ohem_param
        self.roi_per_img, self.ignore = int(p.roi_per_img), p.ignore_label
        if self.roi_per_img <= 0:
            raise self.error("box_annotator_ohem_param.roi_per_img must be > 0")

    def reshape(self, bottom, top):
        R = bottom[0].shape[0]
        if bottom[1].count != R or bottom[2].count != R or bottom[3].shape[0] != R:
            raise self.error("loss, labels and bbox weights need one entry per ROI (%d)" % R)
        top[0].reshape(bottom[2].shape)
        top[1].reshape(bottom[3].shape)

    def forward_cpu(self, bottom, top):
        R = bottom[0].shape[0]
        img = bottom[0].data.reshape(R, -1)[:, 0].astype(np.int64)
        loss = bottom[1].data.reshape(R)
        order = np.lexsort((-loss, img))                      # by image, hardest first
        rank = np.empty(R, np.int64)
        starts = np.searchsorted(img[order], img[order], side="left")
        rank[order] = np.arange(R) - starts
        keep = rank < self.roi_per_img
        top[0].data[...] = np.where(keep, bottom[2].data.reshape(R), self.ignore).reshape(top[0].shape)
        w = bottom[3].data.reshape(R, -1) * keep[:, None]
        top[1].data[...] = w.reshape(top[1].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down):
            raise self.error("has no backward")
