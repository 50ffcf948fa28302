"""DeconvNet's caffe (HyeonwooNoh/caffe) layers of its 2014 enum-only V1 types: BinaryAccuracy,
RedAccuracy, RedSoftmaxWithLoss, DropoutChannel (forks/segmentation/deconvnet.py) and the data
layers WindowSegBinary and SelectSegBinary (forks/segmentation/deconvnet_data.py)."""
import numpy as np
import pytest

from caffepy.proto import caffe_pb2, io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from .test_segnet import _write_png
from ..video.test_data import run_data_layer


@pytest.mark.parametrize("mode, want", [("Accuracy", 3 / 5.0), ("Precision", 1 / 2.0),
                                        ("Recall", 1 / 2.0), ("F_measure", 1 / 2.0)])
def test_binary_accuracy_modes(mode, want):
    scores = np.array([0.5, -1.0, 2.0, -0.5, -2.0, 1.0]).reshape(1, 1, 2, 3)
    labels = np.array([1, 1, 0, 0, 0, 7], float).reshape(1, 1, 2, 3)   # 7 counts in nothing
    # tp 1 (0.5/1), fn 1 (-1/1), fp 1 (2/0), tn 2
    acc, = run_layer(make_layer('type: "BinaryAccuracy" binary_accuracy_param { accuracy_mode: %s }'
                                % mode), make_blobs([scores, labels]), make_blobs(1))
    np.testing.assert_allclose(acc.ravel(), [want])


def test_binary_accuracy_empty_precision_is_nan():
    acc, = run_layer(make_layer('type: "BinaryAccuracy" binary_accuracy_param { accuracy_mode: '
                                'Precision }'), make_blobs([-np.ones((1, 1, 1, 2)),
                                                            np.ones((1, 1, 1, 2))]), make_blobs(1))
    assert np.isnan(acc.ravel()[0])


def test_red_accuracy_sums_channel_groups():
    # 4 channels, 2 classes: class 0 = channels 0-1, class 1 = channels 2-3
    s = np.log(np.array([[0.3, 0.3, 0.35, 0.05], [0.1, 0.1, 0.5, 0.3], [0.25, 0.25, 0.25, 0.25],
                         [0.9, 0.0 + 1e-9, 0.05, 0.05]])).T.reshape(1, 4, 1, 4)
    lab = np.array([0, 1, 1, 255], float).reshape(1, 1, 1, 4)
    acc, = run_layer(make_layer('type: "RedAccuracy" red_accuracy_param { class_num: 2 '
                                'ignore_label: 255 }'), make_blobs([s, lab]), make_blobs(1))
    # pixel 0: 0.6 vs 0.4 -> 0 right; pixel 1: 0.2 vs 0.8 -> 1 right; pixel 2: a 0.5 tie ranks
    # class 1 first -> right; pixel 3 ignored
    np.testing.assert_allclose(acc.ravel(), [1.0])
    acc, = run_layer(make_layer('type: "RedAccuracy"'), make_blobs([s, lab * 0 + 2]),
                     make_blobs(1))
    np.testing.assert_allclose(acc.ravel(), [0.5])   # plain argmax over 4 channels: 0, 2 hit


def _red_loss(extra=""):
    return make_layer('type: "RedSoftmaxWithLoss" red_softmax_loss_param { class_num: 2 } '
                      'loss_param { ignore_label: 255 %s }' % extra)


def test_red_softmax_loss_value_and_gradient():
    rng = np.random.default_rng(3)
    s = rng.standard_normal((2, 5, 2, 3))             # 5 channels, 2 classes: 0-1 and 2-4
    lab = rng.integers(0, 2, (2, 1, 2, 3)).astype(float)
    lab[0, 0, 0, 0] = 255
    loss, = run_layer(_red_loss(), make_blobs([s, lab]), make_blobs(1))
    e = np.exp(s - s.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    groups = {0: slice(0, 2), 1: slice(2, 5)}
    terms = [-np.log(p[n, groups[int(lab[n, 0, h, w])], h, w].sum())
             for n in range(2) for h in range(2) for w in range(3) if lab[n, 0, h, w] != 255]
    np.testing.assert_allclose(float(loss), np.sum(terms) / len(terms), rtol=1e-6)
    loss, = run_layer(_red_loss("normalize: false"), make_blobs([s, lab]), make_blobs(1))
    np.testing.assert_allclose(float(loss), np.sum(terms) / 2, rtol=1e-6)
    check_layer_gradient(_red_loss(), make_blobs([s, lab]), make_blobs(1), check_bottom=[0])
    check_layer_gradient(_red_loss("normalize: false"), make_blobs([s, lab]), make_blobs(1),
                         check_bottom=[0])


def test_dropout_channel_drops_whole_maps_and_passes_through_in_test():
    x = np.random.default_rng(1).standard_normal((3, 8, 2, 2)) + 5
    layer = make_layer('type: "DropoutChannel" dropout_param { dropout_ratio: 0.5 }',
                       phase=caffe_pb2.TRAIN)
    layer.rng = lambda: np.random.default_rng(4)                 # one mask for every pass
    y, = run_layer(layer, make_blobs([x]), make_blobs(1))
    assert 0 < np.count_nonzero(y) < y.size
    kept = (y != 0).reshape(3, 8, -1)
    assert np.all(kept.all(axis=2) | (~kept).all(axis=2))          # whole maps
    np.testing.assert_allclose(y[y != 0], (x * 2)[y != 0])
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))
    y, = run_layer(make_layer('type: "DropoutChannel" dropout_param { dropout_ratio: 0.5 }',
                              phase=caffe_pb2.TEST), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, x)


def _images(tmp_path):
    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (4, 6, 3), dtype=np.uint8)
    seg = np.array([[0, 1, 2, 3, 255, 0]] * 4, dtype=np.uint8)[:, :, None]
    _write_png(tmp_path / "a.png", img)
    _write_png(tmp_path / "a_seg.png", seg)
    return img, seg[:, :, 0]


def _text(kind, tmp_path, extra=""):
    return ('type: "%s" top: "data" top: "label" top: "third" image_data_param { source: "%s" '
            'root_folder: "%s/" batch_size: 1 label_type: PIXEL ignore_label: 255 %s }'
            % (kind, tmp_path / "list.txt", tmp_path, extra))


def test_window_seg_binary_cuts_pads_and_binarises(tmp_path):
    img, seg = _images(tmp_path)
    # a window reaching one pixel left of the image and past its bottom: rows 2..4, cols -1..2
    (tmp_path / "list.txt").write_text("a.png a_seg.png -1 2 2 4\n")
    data, label, dims = run_data_layer(_text("WindowSegBinary", tmp_path), tops=3)
    want = np.zeros((3, 3, 4))
    want[:, :2, 1:] = img[2:4, 0:3].transpose(2, 0, 1)
    np.testing.assert_allclose(data[0], want)
    lab = np.full((3, 4), 255.0)
    lab[:2, 1:] = seg[2:4, 0:3]                  # no resize: the fork leaves labels as they are
    np.testing.assert_array_equal(label[0, 0], lab)
    np.testing.assert_array_equal(dims.reshape(-1), [3, 4])    # image rows / cols capped at h, w
    # with new_height / new_width (the window's own size here) 1..254 become 1
    _, label, _ = run_data_layer(_text("WindowSegBinary", tmp_path,
                                       "new_height: 3 new_width: 4"), tops=3)
    lab[(lab > 0) & (lab < 255)] = 1
    np.testing.assert_array_equal(label[0, 0], lab)


def test_select_seg_binary_picks_class_labels(tmp_path):
    img, seg = _images(tmp_path)
    (tmp_path / "list.txt").write_text("a.png a_seg.png 0 0 5 3 1 0\n")
    text = _text("SelectSegBinary", tmp_path) + " window_cls_data_param { label_dim: 2 }"
    data, label, cls = run_data_layer(text, tops=3)
    np.testing.assert_allclose(data[0], img.transpose(2, 0, 1))
    # labels 1, 2 take the line's class labels 1, 0; 3 is past label_dim -> 0; 0 and 255 stay
    np.testing.assert_array_equal(label[0, 0, 0], [0, 1, 0, 0, 255, 0])
    np.testing.assert_array_equal(cls.reshape(-1), [1, 0])
    # cls_label_base 1: label 2 -> the first class label, 3 -> the second, 1 -> 0
    _, label, _ = run_data_layer(text + " select_seg_binary_param { cls_label_base: 1 }", tops=3)
    np.testing.assert_array_equal(label[0, 0, 0], [0, 0, 1, 0, 255, 0])


def test_old_format_prototxt_reads_and_upgrades():
    net = io.read_net('''name: "old" layers { name: "d" type: SELECT_SEG_BINARY top: "data"
      top: "label" top: "cls" image_data_param { source: "l.txt" batch_size: 1 }
      window_cls_data_param { label_dim: 20 } select_seg_binary_param { cls_label_base: 1 } }
    layers { name: "acc" type: RED_ACCURACY bottom: "data" bottom: "label" top: "acc"
      red_accuracy_param { class_num: 2 } }
    layers { name: "w" type: WINDOW_SEG_BINARY top: "a" top: "b" top: "c" }''')
    assert [l.type for l in net.layer] == ["SelectSegBinary", "RedAccuracy", "WindowSegBinary"]
    assert net.layer[0].window_cls_data_param.label_dim == 20
    assert net.layer[0].select_seg_binary_param.cls_label_base == 1
    assert net.layer[1].red_accuracy_param.class_num == 2
