"""C3D's and TSN's VideoData readers on tiny generated frame folders."""
import numpy as np
import pytest

import caffepy
from caffepy.data.image import encode_image
from caffepy.errors import CaffeError
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import make_blobs, make_layer

RNG = np.random.default_rng(7)


def write_png(path, img):
    path.write_bytes(encode_image(img, "png"))        # lossless: exact values come back


def c3d_folder(root, name, frames, h=6, w=8, start=1):
    """``frames`` BGR frames ``%06d.png``-like named ``%06d.jpg`` (PNG bytes: Pillow reads by
    content), returned as (L, H, W, 3) uint8."""
    d = root / name
    d.mkdir()
    imgs = RNG.integers(0, 256, (frames, h, w, 3), dtype=np.uint8)
    for i, img in enumerate(imgs):
        write_png(d / ("%06d.jpg" % (start + i)), img)
    return imgs


def run_data_layer(text, phase=caffe_pb2.TEST, tops=2):
    layer = make_layer(text, dtype=np.float64, phase=phase)
    top = make_blobs(tops)
    layer.setup([], top)
    try:
        layer.forward([], top)
    finally:
        layer.close()
    return [t.data.copy() for t in top]


def test_c3d_v11_frames_crop_mean_and_labels(tmp_path):
    a = c3d_folder(tmp_path, "clipA", 6)
    b = c3d_folder(tmp_path, "clipB", 6)
    (tmp_path / "list.txt").write_text("clipA 1 3\nclipB 3 5\n")
    text = ('type: "VideoData" video_data_param { source: "%s" root_folder: "%s/" batch_size: 2 '
            'new_length: 2 sampling_rate: 2 use_image: true } transform_param { crop_size: 4 '
            'mean_value: 10 mean_value: 20 mean_value: 30 scale: 0.5 }'
            % (tmp_path / "list.txt", tmp_path))
    data, label = run_data_layer(text)
    assert data.shape == (2, 3, 2, 4, 4) and label.shape == (2,)
    np.testing.assert_array_equal(label, [3, 5])
    mean = np.array([10, 20, 30.0]).reshape(3, 1, 1, 1)
    # clip A: frames 1 and 3 (list start 1, every 2nd), i.e. a[0], a[2]; centre crop (1, 2)
    want_a = (a[[0, 2]].transpose(3, 0, 1, 2)[:, :, 1:5, 2:6] - mean) * 0.5
    want_b = (b[[2, 4]].transpose(3, 0, 1, 2)[:, :, 1:5, 2:6] - mean) * 0.5
    np.testing.assert_allclose(data[0], want_a)
    np.testing.assert_allclose(data[1], want_b)


def test_c3d_v10_file_reads_frames(tmp_path):
    a = c3d_folder(tmp_path, "v", 4, h=5, w=5, start=0)
    (tmp_path / "l.txt").write_text("%s 0 7\n" % (tmp_path / "v"))
    mean = caffe_pb2.BlobProto()
    mean.shape.dim.extend([1, 3, 4, 5, 5])
    mean.data.extend(np.full(3 * 4 * 25, 2.0))
    (tmp_path / "mean.binaryproto").write_bytes(mean.SerializeToString())
    net_text = """
name: "c3d-v1.0"
layers { name: "data" type: VIDEO_DATA top: "data" top: "label"
  image_data_param { source: "%s" use_image: true batch_size: 1 new_length: 4 crop_size: 3
    mean_file: "%s" } }
layers { name: "s" type: SILENCE bottom: "label" }
""" % (tmp_path / "l.txt", tmp_path / "mean.binaryproto")
    net = Net(proto_io.read_net(net_text), caffe_pb2.TEST)
    net.forward()
    assert net.blobs["label"].shape == (1, 1, 1, 1, 1) and net.blobs["label"].data.flat[0] == 7
    want = a.transpose(3, 0, 1, 2)[:, :, 1:4, 1:4] - 2.0
    np.testing.assert_allclose(net.blobs["data"].data[0], want)
    for layer in net.layers:
        getattr(layer, "close", lambda: None)()


def test_tsn_rgb_and_flow_segments(tmp_path):
    v = tmp_path / "vid"
    v.mkdir()
    frames = RNG.integers(0, 256, (9, 4, 6, 3), dtype=np.uint8)
    fx = RNG.integers(0, 256, (9, 4, 6, 1), dtype=np.uint8)
    fy = RNG.integers(0, 256, (9, 4, 6, 1), dtype=np.uint8)
    for i in range(9):
        write_png(v / ("image_%04d.jpg" % (i + 1)), frames[i])
        write_png(v / ("flow_x_%04d.jpg" % (i + 1)), fx[i])
        write_png(v / ("flow_y_%04d.jpg" % (i + 1)), fy[i])
    (tmp_path / "list.txt").write_text("%s 9 2\n" % v)
    rgb = ('type: "VideoData" video_data_param { source: "%s" batch_size: 1 num_segments: 3 '
           'new_length: 1 modality: RGB } transform_param { crop_size: 4 mean_value: 104 '
           'mean_value: 117 mean_value: 123 }' % (tmp_path / "list.txt"))
    data, label = run_data_layer(rgb)
    assert data.shape == (1, 9, 4, 4) and label.shape == (1, 1, 1, 1) and label.flat[0] == 2
    # 3 segments of 3 frames, TEST offset (3 - 1 + 1) // 2 = 1 in each: frames 2, 5, 8 (1-based)
    want = np.concatenate([frames[k].transpose(2, 0, 1) for k in (1, 4, 7)])[:, :, 1:5]
    np.testing.assert_allclose(data[0], want - np.tile([104, 117, 123.0], 3).reshape(9, 1, 1))
    flow = ('type: "VideoData" video_data_param { source: "%s" batch_size: 1 num_segments: 1 '
            'new_length: 2 modality: FLOW } transform_param { crop_size: 4 }'
            % (tmp_path / "list.txt"))
    (d,) = run_data_layer(flow, tops=1)
    # one segment of 9 frames, offset (9 - 2 + 1) // 2 = 4: frames 5, 6 as x, y, x, y planes
    want = np.stack([fx[4, :, 1:5, 0], fy[4, :, 1:5, 0], fx[5, :, 1:5, 0], fy[5, :, 1:5, 0]])
    np.testing.assert_allclose(d[0], want)
    # TRAIN: random offsets within each segment, multi-scale fixed crops resized to crop_size
    caffepy.set_random_seed(3)
    train = ('type: "VideoData" video_data_param { source: "%s" batch_size: 1 num_segments: 3 '
             'new_length: 1 modality: FLOW } transform_param { crop_size: 3 mirror: true '
             'is_flow: true fix_crop: true multi_scale: true scale_ratios: 1 scale_ratios: 0.75 '
             'max_distort: 1 }' % (tmp_path / "list.txt"))
    (t,) = run_data_layer(train, phase=caffe_pb2.TRAIN, tops=1)
    assert t.shape == (1, 6, 3, 3) and t.min() >= 0 and t.max() <= 255


def test_video_data_errors(tmp_path):
    (tmp_path / "list.txt").write_text("missing 1 0\n")
    with pytest.raises(CaffeError, match="cannot open video missing|needs OpenCV"):
        make_layer('type: "VideoData" video_data_param { source: "%s" new_length: 2 }'
                   % (tmp_path / "list.txt")).setup([], make_blobs(2))
    with pytest.raises(CaffeError, match="missing/000001.jpg"):
        make_layer('type: "VideoData" video_data_param { source: "%s" new_length: 2 '
                   'use_image: true }' % (tmp_path / "list.txt")).setup([], make_blobs(2))
    with pytest.raises(CaffeError, match="webcam"):
        make_layer('type: "VideoData" video_data_param { video_type: WEBCAM }').setup(
            [], make_blobs(1))


def test_c3d_video_files(tmp_path):
    cv2 = pytest.importorskip("cv2")
    frames = RNG.integers(0, 256, (6, 6, 8, 3), dtype=np.uint8)
    writer = cv2.VideoWriter(str(tmp_path / "v.avi"), cv2.VideoWriter_fourcc(*"FFV1"), 5, (8, 6))
    if not writer.isOpened():
        pytest.skip("this OpenCV cannot write FFV1 (lossless) videos")
    for f in frames:
        writer.write(f)
    writer.release()
    (tmp_path / "list.txt").write_text("v.avi 2 4\n")
    text = ('type: "VideoData" video_data_param { source: "%s" root_folder: "%s/" batch_size: 1 '
            'new_length: 2 sampling_rate: 2 %s }')
    data, label = run_data_layer(text % (tmp_path / "list.txt", tmp_path, ""))
    # frames 2 and 4 (0-based, from the start column, every 2nd); C x L x H x W
    np.testing.assert_array_equal(data[0], frames[[2, 4]].transpose(3, 0, 1, 2))
    assert label[0] == 4
    (tmp_path / "jitter.txt").write_text("v.avi 1\n")          # v1.1 jitter: '<video> <label>'
    (d,) = run_data_layer(text % (tmp_path / "jitter.txt", tmp_path,
                                  "use_temporal_jitter: true"), tops=1)
    starts = [s for s in range(3) if np.array_equal(
        d[0], frames[[s, s + 2]].transpose(3, 0, 1, 2))]
    assert len(starts) == 1                                     # one valid window, drawn at random
