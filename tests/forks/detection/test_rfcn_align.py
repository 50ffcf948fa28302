"""PSROIAlign and DeformablePSROIPooling (forks/detection/rfcn_align.py)."""
import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

ALIGN = ('type: "PSROIAlign" psroi_align_param { spatial_scale: 0.5 output_dim: 2 group_size: 2 '
         'sample_num: 2 }')


def _bil(img, y, x):
    h0, w0 = int(y), int(x)
    ly, lx = y - h0, x - w0
    return ((1 - ly) * (1 - lx) * img[h0, w0] + (1 - ly) * lx * img[h0, w0 + 1]
            + ly * (1 - lx) * img[h0 + 1, w0] + ly * lx * img[h0 + 1, w0 + 1])


def test_psroi_align_averages_its_samples():
    x = np.random.default_rng(0).standard_normal((1, 8, 9, 9))
    rois = np.array([[0, 2.0, 4.0, 9.0, 13.0]])
    (y,) = run_layer(make_layer(ALIGN), make_blobs([x, rois]), make_blobs(1))
    # map: x 1 .. 5, y 2 .. 7; bins 2 x 2.5, sample step 2/3 x 2.5/3
    for c in range(2):
        for i in range(2):
            for j in range(2):
                ch = (c * 2 + i) * 2 + j
                ys = [2 + i * 2.5 + a * 2.5 / 3 for a in (1, 2)]
                xs = [1 + j * 2.0 + b * 2.0 / 3 for b in (1, 2)]
                ref = np.mean([_bil(x[0, ch], yy, xx) for yy in ys for xx in xs])
                assert y[0, c, i, j] == pytest.approx(ref)
    # the kernel's backward window [floor(1), ceil(3)) leaves out column 3, the high neighbour
    # of the samples at x = 2.33 of bin (0, 0)
    layer, bottom, top = make_layer(ALIGN), make_blobs([x, rois]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 0
    top[0].diff[0, 0, 0, 0] = 1
    layer.backward(top, [True, False], bottom)
    assert bottom[0].diff[0, 0, 3, 2] > 0 and bottom[0].diff[0, 0, 3, 3] == 0


def test_psroi_align_gradient_where_the_window_holds_every_neighbour():
    x = np.random.default_rng(3).standard_normal((1, 8, 10, 10))
    rois = np.array([[0, 0.0, 0.0, 15.0, 17.0]])     # map 0 .. 8 x 0 .. 9: bins 4 x 4.5
    text = ALIGN.replace("sample_num: 2", "sample_num: 1")
    check_layer_gradient(make_layer(text), make_blobs([x, rois]), make_blobs(1),
                         check_bottom=[0])


DEF = ('type: "DeformablePSROIPooling" deformable_psroi_pooling_param { spatial_scale: 0.5 '
       'output_dim: 2 group_size: 2 part_size: 2 sample_per_part: 2 trans_std: 0.1 %s }')


def test_deformable_psroi_pooling_without_offsets():
    x = np.random.default_rng(1).standard_normal((1, 8, 9, 9))
    rois = np.array([[0, 2.0, 4.0, 9.0, 13.0]])
    (y,) = run_layer(make_layer(DEF % "no_trans: true"), make_blobs([x, rois]), make_blobs(1))
    # start 2 * 0.5 - 0.5 = 0.5, 1.5; size 4 x 5; bins 2 x 2.5, sub-bins 1 x 1.25
    ch = (1 * 2 + 1) * 2 + 0
    pts = [(1.5 + 2.5 + u * 1.25, 0.5 + v * 1.0) for u in (0, 1) for v in (0, 1)]
    assert y[0, 1, 1, 0] == pytest.approx(np.mean([_bil(x[0, ch], a, b) for a, b in pts]))
    check_layer_gradient(make_layer(DEF % "no_trans: true"), make_blobs([x, rois]),
                         make_blobs(1), check_bottom=[0])


def test_deformable_psroi_pooling_offset_gradients():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 8, 9, 9))
    rois = np.array([[0, 2.0, 4.0, 9.0, 13.0], [0, 0.0, 0.0, 7.0, 5.0]])
    trans = rng.uniform(-0.3, 0.3, (2, 2, 2, 2))              # one class
    layer = make_layer(DEF % "")
    (y,) = run_layer(layer, make_blobs([x, rois, trans]), make_blobs(1))
    assert y.shape == (2, 2, 2, 2)
    check_layer_gradient(make_layer(DEF % ""), make_blobs([x, rois, trans]), make_blobs(1),
                         check_bottom=[0, 2])
    with pytest.raises(CaffeError, match="3 bottoms"):
        run_layer(make_layer(DEF % ""), make_blobs([x, rois]), make_blobs(1))
