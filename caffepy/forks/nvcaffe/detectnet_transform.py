"""NVIDIA Caffe's DetectNet data transformation: ``DetectNetTransformation``.

Facts from NVCaffe's ``detectnet_transform_layer.cpp`` and ``detectnet_coverage_rectangular.cpp``;
OpenCV's image operations are in ``caffepy/data/cvops.py``.
"""
import math

import numpy as np

from ...data import cvops
from ...data.datum import read_mean
from ...layers.base import Layer, register_layer

LABEL_ROW = 16          # BboxLabel: x, y, w, h, alpha, class, scenario, roty, truncated, ...
GRID_CHANNELS = 8       # foreground, xl, yt, xr, yb, 1/w, 1/h, obj_norm


def _round(x):
    """C's round(): halves away from zero."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def _intersect(a, b):
    """cv::Rect_ intersection of (x, y, w, h) boxes; an empty one is all zeros."""
    x0, y0 = max(a[0], b[0]), max(a[1], b[1])
    w, h = min(a[0] + a[2], b[0] + b[2]) - x0, min(a[1] + a[3], b[1] + b[3]) - y0
    return (x0, y0, w, h) if w > 0 and h > 0 else (0.0, 0.0, 0.0, 0.0)


def coverage_label(boxes, g):
    """The (8 + K) x Gy x Gx ground-truth grid of NVCaffe's RectangularCoverageGenerator.

    ``boxes``: rows (x, y, w, h, class) in the output image's pixels; ``g``: the
    DetectNetGroundTruthParameter. Classes map through ``object_class`` src -> dst (none: class
    1 -> 0), K = max dst + 1, boxes of other classes are dropped; with ``crop_bboxes`` a box is
    cut to the image first; empty boxes are dropped. Each box's coverage rectangle keeps its
    centre with sides s = ``scale_cvg`` x side, then GRIDBOX_MIN: min(side, max(min_cvg_len, s)),
    GRIDBOX_MAX: min(max_cvg_len, s). Every cell (``stride`` pixels square) that rectangle
    overlaps by more than FLT_EPSILON of a cell gets, later boxes overwriting earlier ones:
    foreground 1; the box corners relative to the cell's corner; 1 / width, 1 / height;
    obj_norm = max(0 if ``obj_norm`` else 1, stride^2 / coverage area); class coverage 1 at
    channel 8 + dst (the cell's other classes 0).
    """
    mapping = {int(m.src): int(m.dst) for m in g.object_class} or {1: 0}
    stride = float(g.stride)
    gx, gy = _round(g.image_size_x / stride), _round(g.image_size_y / stride)
    out = np.zeros((GRID_CHANNELS + max(mapping.values()) + 1, gy, gx))
    image = (0.0, 0.0, float(g.image_size_x), float(g.image_size_y))
    min_norm = 0.0 if g.obj_norm else 1.0
    for x, y, w, h, cls in boxes:
        box = _intersect((x, y, w, h), image) if g.crop_bboxes else (x, y, w, h)
        if int(cls) not in mapping or box[2] * box[3] < cvops.FLT_EPSILON:
            continue
        x, y, w, h = box
        sw, sh = w * g.scale_cvg, h * g.scale_cvg
        if g.gridbox_type == g.GRIDBOX_MIN:
            sw, sh = min(w, max(g.min_cvg_len, sw)), min(h, max(g.min_cvg_len, sh))
        else:
            sw, sh = min(g.max_cvg_len, sw), min(g.max_cvg_len, sh)
        cover = (x + w / 2 - sw / 2, y + h / 2 - sh / 2, sw, sh)
        area = sw * sh
        norm = max(min_norm, stride * stride / area) if area > 0 else np.inf
        x0 = max(int(math.floor(cover[0] / stride)), 0)
        y0 = max(int(math.floor(cover[1] / stride)), 0)
        x1 = min(int(math.ceil((cover[0] + sw) / stride)), gx)
        y1 = min(int(math.ceil((cover[1] + sh) / stride)), gy)
        for cy in range(y0, y1):
            for cx in range(x0, x1):
                cell = (cx * stride, cy * stride, stride, stride)
                part = _intersect(cover, cell)
                if part[2] * part[3] / (stride * stride) <= cvops.FLT_EPSILON:
                    continue
                ox, oy = cell[0], cell[1]
                out[GRID_CHANNELS:, cy, cx] = 0
                out[GRID_CHANNELS + mapping[int(cls)], cy, cx] = 1
                out[:GRID_CHANNELS, cy, cx] = [1, x - ox, y - oy, x + w - ox, y + h - oy,
                                               1 / w, 1 / h, norm]
    return out


def rotation_matrix(width, height, degrees):
    """DetectNet's getTransformationMatrix: turn a width x height image by ``degrees`` about its
    centre, shifted so that the turned image's bounding rectangle starts at the origin."""
    cx, cy = width * 0.5, height * 0.5
    bx, by, _, _ = cvops.rotated_bounds(cx, cy, width, height, degrees)
    return cvops.affine_from_points(cvops._corners(cx, cy, width, height, 0.0),
                                    cvops._corners(cx - bx, cy - by, width, height, degrees))


def rotated_size(width, height, degrees):
    """DetectNet's getRotatedSize (its centre is an integer point)."""
    return cvops.rotated_bounds(int(0.5 * width), int(0.5 * height), width, height, degrees)[2:]


@register_layer("DetectNetTransformation")
class DetectNetTransformationLayer(Layer):
    """NVCaffe DetectNet's data transformation: images and box lists to the network's input
    image and its ground-truth grid. No backward (as in NVCaffe).

    Bottom 0: N x 3 x H x W images (0..255, BGR). Bottom 1: N x 1 x R x 16 label rows as DIGITS
    writes them: row 0 is a header [count, 16, ...], rows 1..count are KITTI-style BboxLabels
    [x, y, w, h, alpha, class, scenario, roty, truncated, occlusion, dims (3), location (3)]
    (pixels of the input image; only x, y, w, h and class are read).
    Top 0: N x 3 x image_size_y x image_size_x; top 1: N x (8 + K) x Gy x Gx (see
    :func:`coverage_label`; Gx = round(image_size_x / stride)).

    Per image, in NVCaffe's order: x / 255; hue rotation and desaturation in HSV; minus
    ``mean_value`` / 255 (one value or three); mirror; bicubic resize to the scale; rotation
    (bilinear, grown canvas); crop to image_size at the crop offset (zeros outside); x 255.
    Boxes follow: mirror x' = W - x - w - 1 (the fork's -1), scale, rotate the centre, shift by
    the crop offset. TEST: no augmentation, the image is resized to image_size, offset 0.
    TRAIN draws u ~ U[0, 1] in this order: u <= hue_rotation_prob then hue = (u - 0.5) 2
    hue_rotation (clamped to +-180); u <= desaturation_prob then saturation = 1 - u
    desaturation_max; flip = u <= flip_prob; u <= scale_prob then scale = scale_min + (scale_max -
    scale_min) u (size rounded); u <= rotation_prob then angle = (u - 0.5) 2 max_rotate_degree;
    u <= crop_prob then px, py ~ U and shifts shift_x, shift_y, else 0.5, 0.5 and 0; offset =
    round(px (W' - image_size_x + shift_x) - shift_x div 2) with W' the scaled (rotated) width.

    prototxt: ``detectnet_groundtruth_param { stride: 4 scale_cvg: 0.5 gridbox_type: GRIDBOX_MAX
    max_cvg_len: 50 min_cvg_len: 50 coverage_type: RECTANGULAR image_size_x: 1248 image_size_y:
    384 obj_norm: false crop_bboxes: true object_class { src dst } }``,
    ``detectnet_augmentation_param { crop_prob: 1 shift_x: 0 shift_y: 0 scale_prob: 0.33
    scale_min: 0.7 scale_max: 1 flip_prob: 0.33 rotation_prob: 0.33 max_rotate_degree: 1
    hue_rotation_prob: 0.33 hue_rotation: 15 desaturation_prob: 0.33 desaturation_max: 0.5 }``,
    ``transform_param { mean_value | mean_file }`` (the mean image is resized bicubically to the
    input images' size, as NVCaffe does, and subtracted per pixel before any flip or scaling).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 2

    def layer_setup(self, bottom, top):
        self.g = self.layer_param.detectnet_groundtruth_param
        self.a = self.layer_param.detectnet_augmentation_param
        t = self.layer_param.transform_param
        self.mean_image, self._mean_sized = None, {}
        if t.HasField("mean_file"):
            self.mean_image = read_mean(t.mean_file).astype(np.float64).transpose(1, 2, 0)
            if self.mean_image.shape[2] != 3:
                raise self.error("mean_file %s has %d channels; DetectNet needs 3"
                                 % (t.mean_file, self.mean_image.shape[2]))
        elif len(t.mean_value) not in (0, 1, 3):
            raise self.error("transform_param.mean_value needs 1 or 3 values, got %d"
                             % len(t.mean_value))
        self.mean = (np.resize(np.asarray(t.mean_value, np.float64), 3) / 255.0
                     if len(t.mean_value) else None)
        if self.g.stride < 1 or self.g.image_size_x < 1 or self.g.image_size_y < 1:
            raise self.error("detectnet_groundtruth_param stride and image sizes must be >= 1")
        self.channels = coverage_label([], self.g).shape

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4 or bottom[0].shape[1] != 3:
            raise self.error("bottom[0] must be N x 3 x H x W images, got %s" % (bottom[0].shape,))
        if bottom[1].shape[0] != bottom[0].shape[0] or bottom[1].count % (
                bottom[1].shape[0] * LABEL_ROW):
            raise self.error("bottom[1] must hold rows of %d label values for each of the %d "
                             "images, got %s" % (LABEL_ROW, bottom[0].shape[0], bottom[1].shape))
        n = bottom[0].shape[0]
        top[0].reshape(n, 3, self.g.image_size_y, self.g.image_size_x)
        top[1].reshape((n,) + self.channels)

    def _boxes(self, rows, b):
        count, length = int(rows[0, 0]), int(rows[0, 1])
        if length != LABEL_ROW or not 0 <= count < len(rows):
            raise self.error("label header of image %d says %d boxes of %d values; expected "
                             "at most %d boxes of %d"
                             % (b, count, length, len(rows) - 1, LABEL_ROW))
        return rows[1:1 + count][:, [0, 1, 2, 3, 5]].astype(np.float64)

    def augmentations(self, width, height):
        """(hue, saturation, flip, (scaled w, h), angle, (crop x, y)) for one image."""
        g, a = self.g, self.a
        if self.phase != 0:
            return 0.0, 1.0, False, (g.image_size_x, g.image_size_y), 0.0, (0, 0)
        u = self.rng().random
        hue, sat, size, angle = 0.0, 1.0, (width, height), 0.0
        if u() <= a.hue_rotation_prob:
            hue = float(np.clip((u() - 0.5) * 2 * a.hue_rotation, -180.0, 180.0))
        if u() <= a.desaturation_prob:
            sat = 1.0 - u() * a.desaturation_max
        flip = u() <= a.flip_prob
        if u() <= a.scale_prob:
            s = a.scale_min + (a.scale_max - a.scale_min) * u()
            size = (_round(width * s), _round(height * s))
        if u() <= a.rotation_prob:
            angle = (u() - 0.5) * 2 * a.max_rotate_degree
        before = rotated_size(size[0], size[1], angle) if abs(angle) > cvops.FLT_EPSILON else size
        if u() <= a.crop_prob:
            px, py, sx, sy = u(), u(), int(a.shift_x), int(a.shift_y)
        else:
            px, py, sx, sy = 0.5, 0.5, 0, 0
        crop = (_round(px * (before[0] - g.image_size_x + sx) - sx // 2),
                _round(py * (before[1] - g.image_size_y + sy) - sy // 2))
        return hue, sat, flip, size, angle, crop

    def transform_image(self, img, aug):
        """One H x W x 3 image (0..255) to the output's image_size_y x image_size_x x 3."""
        hue, sat, flip, size, angle, (cx, cy) = aug
        img = img / 255.0
        if abs(hue) > cvops.FLT_EPSILON or sat < 1.0 - 1.0 / 255:
            hsv = cvops.bgr_to_hsv(img.astype(np.float32).astype(np.float64))
            if abs(hue) > cvops.FLT_EPSILON:
                hsv[..., 0] += hue
            if sat < 1.0 - 1.0 / 255:
                hsv[..., 1] *= sat
            img = cvops.hsv_to_bgr(hsv)
        if self.mean_image is not None:
            img = img - self._mean_for(img.shape[1], img.shape[0])
        elif self.mean is not None:
            img = img - self.mean
        if flip:
            img = img[:, ::-1]
        if (img.shape[1], img.shape[0]) != tuple(size):
            img = cvops.resize_cubic(img, size[0], size[1])
        if abs(angle) > cvops.FLT_EPSILON:
            w, h = rotated_size(img.shape[1], img.shape[0], angle)
            img = cvops.warp_affine_transparent(
                img, rotation_matrix(img.shape[1], img.shape[0], angle), w, h)
        out = np.zeros((self.g.image_size_y, self.g.image_size_x, 3))
        H, W = img.shape[:2]
        ys, xs = max(cy, 0), max(cx, 0)
        ye, xe = min(cy + out.shape[0], H), min(cx + out.shape[1], W)
        if ye > ys and xe > xs:
            out[ys - cy:ye - cy, xs - cx:xe - cx] = img[ys:ye, xs:xe]
        return out * 255.0

    def _mean_for(self, width, height):
        """The mean image resized (bicubic) to the input image's size, / 255."""
        if (width, height) not in self._mean_sized:
            self._mean_sized[(width, height)] = cvops.resize_cubic(
                self.mean_image, width, height) / 255.0
        return self._mean_sized[(width, height)]

    def transform_boxes(self, boxes, aug, width, height):
        """Rows (x, y, w, h, class) of the input image moved as the image is."""
        _, _, flip, size, angle, (cx, cy) = aug
        boxes = boxes.copy()
        if flip:
            boxes[:, 0] = width - boxes[:, 0] - boxes[:, 2] - 1
        if tuple(size) != (width, height):
            sx, sy = size[0] / float(width), size[1] / float(height)
            boxes[:, [0, 2]] *= sx
            boxes[:, [1, 3]] *= sy
        if abs(angle) > cvops.FLT_EPSILON:
            m = rotation_matrix(size[0], size[1], angle)
            centre = boxes[:, :2] + boxes[:, 2:4] / 2
            turned = centre @ m[:, :2].T + m[:, 2]
            boxes[:, :2] = turned - boxes[:, 2:4] / 2
        boxes[:, 0] -= cx
        boxes[:, 1] -= cy
        return boxes

    def forward_cpu(self, bottom, top):
        n, _, H, W = bottom[0].shape
        labels = bottom[1].data.reshape(n, -1, LABEL_ROW)
        for b in range(n):
            boxes = self._boxes(labels[b], b)
            aug = self.augmentations(W, H)
            img = bottom[0].data[b].transpose(1, 2, 0).astype(np.float64)
            top[0].data[b] = self.transform_image(img, aug).transpose(2, 0, 1)
            top[1].data[b] = coverage_label(self.transform_boxes(boxes, aug, W, H), self.g)

    def backward_cpu(self, top, propagate_down, bottom):
        pass
