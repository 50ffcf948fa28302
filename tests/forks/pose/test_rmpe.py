import numpy as np
import pytest

from caffepy.data.image import encode_image
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_euclidean_loss_heatmap_values_and_gradient():
    rng = np.random.default_rng(11)
    x, t = rng.standard_normal((2, 3, 4, 4)), rng.standard_normal((2, 3, 4, 4))
    img = np.zeros((2, 3, 8, 8))
    layer = make_layer('type: "EuclideanLossHeatmap"')
    (loss,) = run_layer(layer, make_blobs([x, t, img]), make_blobs(1))
    assert float(loss) == pytest.approx(((x - t) ** 2).mean())
    check_layer_gradient(make_layer('type: "EuclideanLossHeatmap"'), make_blobs([x, t, img]),
                         make_blobs(1), check_bottom=[0])


def _write_image(path, h, w):
    img = np.zeros((h, w, 3), np.uint8)
    img[:, :, 2] = 200          # red in BGR
    img[:h // 2, :, 0] = 100    # blue in the top half
    path.write_bytes(encode_image(img, "png"))


def test_data_heatmap_bbox_crop_and_heat_maps(tmp_path):
    _write_image(tmp_path / "a.png", 20, 40)
    # joints (10, 5) and (-1, -1) (absent); bbox x 0..40, y 0..20 -> a 40 x 40 square,
    # 10 rows of zero padding above and below
    (tmp_path / "list.txt").write_text("a.png 10,5,-1,-1 0,0,40,20 0\n")
    text = ('type: "DataHeatmap" heatmap_data_param { source: "%s" root_img_dir: "%s/" '
            'batchsize: 2 outsize: 8 label_width: 4 label_height: 4 bbox_or_centerscale: "bbox" }'
            % (tmp_path / "list.txt", tmp_path))
    layer = make_layer(text)
    data, heat = run_layer(layer, [], make_blobs(2))
    assert data.shape == (2, 3, 8, 8) and heat.shape == (2, 2, 4, 4)
    np.testing.assert_allclose(data[0, 0, 2:6], 200 / 255.0, rtol=1e-5)   # R channel first
    assert data[0, 0, 0].max() == 0 and data[0, 0, 7].max() == 0           # padding
    np.testing.assert_allclose(data[0, 2, 2:4], 100 / 255.0, rtol=1e-5)
    # joint 0 at (10, 5 + 10) in the 40-pixel square -> (1, 1.5) on the 4 x 4 map
    i, j = np.mgrid[0:4, 0:4]
    np.testing.assert_allclose(heat[0, 0], np.exp(-0.5 * ((i - 1.5) ** 2 + (j - 1.0) ** 2)),
                               rtol=1e-5)
    assert heat[0, 1].max() == 0
    np.testing.assert_allclose(heat[1], heat[0])


def test_data_heatmap_centerscale_and_labelinds(tmp_path):
    _write_image(tmp_path / "b.png", 30, 30)
    # centre (15, 15), scale 0.1 -> a 20-pixel square from 5 to 25; keep x, y of joint 2
    (tmp_path / "list.txt").write_text("b.png 1,1,15,10 15,15,0.1 0\n")
    text = ('type: "DataHeatmap" heatmap_data_param { source: "%s" root_img_dir: "%s/" '
            'batchsize: 1 outsize: 10 label_width: 10 label_height: 10 labelinds: "3,4" }'
            % (tmp_path / "list.txt", tmp_path))
    data, heat = run_layer(make_layer(text), [], make_blobs(2))
    assert heat.shape == (1, 1, 10, 10)
    assert np.unravel_index(heat[0, 0].argmax(), (10, 10)) == (2, 5)    # ((10-5)/2, (15-5)/2)
