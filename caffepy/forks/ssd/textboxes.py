"""TextBoxes++ (MhLiao/TextBoxes_plusplus): SSD's PriorBox with ``denser_prior_boxes``."""
import numpy as np

from ...layers.base import register_variant
from .detection import PriorBoxLayer


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
        H, W, img_h, img_w, step_h, step_w = self._grid(bottom)
        cx = (np.arange(W) + self.offset) * step_w
        cys = ((np.arange(H) + self.offset) * step_h, (np.arange(H) + 1.0) * step_h)
        wh = self._sizes()
        boxes = np.empty((H, W, len(wh), 2, 4))
        for k, cy in enumerate(cys):
            self._corners(boxes[..., k, :], cx, cy, wh, img_w, img_h)
        self._emit(top, boxes)
