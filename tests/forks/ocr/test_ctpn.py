"""CTPN's Python layer layers.text_proposal_layer.ProposalLayer, built in (caffepy.forks.ocr.ctpn)."""
import sys

import numpy as np

from caffepy.forks.ocr.ctpn import basic_anchors
from caffepy.testing import make_blobs, make_layer, run_layer


def test_text_proposals_by_hand(monkeypatch):
    monkeypatch.delitem(sys.modules, "layers.text_proposal_layer", raising=False)
    # the fork's anchors: int32 of 7.5 -+ 8 and 7.5 -+ h // 2 (h = 11: 2.5 -> 2, 12.5 -> 12)
    np.testing.assert_array_equal(basic_anchors()[:3], [[0, 2, 15, 12], [0, 0, 15, 15], [0, -3, 15, 18]])
    layer = make_layer('type: "Python" python_param { module: "layers.text_proposal_layer" '
                       'layer: "ProposalLayer" param_str: "\'feat_stride\': 16" }')
    scores = np.zeros((1, 20, 1, 2))
    scores[0, 10:, 0, 1] = 0.5
    deltas = np.zeros((1, 20, 1, 2))
    deltas[0, 2, 0, 1] = 0.1                           # cell x = 1, anchor 1 (16 high): dy
    deltas[0, 3, 0, 1] = np.log(2.0)                   # dh: twice as high
    boxes, sc = run_layer(layer, make_blobs([scores, deltas, [[40, 60, 1]]]), make_blobs(2))
    assert boxes.shape == (20, 4) and sc.shape == (20, 1)
    np.testing.assert_allclose(sc[10:, 0], 0.5)
    # anchor (16, 0, 31, 15): cy 7.5, h 16 -> h' 32, y1 = 1.6 + 7.5 - 16 = -6.9 -> clipped 0, y2 = 25.1
    np.testing.assert_allclose(boxes[11], [16, 0, 31, 25.1], rtol=1e-6)
    # anchor (0, 2, 15, 12) without a delta: cy 7, h 11 -> y1 = 7 - 5.5, y2 = y1 + 11
    np.testing.assert_allclose(boxes[0], [0, 1.5, 15, 12.5])
