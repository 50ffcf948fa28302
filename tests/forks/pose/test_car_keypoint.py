import numpy as np
import pytest

from caffepy.data.image import encode_image
from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.proto.io import parse_text
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from caffepy.zoo import replace_data_layers


def _write_image(path, h, w):
    img = np.zeros((h, w, 3), np.uint8)
    img[:, :, 0] = 10
    img[:, :, 1] = 20
    img[:, :, 2] = 30
    img[:, w // 2:, 2] = 90          # the right half redder
    path.write_bytes(encode_image(img, "png"))


def _text(tmp_path, extra=""):
    return ('type: "HeatmapData" heatmap_data_param { source: "%s" root_folder: "%s/" '
            'batch_size: 2 new_height: 16 new_width: 16 label_size: 8 coordinate_num: 3 '
            'mean_value: 10 mean_value: 20 mean_value: 30 scale: 0.5 %s }'
            % (tmp_path / "list.txt", tmp_path, extra))


def test_heatmap_data_reads_points_and_draws_maps(tmp_path):
    _write_image(tmp_path / "a.png", 32, 32)
    # points in the 32 x 32 original: (8, 4), missing (0, 0), (30, 16)
    (tmp_path / "list.txt").write_text("a.png 8 4 0 0 30 16\n")
    data, heat = run_layer(make_layer(_text(tmp_path)), [], make_blobs(2))
    assert data.shape == (2, 3, 16, 16) and heat.shape == (2, 3, 8, 8)
    np.testing.assert_allclose(data[0, :2], 0, atol=1e-6)          # (10 - 10) * 0.5, (20 - 20)
    np.testing.assert_allclose(data[0, 2, :, :7], 0, atol=1e-6)
    np.testing.assert_allclose(data[0, 2, :, 9:], 30, atol=1e-6)    # (90 - 30) * 0.5
    # resize 0.5: (4, 2) and (15, 8) in the 16 x 16 image; maps scale 0.5: (2, 1) and (8 -> 8, 4)
    i, j = np.mgrid[0:8, 0:8]
    g = np.exp(-0.5 * ((i - 1) ** 2 + (j - 2) ** 2) / 4.0)
    np.testing.assert_allclose(heat[0, 0], np.where(g > 1e-4, g, 0), rtol=1e-5)
    assert (heat[0, 1] == -1).all()
    assert np.unravel_index(heat[0, 2].argmax(), (8, 8)) == (4, 7)  # x 7.5 rounds to 8: edge
    np.testing.assert_allclose(heat[1], heat[0])


def test_heatmap_data_crop_mirror_and_pairs(tmp_path):
    _write_image(tmp_path / "a.png", 16, 16)
    (tmp_path / "list.txt").write_text("a.png 2 3 13 3 8 8\n")
    text = _text(tmp_path, 'crop_size: 8 mirror: true mirror_pairs: "0,1"')
    seen = set()
    for seed in range(8):
        from caffepy import common
        common.set_random_seed(seed)
        data, heat = run_layer(make_layer(text, phase=caffe_pb2.TEST), [], make_blobs(2))
        assert data.shape == (2, 3, 8, 8) and heat.shape == (2, 3, 8, 8)
        for b in range(2):
            # TEST crops the centre (offset 4): points (2, 3) and (13, 3) leave it; (8, 8) -> (4, 4)
            assert (heat[b, 0] == -1).all() and (heat[b, 1] == -1).all()
            peak = np.unravel_index(heat[b, 2].argmax(), (8, 8))
            mirrored = data[b, 2, 0, 0] > data[b, 2, 0, 7]
            assert peak == ((4, 3) if mirrored else (4, 4))
            seen.add(bool(mirrored))
    assert seen == {True, False}


def test_heatmap_data_refusals(tmp_path):
    _write_image(tmp_path / "a.png", 8, 8)
    (tmp_path / "list.txt").write_text("a.png 1 1\n")
    with pytest.raises(CaffeError, match="rotation"):
        run_layer(make_layer(_text(tmp_path, "rotation: true")), [], make_blobs(2))
    with pytest.raises(CaffeError, match="coordinate_num points"):
        run_layer(make_layer(_text(tmp_path)), [], make_blobs(2))
    with pytest.raises(CaffeError, match="outsize is not read by HeatmapData"):
        run_layer(make_layer(_text(tmp_path, "outsize: 4")), [], make_blobs(2))
    rmpe = ('type: "DataHeatmap" heatmap_data_param { source: "x" batchsize: 1 outsize: 4 '
            'label_width: 2 label_height: 2 coordinate_num: 3 }')
    with pytest.raises(CaffeError, match="coordinate_num is not read by DataHeatmap"):
        run_layer(make_layer(rmpe), [], make_blobs(2))


def test_heatmap_data_top_shapes_without_data():
    net = parse_text(
        'layer { name: "d" type: "HeatmapData" top: "data" top: "label" heatmap_data_param { '
        'source: "absent.csv" batch_size: 8 crop_size: 0 new_height: 256 new_width: 192 '
        'label_size: 64 coordinate_num: 12 mirror_pairs: "0,1" is_color: false } }',
        caffe_pb2.NetParameter())
    inp = replace_data_layers(net).layer[0]
    assert inp.type == "Input"
    assert [tuple(s.dim) for s in inp.input_param.shape] == [(8, 1, 256, 192), (8, 12, 64, 64)]


def test_keypoint_l2_loss_masks_missing_points_and_gradient():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4, 5))
    t = rng.uniform(0.1, 1.0, (2, 3, 4, 5))
    t[1, 2] = -1                       # a missing point's map
    (loss,) = run_layer(make_layer('type: "KeypointL2Loss"'), make_blobs([x, t]), make_blobs(1))
    d = x - t
    d[1, 2] = 0
    assert float(loss) == pytest.approx((d ** 2).sum() / 2 / 2)
    check_layer_gradient(make_layer('type: "KeypointL2Loss"'), make_blobs([x, t]),
                         make_blobs(1), check_bottom=[0, 1])


def test_keypoint_acc_counts_visible_points_within_metric():
    x = np.zeros((1, 3, 10, 10))
    t = np.zeros((1, 3, 10, 10))
    x[0, 0, 2, 3], t[0, 0, 2, 3] = 1, 1      # exact
    x[0, 1, 5, 5], t[0, 1, 2, 2] = 1, 1      # 0.3 * sqrt(2) away
    t[0, 2] = -1                              # missing
    text = 'type: "KeypointAcc" keypoint_acc_param { metric: 0.2 }'
    acc, per = run_layer(make_layer(text), make_blobs([x, t]), make_blobs(2))
    assert float(acc) == pytest.approx(0.5)
    np.testing.assert_allclose(per, [1, 0, 0])
