"""TextBoxes++'s DetectionOutput (MhLiao/TextBoxes_plusplus) with ``use_polygon``: quadrilaterals.

Built when a file sets ``detection_output_param { use_polygon: ... }`` (the fork's default is true,
but a DetectionOutput without the field is SSD's, as in every other fork).
"""
import numpy as np

from .base import register_variant
from .fork_detection import DetectionOutputLayer, decode_boxes, nms_fast


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

    def forward_cpu(self, bottom, top):
        N, P, L = bottom[0].shape[0], self.P, self.num_loc_classes
        loc = bottom[0].data.reshape(N, P, L, 12).astype(np.float64)
        conf = bottom[1].data.reshape(N, P, self.num_classes).astype(np.float64)
        prior = bottom[2].data.reshape(2, P, 4).astype(np.float64)
        rows = []
        for n in range(N):
            dets = []
            boxes = [decode_boxes(prior[0], prior[1], loc[n, :, k, :4], self.code_type,
                                  self.variance_encoded) for k in range(L)]
            quads = [self._quads(prior[0], prior[1], loc[n, :, k, 4:]) for k in range(L)]
            for c in range(self.num_classes):
                if c == self.background:
                    continue
                k = 0 if self.share_location else c
                s = conf[n, :, c]
                for i in nms_fast(boxes[k], s, self.conf_threshold, self.nms_threshold, self.eta,
                                  self.top_k):
                    dets.append((c, s[i], list(boxes[k][i]) + list(quads[k][i])))
            if self.keep_top_k > -1 and len(dets) > self.keep_top_k:
                order = np.argsort([-d[1] for d in dets], kind="stable")[:self.keep_top_k]
                dets = [dets[i] for i in sorted(order, key=lambda i: (dets[i][0], -dets[i][1]))]
            rows += [[n, c, s] + coords for c, s, coords in dets]
        if not rows:
            out = np.full((N, 15), -1.0)
            out[:, 0] = np.arange(N)
        else:
            out = np.array(rows)
        top[0].reshape(1, 1, out.shape[0], 15)
        top[0].data[...] = out.reshape(top[0].shape)
