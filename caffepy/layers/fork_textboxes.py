"""TextBoxes++ (MhLiao/TextBoxes_plusplus): SSD's PriorBox with ``denser_prior_boxes``."""
import numpy as np

from .base import register_variant
from .fork_detection import PriorBoxLayer


@register_variant("PriorBox", lambda lp: lp.prior_box_param.denser_prior_boxes)
class DenserPriorBoxLayer(PriorBoxLayer):
    """SSD's PriorBox where every prior is followed by a copy whose centre is moved down to
    y = (h + 1) step_h (TextBoxes++'s vertical offsets for long text lines), so each cell has
    2 x SSD's priors in the order (size 1, size 1 shifted, size 2, size 2 shifted, ...).

    prototxt: SSD's ``prior_box_param`` plus ``denser_prior_boxes: true``. Top:
    1 x 2 x (H W 2 num_priors 4).
    """

    def layer_setup(self, bottom, top):
        PriorBoxLayer.layer_setup(self, bottom, top)
        self.num_priors *= 2

    def forward_cpu(self, bottom, top):
        H, W = bottom[0].shape[2], bottom[0].shape[3]
        img_h = self.img_h or bottom[1].shape[2]
        img_w = self.img_w or bottom[1].shape[3]
        step_h = self.step_h or img_h / float(H)
        step_w = self.step_w or img_w / float(W)
        cx = (np.arange(W) + self.offset) * step_w
        cys = ((np.arange(H) + self.offset) * step_h, (np.arange(H) + 1.0) * step_h)
        wh = self._sizes()
        boxes = np.empty((H, W, len(wh), 2, 4))
        for k, cy in enumerate(cys):
            boxes[..., k, 0] = (cx[None, :, None] - wh[:, 0] / 2) / img_w
            boxes[..., k, 1] = (cy[:, None, None] - wh[:, 1] / 2) / img_h
            boxes[..., k, 2] = (cx[None, :, None] + wh[:, 0] / 2) / img_w
            boxes[..., k, 3] = (cy[:, None, None] + wh[:, 1] / 2) / img_h
        if self.clip:
            np.clip(boxes, 0.0, 1.0, out=boxes)
        top[0].data[0, 0] = boxes.ravel()
        top[0].data[0, 1] = np.tile(self.variance, H * W * len(wh) * 2)
