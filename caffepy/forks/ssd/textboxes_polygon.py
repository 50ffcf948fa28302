"""TextBoxes++'s DetectionOutput (MhLiao/TextBoxes_plusplus) with ``use_polygon``: quadrilaterals.

Built when a file sets ``detection_output_param { use_polygon: ... }`` (the fork's default is true,
but a DetectionOutput without the field is SSD's, as in every other fork).
"""
import numpy as np

from ...layers.base import register_variant
from .detection import DetectionOutputLayer, decode_boxes


@register_variant("DetectionOutput",
                  lambda lp: lp.detection_output_param.HasField("use_polygon"))
class PolygonDetectionOutputLayer(DetectionOutputLayer):
    """SSD's DetectionOutput whose priors also predict a quadrilateral (TextBoxes++).

    Each prior has 12 loc values: the box offsets (decoded as SSD's CENTER_SIZE) and 8 quad
    offsets, decoded from the prior's corners (prior w x h, variances v0, v1):
    x1 = xmin + v0 d1 w, y1 = ymin + v1 d2 h, x2 = xmax + v0 d3 w, y2 = ymin + v1 d4 h,
    x3 = xmax + v0 d5 w, y3 = ymax + v1 d6 h, x4 = xmin + v0 d7 w, y4 = ymax + v1 d8 h.
    NMS and keep_top_k run on the boxes, as SSD's (the fork's polygon path). Rows:
    ``[image_id, label, score, xmin, ymin, xmax, ymax, x1, y1, x2, y2, x3, y3, x4, y4]``; with no
    detection, one row of -1 per image with its image_id.

    prototxt: SSD's ``detection_output_param`` plus ``use_polygon: true``. The fork decodes
    quads only for ``code_type: CENTER_SIZE`` without ``variance_encoded_in_target`` (its other
    branches leave them unset), so other settings are refused; ``use_polygon: false`` (the
    fork's rotated boxes: 9 loc values, 12 columns) is refused too. Bottoms: loc (N x P*L*12),
    conf (N x P*num_classes), priors (1 x 2 x P*4). Top: 1 x 1 x num_kept x 15.
    """
    loc_values, row_width = 12, 15

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        p = self.layer_param.detection_output_param
        if not p.use_polygon:
            raise self.error("use_polygon: false (TextBoxes++'s rotated-box output) is not "
                             "supported")
        CS = type(self.layer_param.prior_box_param).CENTER_SIZE
        if self.code_type != CS or self.variance_encoded:
            raise self.error("use_polygon needs code_type: CENTER_SIZE and "
                             "variance_encoded_in_target: false (the fork decodes quads only then)")

    def reshape(self, bottom, top):
        self.P = bottom[2].shape[-1] // 4
        N = bottom[0].shape[0]
        if bottom[0].count != N * self.P * self.num_loc_classes * 12:
            raise self.error("loc has %d values per image; expected %d priors x %d x 12 (box and "
                             "quadrilateral)" % (bottom[0].count // N, self.P, self.num_loc_classes))
        if bottom[1].count != N * self.P * self.num_classes:
            raise self.error("conf has %d values per image; expected %d priors x %d classes"
                             % (bottom[1].count // max(N, 1), self.P, self.num_classes))
        top[0].reshape(1, 1, 1, 15)

    @staticmethod
    def _quads(prior, var, d):
        """P x 8 decoded corners (x1, y1, .., x4, y4) from P x 8 offsets."""
        w = (prior[:, 2] - prior[:, 0])[:, None]
        h = (prior[:, 3] - prior[:, 1])[:, None]
        base_x = prior[:, [0, 2, 2, 0]]
        base_y = prior[:, [1, 1, 3, 3]]
        out = np.empty_like(d)
        out[:, 0::2] = base_x + var[:, [0]] * d[:, 0::2] * w
        out[:, 1::2] = base_y + var[:, [1]] * d[:, 1::2] * h
        return out

    def _decoded(self, loc, prior):
        out = []
        for k in range(self.num_loc_classes):
            b = decode_boxes(prior[0], prior[1], loc[:, k, :4], self.code_type,
                             self.variance_encoded)
            out.append((b, np.concatenate([b, self._quads(prior[0], prior[1], loc[:, k, 4:])], 1)))
        return out
