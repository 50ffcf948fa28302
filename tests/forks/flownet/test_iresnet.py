import numpy as np
import pytest

import caffepy
from caffepy.errors import NetError
from caffepy.forks.flownet.iresnet import crop_offset
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _crop(h, w, phase):
    return make_layer('type: "RandomCrop" random_crop_param { target_height: %d '
                      'target_width: %d }' % (h, w), phase=phase)


def test_offsets_follow_the_forks_rules():
    rng = np.random.default_rng(0)
    draws = {crop_offset(10, 6, True, rng) for _ in range(400)}
    assert draws == {0, 1, 2, 3}                    # rand() % (b - t): never b - t itself
    assert crop_offset(6, 6, True, rng) == 0
    assert crop_offset(3, 6, True, rng) == -1       # C's division truncates towards zero
    assert crop_offset(10, 6, False, rng) == 2 and crop_offset(3, 6, False, rng) == -1


def test_test_phase_is_the_centred_crop_and_pads_with_128_and_nan():
    x = np.arange(2 * 7 * 3 * 5, dtype=float).reshape(2, 7, 3, 5)
    (y,) = run_layer(_crop(5, 3, caffe_pb2.TEST), make_blobs([x]), make_blobs(1))
    assert y.shape == (2, 7, 5, 3)
    # oy = (3 - 5) / 2 = -1 (one padded row above, one below), ox = (5 - 3) / 2 = 1
    np.testing.assert_array_equal(y[:, :, 1:4], x[:, :, :, 1:4])
    assert (y[:, :6, 0] == 128).all() and (y[:, :6, 4] == 128).all()
    assert np.isnan(y[:, 6, 0]).all() and np.isnan(y[:, 6, 4]).all()


def test_train_crops_one_random_window_for_the_batch():
    caffepy.set_random_seed(3)
    x = np.random.default_rng(1).standard_normal((3, 7, 9, 11))
    seen = set()
    layer = _crop(4, 5, caffe_pb2.TRAIN)
    bottom, top = make_blobs([x]), make_blobs(1)
    for _ in range(30):
        (y,) = run_layer(layer, bottom, top)
        hits = [(oy, ox) for oy in range(5) for ox in range(6)
                if np.array_equal(y, x[:, :, oy:oy + 4, ox:ox + 5])]
        assert len(hits) == 1
        seen.add(hits[0])
    assert len(seen) > 5


def test_crop_refuses_other_channel_counts():
    with pytest.raises(NetError, match="N x 7 x H x W"):
        run_layer(_crop(2, 2, caffe_pb2.TEST), make_blobs([np.zeros((1, 3, 4, 4))]),
                  make_blobs(1))


def test_data_switch_copies_one_bottom_drawn_uniformly():
    caffepy.set_random_seed(5)
    xs = [np.full((2, 3), float(i)) for i in range(3)]
    layer = make_layer('type: "DataSwitch"', phase=caffe_pb2.TRAIN)
    bottom, top = make_blobs(xs), make_blobs(1)
    counts = np.zeros(3)
    for _ in range(300):
        (y,) = run_layer(layer, bottom, top)
        assert (y == y.flat[0]).all()
        counts[int(y.flat[0])] += 1
    assert counts.min() > 60
    with pytest.raises(NetError, match="bottom 1 has shape"):
        run_layer(make_layer('type: "DataSwitch"'),
                  make_blobs([np.zeros((2, 3)), np.zeros((3, 2))]), make_blobs(1))


ROB_FRONT = """name: "rob"
layer { name: "data" type: "CustomData" top: "img0" top: "img1" top: "disp_gt"
  data_param { source: "absent_lmdb" batch_size: 2 backend: LMDB slice_point: 3 slice_point: 6
    encoding: UINT8 encoding: UINT8 encoding: UINT16FLOW } }
layer { name: "cat" type: "Concat" bottom: "img0" bottom: "img1" bottom: "disp_gt" top: "all" }
layer { name: "crop" type: "RandomCrop" bottom: "all" top: "crop"
  random_crop_param { target_height: 64 target_width: 96 } }
"""


def test_a_dispnet_disparity_slice_is_one_channel_so_the_stereo_front_builds(tmp_path, capsys):
    from caffepy.cli import main
    path = tmp_path / "train.prototxt"
    path.write_text(ROB_FRONT)
    assert main(["summary", "--strict", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2x7x64x96" in out
    path.write_text(ROB_FRONT.replace('"disp_gt"', '"flow_gt"'))
    assert main(["summary", "--strict", str(path)]) == 1     # a flow slice is 2 channels: 8
    assert "N x 7 x H x W" in capsys.readouterr().err


def _fork_rows_ref(f1, f2, pad, d, s2):
    """single_direction -1, kernel 1, stride_1 1, read as the fork's kernel reads its row-major
    padded (H, W + 2 pad, C) buffer: x2 < 0 is the previous row's right end (before the first
    row: taken as 0)."""
    p1 = np.pad(f1, [(0, 0), (0, 0), (0, 0), (pad, pad)]).transpose(0, 2, 3, 1)
    p2 = np.pad(f2, [(0, 0), (0, 0), (0, 0), (pad, pad)]).transpose(0, 2, 3, 1)
    N, H, PW, C = p1.shape
    r = d // s2
    offs = range(-(r + 1), 0)
    ow = PW - 2 * d
    flat2 = p2.reshape(N, H * PW, C)
    y = np.zeros((N, len(offs), H, ow))
    for n in range(N):
        for i in range(H):
            for j in range(ow):
                x1 = j + d
                for t, o in enumerate(offs):
                    at = i * PW + x1 + o * s2
                    b = flat2[n, at] if at >= 0 else np.zeros(C)
                    y[n, t, i, j] = (p1[n, i, x1] * b).sum() / C
    return y


def test_correlation1d_left_reads_the_row_aboves_padding():
    """iResNet's ``single_direction: -1`` correlation with max_displacement = pad: its leftmost
    output reads one pixel before the padded row, the row above's zero padding."""
    rng = np.random.default_rng(2)
    f1, f2 = rng.standard_normal((2, 3, 3, 7)), rng.standard_normal((2, 3, 3, 7))
    text = ('type: "Correlation1D" correlation_param { pad: %d kernel_size: 1 max_displacement: 3 '
            'single_direction: -1 }')
    (y,) = run_layer(make_layer(text % 3), make_blobs([f1, f2]), make_blobs(1))
    assert y.shape == (2, 4, 3, 7)
    np.testing.assert_allclose(y, _fork_rows_ref(f1, f2, 3, 3, 1), rtol=1e-12)
    check_layer_gradient(make_layer(text % 3), make_blobs([f1, f2]), make_blobs(1))
    with pytest.raises(NetError, match="reads the row above"):
        make_layer(text % 0).setup(make_blobs([f1, f2]), make_blobs(1))
