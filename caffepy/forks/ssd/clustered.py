"""OpenVINO's PriorBoxClustered as its Caffe front end reads it (the Model Optimizer's
mo_caffe.proto and caffe/priorbox_clustered_ext.py; the computation of its reference
prior_box_clustered.hpp): SSD's PriorBox with boxes of given pixel sizes instead of sizes made from
min_size / max_size / aspect ratios. The Intel detection models (person-detection-retail-0013 ...)
ship Caffe prototxts with it.
"""
import numpy as np

from ...layers.base import register_layer
from .detection import PriorBoxLayer


@register_layer("PriorBoxClustered")
class PriorBoxClusteredLayer(PriorBoxLayer):
    """Prior boxes of fixed pixel sizes at every cell of a feature map: per cell (h, w), centre
    ((w + offset) step_w, (h + offset) step_h), one box per (width_s, height_s) pair:

        [cx - width_s / 2, cy - height_s / 2, cx + width_s / 2, cy + height_s / 2] / (img_w, img_h)

    clipped to [0, 1] with ``clip``; channel 1 holds the variances (one value for all four
    coordinates, or four; default 0.1). Image size and steps as PriorBox's (img_size / img_h /
    img_w, else bottom 1's H x W; step / step_h / step_w, else image size / map size). The boxes
    depend on the bottoms' shapes only: their gradient is 0.

    prototxt: ``prior_box_param { width: [] height: [] (one height per width) clip: false
    variance: [] img_size / img_h / img_w step / step_h / step_w offset: 0.5 }`` (``width`` and
    ``height`` are the Model Optimizer's fields 14 and 15, renumbered here). Bottoms: feature map
    (N x C x H x W), image (N x C x H_img x W_img). Top: 1 x 2 x (H W num_boxes 4).
    """
    type = "PriorBoxClustered"

    def layer_setup(self, bottom, top):
        p = self.layer_param.prior_box_param
        self.sizes = np.array(list(zip(p.width, p.height)), dtype=np.float64).reshape(-1, 2)
        if len(p.width) != len(p.height) or not len(p.width) or np.any(self.sizes <= 0):
            raise self.error("prior_box_param needs as many height as width values, all > 0 "
                             "(got %d widths, %d heights)" % (len(p.width), len(p.height)))
        self.num_priors = len(self.sizes)
        var = list(p.variance) or [0.1]
        if len(var) not in (1, 4):
            raise self.error("variance must be 1 or 4 values, got %s" % var)
        self.variance = var * 4 if len(var) == 1 else var
        self.img_h = p.img_h or p.img_size
        self.img_w = p.img_w or p.img_size
        self.step_h = p.step_h or p.step
        self.step_w = p.step_w or p.step
        self.offset, self.clip = p.offset, p.clip

    def _sizes(self):
        return self.sizes

    def backward_cpu(self, top, propagate_down, bottom):
        for b, down in zip(bottom, propagate_down):
            if down:
                b.diff[...] = 0
