"""py-faster-rcnn's RoIDataLayer (caffepy.forks.detection.frcnn.roi_data / roi_minibatch) on a synthetic
roidb of small images: scaling, means, BGR, flips, RPN and Fast R-CNN blobs, RoI sampling, order,
the prefetch thread, the one-line errors and a net trained from it."""
import gc
import time
import weakref

import numpy as np
import pytest

import caffepy
from caffepy.forks.detection.frcnn import config, roi_data
from caffepy.forks.detection.frcnn import roi_minibatch as rm
from caffepy.data.image import encode_image
from caffepy.errors import CaffeError
from caffepy.testing import make_blobs, make_layer

BGR = (10, 120, 250)            # a flat image's colour, channels in file-reading (BGR) order


@pytest.fixture
def cfg(monkeypatch):
    """A fresh py-faster-rcnn configuration, restored after the test."""
    monkeypatch.setattr(config, "cfg", config.default_config())
    return config.cfg


def _image(tmp_path, name, pixels):
    path = tmp_path / name
    path.write_bytes(encode_image(np.asarray(pixels, dtype=np.uint8), "png"))
    return str(path)


def _flat(tmp_path, name, height, width):
    return _image(tmp_path, name, np.broadcast_to(np.array(BGR, np.uint8), (height, width, 3)))


def _entry(path, height, width, boxes, classes, overlaps, **extra):
    boxes = np.asarray(boxes, dtype=np.uint16).reshape(-1, 4)
    e = dict(image=path, width=width, height=height, flipped=False, boxes=boxes,
             gt_classes=np.asarray(classes), max_classes=np.asarray(classes),
             max_overlaps=np.asarray(overlaps, dtype=np.float64))
    e.update(extra)
    return e


def _layer(num_classes=3, tops=None, name="input-data"):
    layer = make_layer('type: "Python" python_param { module: "roi_data_layer.layer" '
                       'layer: "RoIDataLayer" param_str: "\'num_classes\': %d" }' % num_classes,
                       dtype=np.float32, phase=caffepy.TRAIN, name=name)
    n = len(roi_data.top_names(config.cfg.TRAIN)) if tops is None else tops
    top = make_blobs(n)
    layer.setup([], top)
    return layer, top


def test_scale_capped_by_max_size():
    assert rm.image_scale(30, 40, 600, 1000) == 20.0
    assert rm.image_scale(100, 400, 600, 1000) == 2.5          # 6 x 400 = 2400 > 1000
    assert rm.image_scale(100, 166, 600, 1000) == 6.0          # round(996) <= 1000


def test_resize_is_opencvs_linear():
    cv2 = pytest.importorskip("cv2")
    im = np.random.default_rng(0).uniform(-100, 100, (7, 9, 3)).astype(np.float32)
    for s in (3.0, 0.5, 1.7, 0.37):
        want = cv2.resize(im, None, None, fx=s, fy=s, interpolation=cv2.INTER_LINEAR)
        np.testing.assert_allclose(rm.resize_by(im, s), want, atol=1e-4)


def test_setup_shapes(cfg):
    _, top = _layer(num_classes=21)
    assert [t.shape for t in top] == [(2, 3, 600, 1000), (1, 5), (1,), (1, 84), (1, 84), (1, 84)]
    cfg.TRAIN.BBOX_REG = False
    assert len(_layer(tops=3)[1]) == 3
    cfg.TRAIN.HAS_RPN = True
    assert [t.shape for t in _layer()[1]] == [(2, 3, 600, 1000), (1, 3), (1, 4)]


def test_rpn_blobs(cfg, tmp_path):
    cfg.TRAIN.update(HAS_RPN=True, IMS_PER_BATCH=1, SCALES=(6,))
    path = _flat(tmp_path, "a.png", 3, 5)                       # scale 6 / 3 = 2: 6 x 10
    entry = _entry(path, 3, 5, [[0, 0, 2, 1], [1, 1, 4, 2], [0, 0, 4, 2]], [2, 1, 0],
                   [1, 1, 0.3])
    layer, top = _layer()
    layer.set_roidb([entry])
    layer.forward([], top)
    data, im_info, gt_boxes = [t.data for t in top]
    assert data.shape == (1, 3, 6, 10)
    for c in range(3):                                           # BGR minus the BGR means
        np.testing.assert_allclose(data[0, c], BGR[c] - cfg.PIXEL_MEANS.ravel()[c], rtol=1e-6)
    np.testing.assert_allclose(im_info, [[6, 10, 2]])
    np.testing.assert_array_equal(gt_boxes, [[0, 0, 4, 2, 2], [2, 2, 8, 4, 1]])


def test_image_values_and_flip(cfg, tmp_path):
    cfg.TRAIN.update(HAS_RPN=True, IMS_PER_BATCH=1, SCALES=(2,))
    cfg.PIXEL_MEANS = np.zeros((1, 1, 3))
    pixels = np.zeros((2, 3, 3), np.uint8)
    pixels[:, 0] = (1, 2, 3)                                     # left column B=1 G=2 R=3
    entry = _entry(_image(tmp_path, "b.png", pixels), 2, 3, [[0, 0, 1, 1]], [1], [1.0])
    blobs = rm.get_minibatch([entry], 2, cfg, np.random.default_rng(0))
    np.testing.assert_array_equal(blobs["data"][0, :, 0, 0], [1, 2, 3])    # scale 1
    np.testing.assert_array_equal(blobs["data"][0, :, 0, 2], [0, 0, 0])
    flipped = rm.append_flipped([entry])[1]
    np.testing.assert_array_equal(flipped["boxes"], [[1, 0, 2, 1]])        # 3 - 1 - 1, 3 - 0 - 1
    blobs = rm.get_minibatch([flipped], 2, cfg, np.random.default_rng(0))
    np.testing.assert_array_equal(blobs["data"][0, :, 1, 2], [1, 2, 3])
    np.testing.assert_array_equal(blobs["data"][0, :, 1, 0], [0, 0, 0])
    np.testing.assert_array_equal(blobs["gt_boxes"], [[1, 0, 2, 1, 1]])


def test_fast_rcnn_sampling_and_targets(cfg, tmp_path):
    cfg.TRAIN.update(BATCH_SIZE=8, IMS_PER_BATCH=2, SCALES=(8,), ASPECT_GROUPING=False)
    # per image 8 / 2 = 4 RoIs, round(0.25 * 4) = 1 foreground: boxes 0-2 fg, 3-7 bg, 8 below LO
    overlaps = [1, 0.7, 0.5, 0.45, 0.3, 0.2, 0.1, 0.1, 0.05]
    classes = [2, 2, 1, 1, 1, 2, 1, 2, 0]
    targets = np.zeros((9, 5), np.float32)
    targets[:3] = [[2, .1, .2, .3, .4], [2, .5, .6, .7, .8], [1, -.1, -.2, -.3, -.4]]
    boxes = [[i, i, i + 2, i + 3] for i in range(9)]
    roidb = [_entry(_flat(tmp_path, "%d.png" % k, 4, 4 + k), 4, 4 + k, boxes, classes, overlaps,
                    bbox_targets=targets) for k in range(2)]
    layer, top = _layer(num_classes=3)
    layer.set_roidb(roidb)
    layer.forward([], top)
    data, rois, labels, bt, inside, outside = [t.data for t in top]
    assert data.shape == (2, 3, 8, 10)                    # widths 8 and 10 (scale 2), padded
    assert rois.shape == (8, 5) and labels.shape == (8,) and bt.shape == (8, 12)
    np.testing.assert_array_equal(rois[:, 0], [0, 0, 0, 0, 1, 1, 1, 1])
    for i in (0, 4):
        box = rois[i, 1:] / 2                                    # scale 2 back to the image
        k = int(box[0])
        assert k < 3 and labels[i] == classes[k]                 # the foreground first
        np.testing.assert_array_equal(box, boxes[k])
        c = int(classes[k])
        np.testing.assert_allclose(bt[i, 4 * c:4 * c + 4], targets[k, 1:])
        assert np.count_nonzero(bt[i]) == 4
        np.testing.assert_array_equal(inside[i], np.repeat(np.arange(3) == c, 4))
        bg = (rois[i + 1:i + 4, 1] / 2).astype(int)
        assert set(bg) <= {3, 4, 5, 6, 7} and len(set(bg)) == 3
        assert not labels[i + 1:i + 4].any() and not bt[i + 1:i + 4].any()
    np.testing.assert_array_equal(outside, inside > 0)


def test_bad_bbox_targets_are_one_line(cfg, tmp_path):
    cfg.TRAIN.update(IMS_PER_BATCH=1, SCALES=(4,))
    entry = _entry(_flat(tmp_path, "e.png", 4, 4), 4, 4, [[0, 0, 1, 1]], [1], [1.0])
    for targets, match in (([[5, 0, 0, 0, 0]], r"class 5 outside \[0, num_classes = 3\)"),
                           ([[1, 0, 0, 0]], r"bbox_targets must be R x 5"),
                           (None, "has no 'bbox_targets'")):
        bad = dict(entry, bbox_targets=np.array(targets)) if targets else entry
        with pytest.raises(rm.RoidbError, match="roidb entry 0: " + match):
            rm.get_minibatch([bad], 3, cfg, np.random.default_rng(0))


def test_sampling_guards_small_pools_and_sparse_overlaps(cfg, tmp_path):
    scipy_sparse = pytest.importorskip("scipy.sparse")
    cfg.TRAIN.update(BATCH_SIZE=128, IMS_PER_BATCH=1, SCALES=(4,), BBOX_REG=False)
    gt_overlaps = scipy_sparse.csr_matrix(np.array([[0, 0.9, 0], [0, 0, 0.3], [0, 0, 0]]))
    entry = dict(image=_flat(tmp_path, "c.png", 4, 4), flipped=False, boxes=np.zeros((3, 4)),
                 gt_overlaps=gt_overlaps)
    blobs = rm.get_minibatch([entry], 3, cfg, np.random.default_rng(0))
    np.testing.assert_array_equal(blobs["labels"], [1, 0])     # 1 fg, 1 bg: box 2 is below LO
    assert set(blobs) == {"data", "rois", "labels"}


def test_aspect_grouping_pairs_orientations():
    roidb = [dict(width=w, height=h) for w, h in [(5, 3)] * 5 + [(3, 5)] * 4 + [(4, 4)]]
    rng = np.random.default_rng(1)
    orders = [roi_data.shuffled_order(roidb, True, rng) for _ in range(5)]
    for order in orders:
        assert sorted(order) == list(range(10))
        landscape = [roidb[i]["width"] >= roidb[i]["height"] for i in order]   # square counts
        assert all(landscape[i] == landscape[i + 1] for i in range(0, 10, 2))
    assert len({tuple(o) for o in orders}) > 1
    order = roi_data.shuffled_order(roidb[1:], True, rng)         # odd: one entry alone
    assert sorted(order) == list(range(9))


def test_order_skips_the_tail_of_a_pass(cfg):
    cfg.TRAIN.ASPECT_GROUPING = False
    order = roi_data._Order(list(range(5)), np.random.default_rng(0))
    seen = [tuple(order.next_indices()) for _ in range(6)]
    for first, second in (seen[0:2], seen[2:4], seen[4:6]):     # 2 batches of 2 per pass of 5
        assert len(set(first + second)) == 4


def test_prefetch_thread(cfg, tmp_path):
    cfg.TRAIN.update(HAS_RPN=True, IMS_PER_BATCH=1, SCALES=(4,), USE_PREFETCH=True)
    roidb = [_entry(_flat(tmp_path, "%d.png" % k, 4, 4), 4, 4, [[0, 0, 1, 1]], [1], [1.0])
             for k in range(3)]
    layer, top = _layer()
    layer.set_roidb(roidb)
    for _ in range(3):
        layer.forward([], top)
        assert top[0].shape == (1, 3, 4, 4)
        np.testing.assert_array_equal(top[2].data, [[0, 0, 1, 1, 1]])
    thread = layer._prefetcher
    layer.close()
    assert not thread.is_alive()
    layer.set_roidb([dict(roidb[0], image=str(tmp_path / "gone.png"))])
    with pytest.raises(CaffeError, match="gone.png"):
        layer.forward([], top)
    layer.set_roidb(roidb)
    thread, alive = layer._prefetcher, weakref.ref(layer)
    del layer, top
    deadline = time.monotonic() + 5
    while (alive() is not None or thread.is_alive()) and time.monotonic() < deadline:
        gc.collect()
        thread.join(timeout=0.1)
    assert alive() is None, "the layer outlived its last reference: %r" % (
        [type(r).__name__ for r in gc.get_referrers(alive())],)
    assert not thread.is_alive()                  # the layer's end stops its thread


@pytest.mark.parametrize("change, match", [
    (dict(image="MISSING"), r"roidb entry 0: .*MISSING.png: could not open"),
    (dict(boxes=np.array([[3, 0, 1, 1]])), r"roidb entry 0: box 0 \[3.0, 0.0, 1.0, 1.0\]"),
    (dict(gt_classes=np.array([7])), r"class 7 outside \[0, num_classes = 3\)"),
    (dict(gt_classes=np.array([1, 1])), r"'gt_classes' has shape \(2,\) for 1 boxes"),
])
def test_bad_entry_is_one_line(cfg, tmp_path, change, match):
    cfg.TRAIN.update(HAS_RPN=True, IMS_PER_BATCH=1, SCALES=(4,))
    entry = _entry(_flat(tmp_path, "d.png", 4, 4), 4, 4, [[0, 0, 1, 1]], [1], [1.0])
    if change.get("image") == "MISSING":
        change = dict(image=str(tmp_path / "MISSING.png"))
    layer, top = _layer()
    layer.set_roidb([dict(entry, **change)])
    with pytest.raises(CaffeError, match=match) as info:
        layer.forward([], top)
    assert str(info.value).startswith("layer 'input-data' (Python): RoIDataLayer: ")
    assert "\n" not in str(info.value)


def test_setup_and_roidb_errors(cfg):
    with pytest.raises(CaffeError, match=r"takes no bottom and 6 tops \(data, rois, labels, "
                                         r"bbox_targets.*HAS_RPN = False.*got 0 bottoms and 3"):
        _layer(tops=3)
    with pytest.raises(CaffeError, match="needs 'num_classes'"):
        make_layer('type: "Python" python_param { module: "roi_data_layer.layer" '
                   'layer: "RoIDataLayer" }').setup([], make_blobs(6))
    layer, top = _layer()
    with pytest.raises(CaffeError, match=r"'input-data'.*no roidb: call set_roidb"):
        layer.forward([], top)
    with pytest.raises(CaffeError, match="empty roidb"):
        layer.set_roidb([])
    with pytest.raises(CaffeError, match="ASPECT_GROUPING needs 'width' and 'height'"):
        layer.set_roidb([dict(image="x")])


NET = '''
name: "frcnn-tiny"
layer { name: "input-data" type: "Python" top: "data" top: "rois" top: "labels"
        top: "bbox_targets" top: "bbox_inside_weights" top: "bbox_outside_weights"
        python_param { module: "roi_data_layer.layer" layer: "RoIDataLayer"
                       param_str: "'num_classes': 3" } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1
                            weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "pool" type: "ROIPooling" bottom: "conv" bottom: "rois" top: "pool"
        roi_pooling_param { pooled_w: 2 pooled_h: 2 spatial_scale: 1 } }
layer { name: "cls" type: "InnerProduct" bottom: "pool" top: "cls"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "bbox" type: "InnerProduct" bottom: "pool" top: "bbox"
        inner_product_param { num_output: 12 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "loss_cls" type: "SoftmaxWithLoss" bottom: "cls" bottom: "labels" top: "loss_cls" }
layer { name: "loss_bbox" type: "SmoothL1Loss" bottom: "bbox" bottom: "bbox_targets"
        bottom: "bbox_inside_weights" bottom: "bbox_outside_weights" top: "loss_bbox" }
'''


def test_net_trains_from_a_roidb(cfg, tmp_path):
    from caffepy.net import Net
    cfg.TRAIN.update(BATCH_SIZE=8, SCALES=(8, 12), MAX_SIZE=16)
    classes, overlaps = [1, 2, 0, 0], [1, 0.6, 0.3, 0.2]
    targets = np.array([[1, .1, .2, .3, .4], [2, .5, .5, .5, .5], [0] * 5, [0] * 5], np.float32)
    roidb = [_entry(_flat(tmp_path, "%d.png" % k, 6 + 2 * k, 8), 6 + 2 * k, 8,
                    [[0, 0, 3, 3], [1, 1, 5, 4], [2, 0, 7, 5], [0, 2, 4, 5]], classes, overlaps,
                    bbox_targets=targets) for k in range(4)]
    caffepy.set_random_seed(5)
    net = Net(NET, caffepy.TRAIN)
    net.layers[0].set_roidb(rm.append_flipped(roidb))       # as py-faster-rcnn's train_net
    for _ in range(2):
        net.forward()
        net.backward()
        n = net.blobs["data"].shape[0]
        assert n == 2 and net.blobs["rois"].shape[1] == 5
        assert net.blobs["pool"].shape[0] == net.blobs["labels"].shape[0] <= 8
        assert np.isfinite(float(net.blobs["loss_cls"].data)) and float(net.blobs["loss_bbox"].data) > 0
        assert np.abs(net.params["conv"][0].diff).sum() > 0


@pytest.mark.slow
def test_py_faster_rcnn_end2end_train_net_runs_backward(cfg, tmp_path):
    """py-faster-rcnn's own ZF end-to-end train net from a roidb: its ROIPooling is asked for a
    rois gradient (the rois come from Python layers above the RPN)."""
    from caffepy.net import Net
    from caffepy.testing.random_weights import randomize
    from tests.conftest import shared_path
    path = shared_path("modelzoo", "rbgirshick__py-faster-rcnn", "models", "pascal_voc", "ZF",
                       "faster_rcnn_end2end", "train.prototxt")
    cfg.TRAIN.update(HAS_RPN=True, IMS_PER_BATCH=1, SCALES=(160,), MAX_SIZE=200,
                     BATCH_SIZE=16, RPN_PRE_NMS_TOP_N=100, RPN_POST_NMS_TOP_N=16)
    roidb = [_entry(_flat(tmp_path, "z.png", 60, 80), 60, 80, [[5, 5, 40, 50]], [3], [1.0])]
    caffepy.set_random_seed(0)
    net = Net(path, caffepy.TRAIN)
    randomize(net, 0)                             # the file has no fillers: ImageNet weights
    net.layers[0].set_roidb(rm.append_flipped(roidb))
    net.forward()
    net.backward()
    assert net.blobs["data"].shape == (1, 3, 150, 200)     # 213 > MAX_SIZE: scale 200 / 80
    np.testing.assert_allclose(net.blobs["im_info"].data, [[150, 200, 2.5]])
    assert np.isfinite(float(net.blobs["cls_loss"].data))
    assert np.abs(net.params["conv1"][0].diff).sum() > 0
