"""happynear/caffe-windows' FCNAccuracy (commit 967eedf,
``src/caffe/layers/fcn_accuracy_layer.cpp``; also in Centerus/caffe-windows and
Aliang-SEU/MTCNN-on-caffe-window): the hit rate of a score map's peak."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


@register_layer("FCNAccuracy")
class FCNAccuracyLayer(Layer):
    """The share of groups of ``top_k`` consecutive images whose peak lands on a positive label.

    The images are taken in groups of k = ``accuracy_param.top_k`` (a last, incomplete group is
    not counted). For each group, the first maximum of the scores over (image, c, h, w) in
    memory order; the group is a hit when that image is the group's middle one (index (k - 1) / 2
    within the group) and the label at (i, c, h, w) is > 0, i the image's index WITHIN the group:
    the fork reads ``bottom[1]->offset(max_n, ...)`` with max_n = n % k, so every group is judged
    by the labels of the first k images; caffepy does the same. top[0] = hits / groups (NaN when
    there is no complete group: the fork's 0 / 0). A second top, if given, has one entry per
    channel and is never written by the fork (its shape uses a label_axis_ the fork never sets);
    caffepy gives it C zeros.

    prototxt: ``accuracy_param { top_k: 1 }`` (nothing else is read). Bottoms: scores
    (N x C x H x W), labels (the same count, read with their own N x C x H x W), optionally
    weights (the same count; only checked). Top: scalar accuracy [, C per-class zeros].
    No backward.
    """
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        self.k = int(self.layer_param.accuracy_param.top_k)
        if self.k < 1:
            raise self.error("accuracy_param.top_k must be positive (got %d)" % self.k)

    def reshape(self, bottom, top):
        x, lab = bottom[:2]
        if x.num_axes != 4 or lab.num_axes != 4:
            raise self.error("scores and labels must be 4-D, got %s and %s"
                             % (x.shape, lab.shape), ShapeError)
        if lab.count != x.count:
            raise self.needs("the labels must have the scores' count %d, got %s"
                             % (x.count, lab.shape), [(1, x.shape, 0)])
        if len(bottom) == 3 and bottom[2].count != lab.count:
            raise self.needs("the weights must have the labels' count %d, got %s"
                             % (lab.count, bottom[2].shape), [(2, lab.shape, 1)])
        top[0].reshape(())
        if len(top) > 1:
            top[1].reshape((x.shape[1],))

    def forward_cpu(self, bottom, top):
        x, lab = bottom[0].data, bottom[1].data
        k = self.k
        groups = x.shape[0] // k
        hits = 0
        for g in range(groups):
            block = x[g * k:(g + 1) * k]
            i, c, h, w = np.unravel_index(int(np.argmax(block)), block.shape)
            if i == (k - 1) // 2:
                if not (i < lab.shape[0] and c < lab.shape[1] and h < lab.shape[2]
                        and w < lab.shape[3]):
                    raise self.error("the peak (%d, %d, %d, %d) lies outside the labels %s"
                                     % (i, c, h, w, lab.shape))
                hits += int(lab[i, c, h, w] > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            top[0].data[...] = np.float64(hits) / groups if groups else np.nan
        if len(top) > 1:
            top[1].data[...] = 0

    def backward_cpu(self, top, propagate_down, bottom):
        """Accuracy has no gradient."""
