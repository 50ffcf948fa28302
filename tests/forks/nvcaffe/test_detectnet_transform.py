"""NVCaffe DetectNet: DetectNetTransformation (ground-truth grid, test and train paths), the
mean_ap stand-ins, OpenCV's operations in numpy, and a DetectNet-style net."""
import logging

import numpy as np
import pytest

from caffepy import common
from caffepy.data import cvops
from caffepy.forks.nvcaffe.detectnet_transform import coverage_label, rotation_matrix
from caffepy.net import Net
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer, run_layer

GT = ('detectnet_groundtruth_param { stride: 4 scale_cvg: 0.5 gridbox_type: GRIDBOX_MIN '
      'min_cvg_len: 2 obj_norm: true image_size_x: 16 image_size_y: 8 crop_bboxes: true '
      'object_class { src: 1 dst: 0 } }')


def _gt_param(text=GT):
    from google.protobuf import text_format
    lp = caffe_pb2.LayerParameter()
    text_format.Parse(text, lp)
    return lp.detectnet_groundtruth_param


def _labels(boxes, rows=4):
    lab = np.zeros((1, 1, rows, 16))
    lab[0, 0, 0, :2] = [len(boxes), 16]
    for i, (x, y, w, h, c) in enumerate(boxes):
        lab[0, 0, 1 + i, [0, 1, 2, 3, 5]] = [x, y, w, h, c]
    return lab


def test_coverage_label_hand_case():
    # box (2, 1) 8 x 6 of class 1: coverage 4 x 3 around (6, 4) = x 4..8, y 2.5..5.5: cells
    # (x 1, y 0) and (x 1, y 1); class 2 is not mapped; the third box is cut to the image
    out = coverage_label([(2, 1, 8, 6, 1), (0, 0, 4, 4, 2), (14, 6, 4, 4, 1)], _gt_param())
    want = np.zeros((9, 2, 4))
    want[:, 0, 1] = [1, 2 - 4, 1 - 0, 10 - 4, 7 - 0, 1 / 8, 1 / 6, 16 / 12, 1]
    want[:, 1, 1] = [1, 2 - 4, 1 - 4, 10 - 4, 7 - 4, 1 / 8, 1 / 6, 16 / 12, 1]
    # cut box (14, 6) 2 x 2: coverage min(2, max(2, 1)) = 2 sides around (15, 7): cell (3, 1)
    want[:, 1, 3] = [1, 14 - 12, 6 - 4, 16 - 12, 8 - 4, 1 / 2, 1 / 2, 16 / 4, 1]
    np.testing.assert_allclose(out, want, rtol=1e-12)


def test_transformation_test_phase_resizes_and_subtracts_the_mean():
    rng = np.random.default_rng(0)
    img = rng.uniform(0, 255, (1, 3, 16, 32))
    layer = make_layer('type: "DetectNetTransformation" transform_param { mean_value: 127 } ' + GT)
    bottom, top = make_blobs([img, _labels([(4, 2, 16, 12, 1)])]), make_blobs(2)
    image, grid = run_layer(layer, bottom, top)
    assert image.shape == (1, 3, 8, 16) and grid.shape == (1, 9, 2, 4)
    want = cvops.resize_cubic(img[0].transpose(1, 2, 0) / 255 - 127 / 255, 16, 8) * 255
    np.testing.assert_allclose(image[0], want.transpose(2, 0, 1), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(grid[0], coverage_label([(2, 1, 8, 6, 1)], _gt_param()))


def test_transformation_mean_file_resized_to_the_images(tmp_path):
    from caffepy.proto import io
    mean = np.random.default_rng(8).uniform(0, 255, (1, 3, 4, 8))
    bp = caffe_pb2.BlobProto()
    bp.shape.dim.extend(mean.shape)
    bp.data.extend(mean.ravel())
    io.write_binary(bp, tmp_path / "mean.binaryproto")
    img = np.random.default_rng(9).uniform(0, 255, (1, 3, 8, 16))
    layer = make_layer('type: "DetectNetTransformation" transform_param { mean_file: "%s" } %s'
                       % (tmp_path / "mean.binaryproto", GT))
    (image, _) = run_layer(layer, make_blobs([img, _labels([])]), make_blobs(2))
    sized = cvops.resize_cubic(mean[0].transpose(1, 2, 0), 16, 8).transpose(2, 0, 1)
    np.testing.assert_allclose(image[0], img[0] - sized, atol=1e-4)     # the mean is float32


AUG = ('detectnet_augmentation_param { crop_prob: 0 flip_prob: 1 scale_prob: 0 rotation_prob: 0 '
       'hue_rotation_prob: 0 desaturation_prob: 0 }')


def test_transformation_train_flip_moves_boxes_as_the_fork():
    img = np.random.default_rng(1).uniform(0, 255, (1, 3, 8, 16))
    layer = make_layer('type: "DetectNetTransformation" transform_param { mean_value: 100 '
                       'mean_value: 110 mean_value: 120 } ' + GT + AUG, phase=caffe_pb2.TRAIN)
    bottom, top = make_blobs([img, _labels([(2, 1, 8, 6, 1)])]), make_blobs(2)
    image, grid = run_layer(layer, bottom, top)
    mean = np.array([100.0, 110, 120]).reshape(3, 1, 1)
    np.testing.assert_allclose(image[0], (img[0] - mean)[:, :, ::-1], atol=1e-9)
    # mirrored x = 16 - 2 - 8 - 1 = 5 (the fork's -1)
    np.testing.assert_allclose(grid[0], coverage_label([(5, 1, 8, 6, 1)], _gt_param()))


def test_transformation_train_draws_in_the_fork_order():
    common.set_random_seed(7)
    layer = make_layer('type: "DetectNetTransformation" ' + GT + ' detectnet_augmentation_param { '
                       'crop_prob: 1 shift_x: 4 shift_y: 2 scale_prob: 1 scale_min: 0.5 '
                       'scale_max: 1.5 flip_prob: 0.5 rotation_prob: 1 max_rotate_degree: 5 '
                       'hue_rotation_prob: 1 hue_rotation: 30 desaturation_prob: 1 '
                       'desaturation_max: 0.5 }', phase=caffe_pb2.TRAIN)
    layer.setup(make_blobs([np.zeros((1, 3, 20, 40)), _labels([])]), make_blobs(2))
    aug = layer.augmentations(40, 20)
    u = np.random.default_rng(7).random(12)
    hue, sat = (u[1] - 0.5) * 60, 1 - u[3] * 0.5
    scale = 0.5 + u[6]
    size = (int(np.floor(40 * scale + 0.5)), int(np.floor(20 * scale + 0.5)))
    angle = (u[8] - 0.5) * 10
    from caffepy.forks.nvcaffe.detectnet_transform import rotated_size
    w, h = rotated_size(size[0], size[1], angle)
    crop = (int(np.floor(u[10] * (w - 16 + 4) - 2 + 0.5)),
            int(np.floor(u[11] * (h - 8 + 2) - 1 + 0.5)))
    assert aug[:2] == pytest.approx((hue, sat)) and aug[2] == (u[4] <= 0.5)
    assert aug[3] == size and aug[4] == pytest.approx(angle) and aug[5] == crop
    rng = np.random.default_rng(2)
    img, boxes = rng.uniform(0, 255, (20, 40, 3)), np.array([[10.0, 5, 8, 6, 1]])
    out = layer.transform_image(img, aug)
    assert out.shape == (8, 16, 3) and np.isfinite(out).all()
    moved = layer.transform_boxes(boxes, aug, 40, 20)
    assert moved[0, 2] == pytest.approx(8 * size[0] / 40) and moved[0, 4] == 1


def test_cvops_match_opencv():
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(3)
    img = rng.random((9, 12, 3)).astype(np.float32)
    for w, h in [(17, 5), (5, 13)]:
        np.testing.assert_allclose(cvops.resize_cubic(img, w, h),
                                   cv2.resize(img, (w, h), interpolation=cv2.INTER_CUBIC),
                                   atol=1e-5)
    hsv = cv2.cvtColor(img, cv2.COLOR_BGR2HSV)
    np.testing.assert_allclose(cvops.bgr_to_hsv(img.astype(np.float64)), hsv, atol=1e-4)
    hsv[..., 0] += 250
    hsv[..., 1] *= 0.6
    np.testing.assert_allclose(cvops.hsv_to_bgr(hsv.astype(np.float64)),
                               cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR), atol=1e-5)
    m = rotation_matrix(12, 9, 4.0)
    src = cv2.boxPoints(((6.0, 4.5), (12, 9), 0.0))
    x, y, _, _ = cvops.rotated_bounds(6.0, 4.5, 12, 9, 4.0)
    dst = cv2.boxPoints(((6.0 - x, 4.5 - y), (12, 9), 4.0))
    np.testing.assert_allclose(m, cv2.getAffineTransform(src[:3], dst[:3]), atol=1e-5)
    smooth = np.stack(np.meshgrid(np.linspace(0, 1, 12), np.linspace(0, 1, 9)) * 2, -1)[..., :3]
    smooth = smooth.astype(np.float32)
    ours = cvops.warp_affine_transparent(smooth, m, 14, 11)
    theirs = cv2.warpAffine(smooth, m, (14, 11), np.zeros((11, 14, 3), np.float32),
                            cv2.INTER_LINEAR, cv2.BORDER_TRANSPARENT)
    np.testing.assert_allclose(ours, theirs, atol=5e-3)     # fixed-point rounding: a 1/32 step


def test_score_detections_and_map_hand_case():
    from caffepy.forks.nvcaffe.detectnet import ScoreDetections, mAP
    gt, det = np.zeros((1, 50, 5)), np.zeros((1, 50, 5))
    gt[0, :2, :4] = [[0, 0, 10, 10], [20, 20, 30, 30]]
    det[0, :3] = [[50, 50, 60, 60, 3.0], [0, 0, 10, 9, 2.0], [0, 0, 10, 10, 1.0]]
    bottom, top = make_blobs([gt, det]), make_blobs(1)
    score = ScoreDetections()
    score.reshape(bottom, top)
    score.forward(bottom, top)
    # gt 0 takes the first detection with IoU >= 0.7 (0.9); gt 1 is missed
    np.testing.assert_allclose(top[0].data[0, :4], [[0, 0, 10, 9, 1], [50, 50, 60, 60, 2],
                                                     [0, 0, 10, 10, 2], [20, 20, 30, 30, 3]])
    assert not top[0].data[0, 4:].any()
    tops = make_blobs(3)
    m = mAP()
    m.reshape(top, tops)
    m.forward(top, tops)
    precision, recall = 100 / 3, 50.0
    np.testing.assert_allclose([t.data[0] for t in tops],
                               [precision * recall / 100, precision, recall])


DETECTNET = """name: "detectnet_small"
layer { name: "data" type: "Input" top: "data" top: "label" include { phase: TRAIN }
  input_param { shape { dim: 1 dim: 3 dim: 40 dim: 72 } shape { dim: 1 dim: 1 dim: 4 dim: 16 } } }
layer { name: "val_data" type: "Input" top: "data" top: "label" include { phase: TEST stage: "val" }
  input_param { shape { dim: 1 dim: 3 dim: 32 dim: 64 } shape { dim: 1 dim: 1 dim: 4 dim: 16 } } }
layer { name: "train_transform" type: "DetectNetTransformation" bottom: "data" bottom: "label"
  top: "transformed_data" top: "transformed_label"
  detectnet_groundtruth_param { stride: 8 scale_cvg: 0.4 gridbox_type: GRIDBOX_MIN
    coverage_type: RECTANGULAR min_cvg_len: 8 obj_norm: true image_size_x: 64 image_size_y: 32
    crop_bboxes: true object_class { src: 1 dst: 0 } }
  detectnet_augmentation_param { crop_prob: 1 shift_x: 8 shift_y: 8 flip_prob: 0.5
    rotation_prob: 0 max_rotate_degree: 5 scale_prob: 0.4 scale_min: 0.8 scale_max: 1.2
    hue_rotation_prob: 0.8 hue_rotation: 30 desaturation_prob: 0.8 desaturation_max: 0.8 }
  transform_param { mean_value: 127 } include { phase: TRAIN } }
layer { name: "val_transform" type: "DetectNetTransformation" bottom: "data" bottom: "label"
  top: "transformed_data" top: "transformed_label"
  detectnet_groundtruth_param { stride: 8 scale_cvg: 0.4 gridbox_type: GRIDBOX_MIN
    coverage_type: RECTANGULAR min_cvg_len: 8 obj_norm: true image_size_x: 64 image_size_y: 32
    crop_bboxes: false object_class { src: 1 dst: 0 } }
  transform_param { mean_value: 127 } include { phase: TEST stage: "val" } }
layer { name: "slice-label" type: "Slice" bottom: "transformed_label" top: "foreground-label"
  top: "bbox-label" top: "size-label" top: "obj-label" top: "coverage-label"
  slice_param { slice_dim: 1 slice_point: 1 slice_point: 5 slice_point: 7 slice_point: 8 } }
layer { name: "coverage-block" type: "Concat" bottom: "foreground-label" bottom: "foreground-label"
  bottom: "foreground-label" bottom: "foreground-label" top: "coverage-block" concat_param { concat_dim: 1 } }
layer { name: "size-block" type: "Concat" bottom: "size-label" bottom: "size-label" top: "size-block"
  concat_param { concat_dim: 1 } }
layer { name: "obj-block" type: "Concat" bottom: "obj-label" bottom: "obj-label" bottom: "obj-label"
  bottom: "obj-label" top: "obj-block" concat_param { concat_dim: 1 } }
layer { name: "bb-label-norm" type: "Eltwise" bottom: "bbox-label" bottom: "size-block"
  top: "bbox-label-norm" eltwise_param { operation: PROD } }
layer { name: "bb-obj-norm" type: "Eltwise" bottom: "bbox-label-norm" bottom: "obj-block"
  top: "bbox-obj-label-norm" eltwise_param { operation: PROD } }
layer { name: "conv1" type: "Convolution" bottom: "transformed_data" top: "conv1"
  convolution_param { num_output: 8 kernel_size: 3 stride: 2 pad: 1 weight_filler { type: "xavier" }
    bias_filler { type: "constant" value: 0.2 } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
  convolution_param { num_output: 8 kernel_size: 3 stride: 2 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
layer { name: "cvg/classifier" type: "Convolution" bottom: "conv2" top: "cvg/classifier"
  convolution_param { num_output: 1 kernel_size: 1 weight_filler { type: "xavier" std: 0.03 } } }
layer { name: "coverage/sig" type: "Sigmoid" bottom: "cvg/classifier" top: "coverage" }
layer { name: "bbox/regressor" type: "Convolution" bottom: "conv2" top: "bboxes"
  convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "xavier" std: 0.03 } } }
layer { name: "bbox_mask" type: "Eltwise" bottom: "bboxes" bottom: "coverage-block"
  top: "bboxes-masked" eltwise_param { operation: PROD } }
layer { name: "bbox-norm" type: "Eltwise" bottom: "bboxes-masked" bottom: "size-block"
  top: "bboxes-masked-norm" eltwise_param { operation: PROD } }
layer { name: "bbox-obj-norm" type: "Eltwise" bottom: "bboxes-masked-norm" bottom: "obj-block"
  top: "bboxes-obj-masked-norm" eltwise_param { operation: PROD } }
layer { name: "bbox_loss" type: "L1Loss" bottom: "bboxes-obj-masked-norm"
  bottom: "bbox-obj-label-norm" top: "loss_bbox" loss_weight: 2 }
layer { name: "coverage_loss" type: "EuclideanLoss" bottom: "coverage" bottom: "coverage-label"
  top: "loss_coverage" }
layer { type: 'Python' name: 'cluster' bottom: 'coverage' bottom: 'bboxes' top: 'bbox-list'
  python_param { module: 'caffe.layers.detectnet.clustering' layer: 'ClusterDetections'
    param_str: '64, 32, 8, 0.6, 3, 0.02, 22, 1' } include: { phase: TEST } }
layer { type: 'Python' name: 'cluster_gt' bottom: 'coverage-label' bottom: 'bbox-label'
  top: 'bbox-list-label' python_param { module: 'caffe.layers.detectnet.clustering'
    layer: 'ClusterGroundtruth' param_str: '64, 32, 8, 1' } include: { phase: TEST stage: "val" } }
layer { type: 'Python' name: 'score' bottom: 'bbox-list-label' bottom: 'bbox-list'
  top: 'bbox-list-scored' python_param { module: 'caffe.layers.detectnet.mean_ap'
    layer: 'ScoreDetections' } include: { phase: TEST stage: "val" } }
layer { type: 'Python' name: 'mAP' bottom: 'bbox-list-scored' top: 'mAP' top: 'precision'
  top: 'recall' python_param { module: 'caffe.layers.detectnet.mean_ap' layer: 'mAP'
    param_str: '64, 32, 8' } include: { phase: TEST stage: "val" } }
"""


def _feed(net, shape):
    net.blobs["data"].data[...] = np.random.default_rng(4).uniform(0, 255, shape)
    net.blobs["label"].data[...] = _labels([(20, 8, 24, 16, 1), (2, 2, 10, 12, 1)])


@pytest.mark.slow
def test_detectnet_net_train_step_and_val_stage(caplog):
    common.set_random_seed(0)                  # the weights' fillers
    net = Net(DETECTNET, phase=caffe_pb2.TRAIN)
    _feed(net, (1, 3, 40, 72))

    def loss():
        common.set_random_seed(11)          # the same augmentation draws each time
        out = net.forward()
        return float(2 * out["loss_bbox"] + out["loss_coverage"])      # the loss weights
    before = loss()
    assert net.blobs["transformed_label"].data[0, 0].any()
    net.backward()
    for p in net.learnable_params:
        p.data[...] -= 1e-4 * p.diff          # raw 0..255 pixels: large gradients
    assert loss() < before
    with caplog.at_level(logging.WARNING, logger="caffepy"):
        val = Net(DETECTNET, phase=caffe_pb2.TEST, stages=["val"])
    assert "mean_ap" in caplog.text and "ScoreDetections" in caplog.text
    _feed(val, (1, 3, 32, 64))
    out = val.forward()
    assert val.blobs["bbox-list"].data.shape == (1, 50, 5)
    labelled = val.blobs["bbox-list-label"].data[0]
    np.testing.assert_allclose(labelled[:2, :4], [[2, 2, 12, 14], [20, 8, 44, 24]])   # cell order
    assert 0 <= float(out["recall"][0]) <= 100 and out["mAP"].shape == (1,)


def test_transform_image_matches_the_fork_steps_in_opencv():
    """NVCaffe's transform_image_cpu written with OpenCV's own calls (HSV, flip, bicubic resize,
    warpAffine onto the turned canvas, crop) against caffepy's for one set of augmentations."""
    cv2 = pytest.importorskip("cv2")
    layer = make_layer('type: "DetectNetTransformation" transform_param { mean_value: 127 } ' + GT,
                       phase=caffe_pb2.TRAIN)
    layer.setup(make_blobs([np.zeros((1, 3, 20, 40)), _labels([])]), make_blobs(2))
    hue, sat, size, angle, (cx, cy) = 12.0, 0.7, (46, 23), 3.0, (7, -2)
    img = np.random.default_rng(10).uniform(0, 255, (20, 40, 3)).astype(np.float32)
    ours = layer.transform_image(img.astype(np.float64), (hue, sat, True, size, angle, (cx, cy)))
    x = img / 255.0
    hsv = cv2.cvtColor(x, cv2.COLOR_BGR2HSV)
    hsv[..., 0] += hue
    hsv[..., 1] *= sat
    x = cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR) - np.float32(127 / 255.0)
    x = cv2.resize(cv2.flip(x, 1), size, interpolation=cv2.INTER_CUBIC)
    h, w = x.shape[:2]
    src = cv2.boxPoints(((w / 2, h / 2), (w, h), 0.0))
    turned = cv2.boxPoints(((w / 2, h / 2), (w, h), angle))
    x0, y0 = np.floor(turned.min(0))
    dst = cv2.boxPoints(((w / 2 - x0, h / 2 - y0), (w, h), angle))
    (cw, ch) = rotated_canvas = tuple(int(v) for v in np.ceil(
        cv2.boxPoints(((w // 2, h // 2), (w, h), angle)).max(0))
        - np.floor(cv2.boxPoints(((w // 2, h // 2), (w, h), angle)).min(0)) + 1)
    x = cv2.warpAffine(x, cv2.getAffineTransform(src[:3], dst[:3]), rotated_canvas,
                       np.zeros((ch, cw, 3), np.float32), cv2.INTER_LINEAR, cv2.BORDER_TRANSPARENT)
    out = np.zeros((8, 16, 3), np.float32)
    ys, xs = max(cy, 0), max(cx, 0)
    out[ys - cy:min(cy + 8, ch) - cy, xs - cx:min(cx + 16, cw) - cx] = \
        x[ys:min(cy + 8, ch), xs:min(cx + 16, cw)]
    # warpAffine's fixed-point coordinates: a few pixels differ by up to a 1/32 pixel step of
    # this noise image's slope (< 255 / 32); the rest agree to float rounding
    np.testing.assert_allclose(ours, out * 255, atol=255 / 32)
    assert np.abs(ours - out * 255).mean() < 0.1
