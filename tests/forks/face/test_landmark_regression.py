import numpy as np
import pytest

from caffepy import common
from caffepy.data.image import encode_image
from caffepy.errors import CaffeError
from caffepy.forks.face.landmark_regression import parse_line, point_weights
from caffepy.proto import caffe_pb2
from caffepy.proto.io import parse_text
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from caffepy.zoo import replace_data_layers


def _write(tmp_path, lines, h=8, w=8):
    img = np.zeros((h, w, 3), np.uint8)
    img[:, :, 0], img[:, :, 1], img[:, :, 2] = 40, 80, 120
    (tmp_path / "a.png").write_bytes(encode_image(img, "png"))
    (tmp_path / "list.txt").write_text("".join(l + "\n" for l in lines))


def _text(tmp_path, dim, extra="", tp=""):
    return ('type: "ImageFloatData" transform_param { scale: 0.5 mean_value: 40 mean_value: 80 '
            'mean_value: 120 %s } image_data_param { source: "%s" root_folder: "%s/" '
            'batch_size: 2 } image_float_data_param { label_dim: %d %s }'
            % (tp, tmp_path / "list.txt", tmp_path, dim, extra))


def test_parse_line_follows_the_forks_space_rule():
    assert parse_line("img.png 0.5 0.25 1e-1") == ("img.png", [0.5, 0.25, 0.1])
    assert parse_line("img.png 1  2") == ("img.png", [1.0, 2.0, 2.0])   # a doubled space
    assert parse_line("img.png 3 ")[1] == [3.0, 0.0]                      # a trailing one


def test_image_float_data_reads_labels_and_weights(tmp_path):
    _write(tmp_path, ["a.png 0.1 0.2 0.3 0.4 2.5", "a.png 0.5 0.6 0.7 0.8 0.5"])
    layer = make_layer(_text(tmp_path, 4, "hard_sample: true"), phase=caffe_pb2.TEST)
    data, label, weight = run_layer(layer, [], make_blobs(3))
    assert data.shape == (2, 3, 8, 8)
    np.testing.assert_allclose(data, 0, atol=1e-6)
    np.testing.assert_allclose(label, [[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]], rtol=1e-6)
    np.testing.assert_allclose(weight, [2.5, 0.5])


def test_pad_ratio_zooms_out_and_moves_the_landmarks(tmp_path):
    # two points (x 0.5, 0.25; y 0.5, 0.75) as fractions of the 8-pixel side
    _write(tmp_path, ["a.png 0.5 0.25 0.5 0.75"])
    text = _text(tmp_path, 4, tp="pad_ratio: 0.5")
    seen = set()
    for seed in range(12):
        common.set_random_seed(seed)
        data, label = run_layer(make_layer(text, phase=caffe_pb2.TRAIN), [], make_blobs(2))
        for b in range(2):
            lab = label[b]
            if np.allclose(lab, [0.5, 0.25, 0.5, 0.75]):
                seen.add("same")
                continue
            seen.add("padded")
            # some zero border: pixels 0 - mean, times 0.5
            assert (np.isclose(data[b, 0], -20)).any() or (np.isclose(data[b, 2], -60)).any()
            side = 2 / (lab[0] - lab[1])            # x: (8 v + left) / (8 + 2p)
            assert round(side) in (10, 12, 14, 16) and side == pytest.approx(round(side))
            left, top = lab[0] * side - 4, lab[2] * side - 4
            for off in (left, top):
                assert off == pytest.approx(round(off), abs=1e-4) and 0 <= round(off) <= round(side) - 8
            assert lab[3] * side - 6 == pytest.approx(top, abs=1e-4)
    assert seen == {"same", "padded"}


def test_image_float_data_refusals_and_zoo_shapes(tmp_path):
    _write(tmp_path, ["a.png 1 2"])
    with pytest.raises(CaffeError, match="label_dim wants 3"):
        run_layer(make_layer(_text(tmp_path, 3)), [], make_blobs(2))
    with pytest.raises(CaffeError, match="third top"):
        run_layer(make_layer(_text(tmp_path, 2)), [], make_blobs(3))
    net = parse_text(
        'layer { name: "d" type: "ImageFloatData" top: "data" top: "landmark" transform_param { '
        'pad_ratio: 0.15 } image_data_param { source: "x" batch_size: 64 new_height: 64 '
        'new_width: 64 } image_float_data_param { label_dim: 136 with_heatmap: true } }',
        caffe_pb2.NetParameter(), strict=True)
    shapes = [tuple(s.dim) for s in replace_data_layers(net).layer[0].input_param.shape]
    assert shapes == [(64, 4, 64, 64), (64, 136)]


def _loss_text(extra=""):
    return ('type: "WeightEuclideanLoss" weight_euclidean_loss_param { contour_weight: 2 '
            'main_weight: 1 coarse_weight: 3 %s }' % extra)


def test_weight_euclidean_loss_weights_and_normalisation():
    p = caffe_pb2.WeightEuclideanLossParameter(contour_weight=2, main_weight=1, coarse_weight=3)
    w = point_weights(p)
    assert w[0] == 2 and w[16] == 2 and w[17] == 3 and w[18] == 1 and w[68 + 54] == 3
    rng = np.random.default_rng(5)
    x, t = rng.uniform(0, 1, (2, 136)), rng.uniform(0, 1, (2, 136))
    (loss,) = run_layer(make_layer(_loss_text("normalized: 1")), make_blobs([x, t]),
                        make_blobs(1))
    dis = np.hypot(t[:, 36] - t[:, 42], t[:, 68 + 39] - t[:, 68 + 45])
    want = (w * (x - t) ** 2 / dis[:, None]).sum() / 2 / 2
    assert float(loss) == pytest.approx(want, rel=1e-6)
    (loss,) = run_layer(make_layer(_loss_text("normalized: 1 normalized_type: 1")),
                        make_blobs([x, t]), make_blobs(1))
    box = np.hypot(t[:, :68].max(1) - t[:, :68].min(1), t[:, 68:].max(1) - t[:, 68:].min(1))
    assert float(loss) == pytest.approx((w * (x - t) ** 2 / box[:, None]).sum() / 4, rel=1e-6)


def test_weight_euclidean_loss_gradient():
    rng = np.random.default_rng(6)
    x, t = rng.uniform(0, 1, (2, 136, 1, 1)), rng.uniform(0, 1, (2, 136, 1, 1))
    check_layer_gradient(make_layer(_loss_text()), make_blobs([x, t]), make_blobs(1),
                         check_bottom=[0, 1])
    # normalised: the scale follows the target and the fork does not differentiate it
    check_layer_gradient(make_layer(_loss_text("normalized: 1")), make_blobs([x, t]),
                         make_blobs(1), check_bottom=[0])
