"""SSD's AnnotatedData (forks/ssd/annotated_data.py, forks/ssd/augment.py): an LMDB of
AnnotatedDatum read into data and the 1 x 1 x B x 8 box label, with SSD's samplers, distortion,
expansion, resize and mirror."""
import numpy as np
import pytest

from caffepy import common
from caffepy.data.datum import encoded_datum, image_to_datum
from caffepy.data.image import encode_image
from caffepy.errors import CaffeError
from caffepy.forks.ssd import augment
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer

pytest.importorskip("lmdb")

BOXES = [  # per image: (group_label, instance_id, xmin, ymin, xmax, ymax, difficult)
    [(1, 0, 0.1, 0.2, 0.5, 0.6, False), (2, 0, 0.6, 0.1, 0.9, 0.4, True)],
    [(3, 0, 0.25, 0.25, 0.75, 0.75, False)],
    [],
]


def _image(i, h=24, w=32):
    rng = np.random.default_rng(i)
    return rng.integers(0, 256, (h, w, 3)).astype(np.uint8)


def _anno(i, encoded=True, typed=True, h=24, w=32):
    a = caffe_pb2.AnnotatedDatum()
    img = _image(i, h, w)
    a.datum.CopyFrom(encoded_datum(encode_image(img, "png"), i) if encoded else image_to_datum(img, i))
    if typed:
        a.type = caffe_pb2.AnnotatedDatum.BBOX
    groups = {}
    for label, inst, x0, y0, x1, y1, diff in BOXES[i % len(BOXES)]:
        if label not in groups:
            groups[label] = a.annotation_group.add()
            groups[label].group_label = label
        an = groups[label].annotation.add()
        an.instance_id = inst
        an.bbox.xmin, an.bbox.ymin, an.bbox.xmax, an.bbox.ymax = x0, y0, x1, y1
        an.bbox.difficult = diff
    return a


def _db(tmp_path, n=3, bad=None, **kw):
    from caffepy.data.db import LMDB, open_db
    path = str(tmp_path / "anno_db")
    with open_db(path, LMDB, "w") as db:
        for i in range(n):
            value = b"\xff\x07not an AnnotatedDatum" if i == bad else _anno(i, **kw).SerializeToString()
            db.put(b"%08d" % i, value)
    return path


def _layer(path, batch=3, transform="", anno="", phase=caffe_pb2.TRAIN):
    text = ('type: "AnnotatedData" data_param { source: "%s" backend: LMDB batch_size: %d } '
            'transform_param { %s } annotated_data_param { %s }' % (path, batch, transform, anno))
    return make_layer(text, dtype=np.float32, phase=phase)


def _run(layer, n_forward=1):
    top = make_blobs(2, dtype=np.float32)
    layer.setup([], top)
    out = []
    try:
        for _ in range(n_forward):
            layer.forward([], top)
            out.append((top[0].data.copy(), top[1].data.copy()))
    finally:
        layer.close()
    return out


def test_shapes_and_label_rows(tmp_path):
    layer = _layer(_db(tmp_path))
    top = make_blobs(2, dtype=np.float32)
    layer.setup([], top)
    try:
        assert top[0].shape == (3, 3, 24, 32) and top[1].shape == (1, 1, 2, 8)
        layer.forward([], top)
        data, label = top[0].data, top[1].data
    finally:
        layer.close()
    for i in range(3):
        np.testing.assert_array_equal(data[i], _image(i).transpose(2, 0, 1))
    assert label.shape == (1, 1, 3, 8)
    np.testing.assert_allclose(label[0, 0], [[0, 1, 0, 0.1, 0.2, 0.5, 0.6, 0],
                                             [0, 2, 0, 0.6, 0.1, 0.9, 0.4, 1],
                                             [1, 3, 0, 0.25, 0.25, 0.75, 0.75, 0]], atol=1e-6)


def test_no_box_gives_one_row_of_minus_one(tmp_path):
    from caffepy.data.db import LMDB, open_db
    path = str(tmp_path / "empty_boxes")
    with open_db(path, LMDB, "w") as db:
        db.put(b"0", _anno(2).SerializeToString())
    ((_, label),) = _run(_layer(path, batch=2))
    np.testing.assert_array_equal(label, -np.ones((1, 1, 1, 8)))


def test_untyped_records_give_datum_labels(tmp_path):
    ((data, label),) = _run(_layer(_db(tmp_path, typed=False, encoded=False)))
    assert data.shape == (3, 3, 24, 32)
    np.testing.assert_array_equal(label, [0, 1, 2])


def test_mirror_flips_xmin_xmax(tmp_path):
    common.set_random_seed(3)
    path = _db(tmp_path)
    runs = _run(_layer(path, transform="mirror: true"), n_forward=4)
    flipped = plain = 0
    for data, label in runs:
        for row in label[0, 0]:
            item = int(row[0])
            orig = [b for b in BOXES[item] if b[0] == row[1]][0]
            if np.array_equal(data[item], _image(item).transpose(2, 0, 1)[:, :, ::-1]):
                flipped += 1
                np.testing.assert_allclose(row[3:7], [1 - orig[4], orig[3], 1 - orig[2], orig[5]],
                                           atol=1e-6)
            else:
                plain += 1
                np.testing.assert_array_equal(data[item], _image(item).transpose(2, 0, 1))
                np.testing.assert_allclose(row[3:7], orig[2:6], atol=1e-6)
    assert flipped and plain


SAMPLER = ('batch_sampler { sampler { min_scale: 0.3 max_scale: 1.0 min_aspect_ratio: 0.5 '
           'max_aspect_ratio: 2.0 } sample_constraint { min_jaccard_overlap: 0.5 } '
           'max_sample: 1 max_trials: 50 }')


def test_batch_sampler_respects_the_iou_constraint():
    common.set_random_seed(5)
    rng = np.random.default_rng(0)
    sp = caffe_pb2.AnnotatedDataParameter()
    from google.protobuf import text_format
    text_format.Parse(SAMPLER.replace("max_sample: 1", "max_sample: 20")
                      .replace("max_trials: 50", "max_trials: 2000"), sp)
    groups = [(1, [(0, [0.1, 0.2, 0.5, 0.6], False)]), (2, [(0, [0.6, 0.1, 0.9, 0.4], False)])]
    boxes = augment.generate_batch_samples(groups, list(sp.batch_sampler), rng)
    assert 5 <= len(boxes) <= 20
    for b in boxes:
        assert max(augment.jaccard(b, o) for o in ([0.1, 0.2, 0.5, 0.6], [0.6, 0.1, 0.9, 0.4])) >= 0.5
        assert 0 <= b[0] < b[2] <= 1 + 1e-9 and 0 <= b[1] < b[3] <= 1 + 1e-9


def test_sampled_crop_resized_warp(tmp_path):
    common.set_random_seed(7)
    layer = _layer(_db(tmp_path), anno=SAMPLER,
                   transform="resize_param { resize_mode: WARP height: 16 width: 20 "
                             "interp_mode: LINEAR interp_mode: NEAREST interp_mode: CUBIC "
                             "interp_mode: AREA interp_mode: LANCZOS4 }")
    for data, label in _run(layer, n_forward=3):
        assert data.shape == (3, 3, 16, 20)
        assert label.shape[:2] == (1, 1) and label.shape[3] == 8
        rows = label[0, 0]
        assert np.all(rows[:, 3:7] >= 0) and np.all(rows[:, 3:7] <= 1)
        assert np.all(rows[:, 5] > rows[:, 3]) and np.all(rows[:, 6] > rows[:, 4])


def test_reproducible_with_a_seed(tmp_path):
    path = _db(tmp_path)
    tp = ("mirror: true mean_value: 104 mean_value: 117 mean_value: 123 "
          "resize_param { resize_mode: WARP height: 20 width: 20 } "
          "distort_param { brightness_prob: 0.5 brightness_delta: 32 contrast_prob: 0.5 "
          "contrast_lower: 0.5 contrast_upper: 1.5 hue_prob: 0.5 hue_delta: 18 "
          "saturation_prob: 0.5 saturation_lower: 0.5 saturation_upper: 1.5 random_order_prob: 0.5 } "
          "expand_param { prob: 0.5 max_expand_ratio: 2.0 } emit_constraint { emit_type: CENTER }")
    runs = []
    for _ in range(2):
        common.set_random_seed(11)
        runs.append(_run(_layer(path, transform=tp, anno=SAMPLER), n_forward=3))
    for (d1, l1), (d2, l2) in zip(*runs):
        np.testing.assert_array_equal(d1, d2)
        np.testing.assert_array_equal(l1, l2)
    common.set_random_seed(12)
    other = _run(_layer(path, transform=tp, anno=SAMPLER), n_forward=3)
    assert any(not np.array_equal(a[0], b[0]) for a, b in zip(runs[0], other))


def test_fit_large_size_and_pad_keeps_boxes_on_the_image():
    rp = caffe_pb2.ResizeParameter(resize_mode=RP_FIT, height=32, width=32, pad_value=[7])
    img = _image(0, 16, 32)
    out = augment.resize(img, rp, np.random.default_rng(0))
    assert out.shape == (32, 32, 3)
    assert np.all(out[:8] == 7) and np.all(out[24:] == 7)
    b = augment.update_by_resize_policy(rp, 32, 16, [0.0, 0.0, 1.0, 1.0])
    np.testing.assert_allclose(b, [0, 0.25, 1, 0.75])


RP_FIT = caffe_pb2.ResizeParameter.FIT_LARGE_SIZE_AND_PAD


def test_expand_moves_boxes_into_the_canvas():
    ep = caffe_pb2.ExpansionParameter(prob=1.0, max_expand_ratio=3.0)
    img = _image(0, 10, 10)
    groups = [(1, [(0, [0.0, 0.0, 1.0, 1.0], False)])]
    out, g = augment.expand(img, groups, ep, np.array([1.0, 2.0, 3.0]), np.random.default_rng(4))
    (x0, y0, x1, y1) = g[0][1][0][1]
    H, W = out.shape[:2]
    assert H > 10 and W > 10
    r0, c0 = int(round(y0 * H)), int(round(x0 * W))
    np.testing.assert_array_equal(out[r0:r0 + 10, c0:c0 + 10], img)
    np.testing.assert_allclose([(x1 - x0) * W, (y1 - y0) * H], [10, 10], atol=1e-6)
    assert out[0, 0].tolist() == [1, 2, 3] or (r0, c0) == (0, 0)


def test_bad_record_is_one_line(tmp_path):
    layer = _layer(_db(tmp_path, bad=1))
    top = make_blobs(2, dtype=np.float32)
    layer.setup([], top)
    try:
        with pytest.raises(CaffeError) as e:
            layer.forward([], top)
    finally:
        layer.close()
    msg = str(e.value)
    assert "\n" not in msg and "bad record" in msg and "00000001" in msg and "AnnotatedDatum" in msg


def test_refusals(tmp_path):
    path = _db(tmp_path)
    with pytest.raises(CaffeError, match="FIT_SMALL_SIZE needs batch_size 1"):
        _run(_layer(path, transform="resize_param { resize_mode: FIT_SMALL_SIZE height: 8 width: 8 }"))
    with pytest.raises(CaffeError, match="max_expand_ratio must be greater than 1"):
        _run(_layer(path, transform="expand_param { max_expand_ratio: 1 }"))
    with pytest.raises(CaffeError, match="noise_param.hist_eq is not supported"):
        _run(_layer(path, transform="noise_param { hist_eq: true }"))
    with pytest.raises(CaffeError, match="annotated_data_param.yolo_data_type is not SSD's"):
        _run(_layer(path, anno="yolo_data_type: 1"))


def test_caffepy_train_runs_an_ssd_train_file(tmp_path, capsys, monkeypatch):
    """`caffepy train` on a tiny SSD train file whose data come from AnnotatedData itself."""
    import os
    from caffepy import cli
    from caffepy.log import teardown as teardown_log
    from tests.forks.ssd.test_multibox import TINY_SSD
    _db(tmp_path, n=4)
    os.rename(str(tmp_path / "anno_db"), str(tmp_path / "trainval_lmdb"))
    net = TINY_SSD.replace("batch_size: 32", "batch_size: 2").replace(
        "batch_sampler { max_sample: 1 max_trials: 1 }", SAMPLER).replace(
        "num_output: 6", "num_output: 8").replace("num_classes: 3", "num_classes: 4")  # labels 1..3
    (tmp_path / "net.prototxt").write_text(net)
    (tmp_path / "solver.prototxt").write_text(
        'net: "net.prototxt" base_lr: 0.001 lr_policy: "fixed" max_iter: 3 display: 1 '
        'snapshot_after_train: false random_seed: 1 solver_mode: CPU\n')
    monkeypatch.chdir(tmp_path)
    try:
        rc = cli.main(["train", "--solver", "solver.prototxt"])
        err = capsys.readouterr().err
    finally:
        teardown_log()
    assert rc == 0, err[-2000:]
    assert "mbox_loss" in err


def test_saved_data_state_replays_the_same_batches(tmp_path):
    common.set_random_seed(21)
    tp = "mirror: true resize_param { height: 12 width: 12 } expand_param { prob: 0.5 max_expand_ratio: 2 }"
    layer = _layer(_db(tmp_path), batch=2, transform=tp, anno=SAMPLER)
    top = make_blobs(2, dtype=np.float32)
    layer.setup([], top)
    try:
        layer.forward([], top)
        state = layer.get_data_state()
        first = []
        for _ in range(2):
            layer.forward([], top)
            first.append((top[0].data.copy(), top[1].data.copy()))
        layer.set_data_state(state)
        for data, label in first:
            layer.forward([], top)
            np.testing.assert_array_equal(top[0].data, data)
            np.testing.assert_array_equal(top[1].data, label)
    finally:
        layer.close()


@pytest.mark.parametrize("size", [(17, 11), (50, 40)])
def test_resize_and_hsv_match_opencv_up_to_rounding(size):
    cv2 = pytest.importorskip("cv2")
    RP = caffe_pb2.ResizeParameter
    img = np.random.default_rng(0).integers(0, 256, (23, 31, 3)).astype(np.uint8)
    modes = {RP.LINEAR: cv2.INTER_LINEAR, RP.NEAREST: cv2.INTER_NEAREST, RP.CUBIC: cv2.INTER_CUBIC,
             RP.AREA: cv2.INTER_AREA, RP.LANCZOS4: cv2.INTER_LANCZOS4}
    for mode, cv_mode in modes.items():
        d = np.abs(augment._resize(img, size[0], size[1], mode).astype(int)
                   - cv2.resize(img, size, interpolation=cv_mode).astype(int))
        assert d.max() <= 1 and d.mean() < 0.2, RP.Interp_mode.Name(mode)
    for channel, mul, add in [(0, 1, 10.7), (0, 1, -15.2), (1, 1.4, 0), (1, 0.6, 0)]:
        planes = list(cv2.split(cv2.cvtColor(img, cv2.COLOR_BGR2HSV)))
        planes[channel] = np.clip(np.rint(planes[channel] * mul + add), 0, 255).astype(np.uint8)
        ref = cv2.cvtColor(cv2.merge(planes), cv2.COLOR_HSV2BGR)
        d = np.abs(augment._adjust_hsv(img, channel, mul, add).astype(int) - ref.astype(int))
        assert d.mean() < 0.1
