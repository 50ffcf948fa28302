"""TextBoxes++'s PriorBox denser_prior_boxes (forks/ssd/textboxes.py)."""
import numpy as np

from caffepy.forks.ssd.textboxes import DenserPriorBoxLayer
from caffepy.testing import make_blobs, make_layer, run_layer


def test_denser_prior_boxes_by_hand():
    layer = make_layer('type: "PriorBox" prior_box_param { min_size: 4 aspect_ratio: 2 flip: false '
                       'denser_prior_boxes: true variance: 0.1 }')
    assert isinstance(layer, DenserPriorBoxLayer)
    feat, img = np.zeros((1, 1, 1, 2)), np.zeros((1, 3, 8, 16))      # step 8 x 8
    out, = run_layer(layer, make_blobs([feat, img]), make_blobs(1))
    assert out.shape == (1, 2, 1 * 2 * 4 * 4)                        # 2 ratios x 2 offsets
    boxes = out[0, 0].reshape(2, 4, 4)[0]                            # cell (0, 0): centre (4, 4)
    s = np.sqrt(2.0)
    want = [[4 - 2, 4 - 2, 4 + 2, 4 + 2], [4 - 2, 8 - 2, 4 + 2, 8 + 2],          # square, shifted
            [4 - 2 * s, 4 - 2 / s, 4 + 2 * s, 4 + 2 / s], [4 - 2 * s, 8 - 2 / s, 4 + 2 * s, 8 + 2 / s]]
    np.testing.assert_allclose(boxes, np.array(want) / [16, 8, 16, 8])
    np.testing.assert_allclose(out[0, 1], 0.1)
