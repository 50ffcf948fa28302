"""CTPN's Python layer ``layers.text_proposal_layer.ProposalLayer`` (tianzhi0549/CTPN,
``src/layers/text_proposal_layer.py`` with ``src/anchor.py``), used by its deploy net.

Anchors: 10 per cell, width 16 and heights 11, 16, 23, 33, 48, 68, 97, 139, 198, 283 about the
centre (7.5, 7.5) of a 16 x 16 base box: x1 = 7.5 - 8, x2 = 7.5 + 8, y1 = 7.5 - h // 2,
y2 = 7.5 + h // 2, each truncated toward zero to an integer (the fork's int32 arrays and its
Python 2 integer division), shifted by (x, y) * feat_stride, cells in row-major order.

Bottoms: scores (1 x 20 x H x W: background for the 10 anchors, then foreground), deltas
(1 x 20 x H x W: (dy, dh) per anchor), im_info (image height, width, ...). For an anchor with
centre cy and height h (y2 - y1 + 1): h' = h e^dh, y1' = dy h + cy - h' / 2, y2' = y1' + h';
x1, x2 are the anchor's. Boxes are clipped to [0, width - 1] x [0, height - 1].
Tops: boxes (R x 4: x1, y1, x2, y2; R = 10 H W, float32), scores (R x 1: foreground).
``param_str``: ``'feat_stride': 16``. No backward.
"""
import numpy as np

from ...layers.python_layer import Layer
from ..detection.frcnn.boxes import parse_param_str

HEIGHTS = (11, 16, 23, 33, 48, 68, 97, 139, 198, 283)


def basic_anchors():
    h = np.asarray(HEIGHTS)
    out = np.empty((len(h), 4))
    out[:, 0], out[:, 2] = 7.5 - 8, 7.5 + 8
    out[:, 1], out[:, 3] = 7.5 - h // 2, 7.5 + h // 2
    return np.trunc(out).astype(np.int32)


class TextProposalLayer(Layer):
    """See module doc."""

    def setup(self, bottom, top):
        params = parse_param_str(self.param_str)
        if "feat_stride" not in params:
            raise ValueError("text ProposalLayer: param_str %r has no 'feat_stride'" % self.param_str)
        self.stride = int(params["feat_stride"])
        self.anchors = basic_anchors()
        top[0].reshape(1, 4)
        top[1].reshape(1, 1, 1, 1)

    def reshape(self, bottom, top):
        pass

    def forward(self, bottom, top):
        if bottom[0].data.shape[0] != 1:
            raise ValueError("text ProposalLayer: only single-image batches are supported")
        A = len(self.anchors)
        scores = bottom[0].data[:, A:].transpose(0, 2, 3, 1).reshape(-1, 1)
        deltas = bottom[1].data.transpose(0, 2, 3, 1).reshape(-1, 2).astype(np.float64)
        H, W = bottom[0].data.shape[2:]
        ys, xs = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
        shift = np.stack([xs, ys, xs, ys], axis=-1).reshape(-1, 1, 4) * self.stride
        anchors = (self.anchors[None] + shift).reshape(-1, 4).astype(np.float64)
        cy = (anchors[:, 1] + anchors[:, 3]) / 2.0
        ah = anchors[:, 3] - anchors[:, 1] + 1.0
        h = np.exp(deltas[:, 1]) * ah
        y1 = deltas[:, 0] * ah + cy - h / 2.0
        boxes = np.stack([anchors[:, 0], y1, anchors[:, 2], y1 + h], axis=1).astype(np.float32)
        im_h, im_w = bottom[2].data.reshape(-1)[:2]
        boxes[:, 0::2] = np.clip(boxes[:, 0::2], 0, im_w - 1)
        boxes[:, 1::2] = np.clip(boxes[:, 1::2], 0, im_h - 1)
        top[0].reshape(*boxes.shape)
        top[0].data[...] = boxes
        top[1].reshape(*scores.shape)
        top[1].data[...] = scores

    def backward(self, top, propagate_down, bottom):
        pass
