import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

TEXT = ('type: "MultiROIPooling" multi_roi_pooling_param { pooled_h: 3 pooled_w: 4 '
        'spatial_scale: 0.5 top_num: 3 }')


def _crop_ref(x, px, py, ph, pw, scale):
    c, h, w = x.shape
    out = np.zeros((c, ph, pw))
    def rnd(v):                   # CUDA's round: halves away from zero (-1.5 -> -2)
        return int(np.sign(v) * np.floor(abs(v) + 0.5))
    sy, sx = rnd(py * scale - ph // 2), rnd(px * scale - pw // 2)
    for a in range(ph):
        for b in range(pw):
            yy, xx = sy + a, sx + b
            if 0 <= yy < h and 0 <= xx < w:
                out[:, a, b] = x[:, yy, xx]
    return out


def test_multi_roi_pooling_crops_around_each_landmark():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 6, 7))
    # landmarks (x, y) in image pixels: inside, near the top-left corner, past the bottom-right
    pts = np.array([[[6.0, 6.0], [1.0, 0.0], [13.0, 11.0]],
                    [[4.0, 8.0], [12.0, 2.0], [0.0, 12.0]]])
    tops = run_layer(make_layer(TEXT), make_blobs([x, pts]), make_blobs(3))
    for t in range(3):
        assert tops[t].shape == (2, 2, 3, 4)
        for n in range(2):
            np.testing.assert_array_equal(
                tops[t][n], _crop_ref(x[n], pts[n, t, 0], pts[n, t, 1], 3, 4, 0.5))
    check_layer_gradient(make_layer(TEXT), make_blobs([x, pts]), make_blobs(3), check_bottom=[0])
