"""Key-point heat-map reader, loss and accuracy of hhy5277/car_keypoint_caffe (src/caffe/layers/
heatmap_data_layer.cpp, keypoint_L2_loss_layer.cpp, keypoint_acc_layer.cpp): HeatmapData,
KeypointL2Loss and KeypointAcc.

Its ``heatmap_data_param`` shares the message name with Pfister's (RMPE's DataHeatmap,
:mod:`caffepy.forks.pose.rmpe`); caffe.proto declares both forks' fields in one message, and
each reader refuses the fields it does not read (:func:`refuse_unread`).
"""
import numpy as np

from ... import common
from ...data.datum import read_mean
from ...data.image import read_image, resize_bilinear
from ...data.state import ListLoaderState
from ...errors import CaffeError, ShapeError
from ...proto import caffe_pb2
from ...proto.harvest_policy import unread_fields
from ...layers.base import Layer, LossLayer, register_layer
from ...layers.data import BasePrefetchingDataLayer

SIGMA = 2.0          # generate_hm: sigma = 2 (hard-coded in the fork)
FLOOR = 1e-4         # generate_hm: values <= 1e-4 stay 0

# heatmap_data_param fields this reader reads; ``backend``, ``prefetch``, ``force_color``,
# ``force_gray`` and ``random_crop`` are declared by the fork and never read by its
# HeatmapDataLayer (heatmap_data_layer.cpp reads only the fields below), so they are accepted.
READ = frozenset(["source", "batch_size", "new_height", "new_width", "scale", "mean_file",
                  "crop_size", "rotation", "max_angle", "mirror", "label_size", "mean_value",
                  "coordinate_num", "rand_skip", "shuffle", "is_color", "root_folder",
                  "mirror_pairs", "backend", "prefetch", "force_color", "force_gray",
                  "random_crop"])


def refuse_unread(layer, msg, read, where):
    """Raise the layer's error naming the first field of ``msg`` set to a non-default value that
    ``read`` does not list (the other fork's field of a message two forks share)."""
    unread = unread_fields(msg, read)
    if unread:
        raise layer.error("%s.%s is not read by %s (a field of another fork's reader of the "
                          "same parameter message)" % (where, unread[0], layer.layer_param.type))


def top_shapes(lp, default_shape, batch_size=None):
    """HeatmapData's tops (DataLayerSetUp): data N x C x S_h x S_w (C 3, 1 when is_color is
    false; S = crop_size x crop_size when set, else new_height x new_width), heat maps
    N x coordinate_num x label_size x label_size. For caffepy.zoo's data-layer substitution."""
    p = lp.heatmap_data_param
    n = int(batch_size) if batch_size is not None else int(p.batch_size or 1)
    c = 3 if p.is_color else 1
    if p.crop_size:
        h = w = int(p.crop_size)
    elif p.new_height and p.new_width:
        h, w = int(p.new_height), int(p.new_width)
    else:
        h, w = default_shape[1:]
    shapes = [(n, c, h, w), (n, int(p.coordinate_num), int(p.label_size), int(p.label_size))]
    return shapes[:len(lp.top)]


def heatmaps(points, size, dtype=np.float32):
    """generate_hm: one label_size x label_size map per point (x, y in map pixels):
    exp(-((i - y)^2 + (j - x)^2) / (2 sigma^2)) where above 1e-4, else 0; all -1 for a point
    marked missing (x < 0 or y < 0)."""
    rows, cols = np.arange(size)[:, None], np.arange(size)[None, :]
    out = np.zeros((len(points), size, size), dtype)
    for k, (x, y) in enumerate(points):
        if x < 0 or y < 0:
            out[k] = -1
            continue
        g = np.exp(-0.5 * ((rows - y) ** 2 + (cols - x) ** 2) / SIGMA ** 2)
        out[k] = np.where(g > FLOOR, g, 0)
    return out


def _round(v):
    return int(np.floor(v + 0.5)) if v >= 0 else -int(np.floor(-v + 0.5))   # roundf


class _Loader(ListLoaderState):
    def __init__(self, layer):
        p = layer.layer_param.heatmap_data_param
        self.p, self.dtype, self.what, self.phase = p, layer.dtype, layer.describe(), layer.phase
        self.k = int(p.coordinate_num)
        self.rng = np.random.default_rng(int(common.rng().integers(0, 2 ** 63)))
        self.read_lines(p.source, 1 + 2 * self.k,
                        "'<image> x1 y1 ... x%d y%d' (coordinate_num points)" % (self.k, self.k))
        self.pairs = []
        for text in p.mirror_pairs:
            parts = [s for s in text.replace(",", " ").split() if s]
            if len(parts) != 2:
                raise CaffeError("mirror_pairs \"%s\": must have two elements" % text)
            a, b = int(parts[0]), int(parts[1])
            if not (0 <= a < self.k and 0 <= b < self.k):
                raise CaffeError("mirror_pairs \"%s\": indices must be in [0, %d)" % (text, self.k))
            self.pairs.append((a, b))
        self.mean = read_mean(p.mean_file) if p.HasField("mean_file") else None
        means = list(p.mean_value)
        if means and self.mean is not None:
            raise CaffeError("cannot specify mean_file and mean_value at the same time")
        self.means = means
        if p.shuffle:
            self.shuffle_lines()
        self.pos = int(common.rng().integers(0, p.rand_skip)) if p.rand_skip else 0
        if self.pos >= len(self.lines):
            raise CaffeError("not enough points to skip (rand_skip %d, %d lines)"
                             % (p.rand_skip, len(self.lines)))

    def _size(self):
        p = self.p
        return (int(p.crop_size),) * 2 if p.crop_size else (int(p.new_height), int(p.new_width))

    def data_shape(self):
        p = self.p
        return (int(p.batch_size), 3 if p.is_color else 1) + self._size()

    def _item(self, line, data, label):
        """transform_data_label for one list line (no rotation: refused at setup)."""
        p = self.p
        path = p.root_folder + line[0]
        src = read_image(path, 0, 0, p.is_color)
        img = resize_bilinear(src, int(p.new_height), int(p.new_width))
        sx, sy = np.float32(img.shape[1]) / src.shape[1], np.float32(img.shape[0]) / src.shape[0]
        h, w = self._size()
        ih, iw = img.shape[:2]
        if p.crop_size:
            if self.phase == caffe_pb2.TRAIN:
                h_off = int(self.rng.integers(0, ih - h + 1))
                w_off = int(self.rng.integers(0, iw - w + 1))
            else:
                h_off, w_off = (ih - h) // 2, (iw - w) // 2
        else:
            h_off = w_off = 0
        mirror = bool(p.mirror) and bool(self.rng.integers(0, 2))
        x = img[h_off:h_off + h, w_off:w_off + w].transpose(2, 0, 1).astype(np.float32)
        if self.mean is not None:
            if self.mean.shape != (x.shape[0], ih, iw):
                raise CaffeError("mean_file %s has shape %s, the images are %s"
                                 % (p.mean_file, self.mean.shape, (x.shape[0], ih, iw)))
            x = x - self.mean[:, h_off:h_off + h, w_off:w_off + w]
        elif self.means:
            if len(self.means) not in (1, x.shape[0]):
                raise CaffeError("specify either 1 mean_value or as many as channels: %d"
                                 % x.shape[0])
            x = x - np.asarray(self.means * (x.shape[0] if len(self.means) == 1 else 1),
                               np.float32)[:, None, None]
        x = x * np.float32(p.scale)
        data[...] = x[:, :, ::-1] if mirror else x
        pts = []
        for i in range(self.k):
            xo, yo = int(float(line[1 + 2 * i])), int(float(line[2 + 2 * i]))
            px = _round(xo * sx) - w_off if xo > 0 else -1
            py = _round(yo * sy) - h_off if yo > 0 else -1
            pts.append((px, py) if 0 <= px < w and 0 <= py < h else (-1, -1))
        if mirror:
            pts = [(w - 1 - px, py) if px != -1 and py != -1 else (px, py) for px, py in pts]
            for a, b in self.pairs:
                pts[a], pts[b] = pts[b], pts[a]
        size = int(p.label_size)
        fw, fh = np.float32(size) / w, np.float32(size) / h
        hm = [(px, py) if px < 0 or py < 0 else (_round(fw * px), _round(fh * py))
              for px, py in pts]
        label[...] = heatmaps(hm, size, label.dtype)

    def load_batch(self, buf):
        n, c, h, w = self.data_shape()
        s = int(self.p.label_size)
        data = buf.get("data")
        if data is None or data.shape != (n, c, h, w):
            data = buf["data"] = np.zeros((n, c, h, w), self.dtype)
        label = buf.get("label")
        if label is None or label.shape != (n, self.k, s, s):
            label = buf["label"] = np.zeros((n, self.k, s, s), self.dtype)
        for b in range(n):
            line = self.lines[self.pos]
            try:
                self._item(line, data[b], label[b])
            except (OSError, ValueError) as e:
                raise CaffeError("%s: %s" % (line[0], e))
            self.pos += 1
            if self.pos >= len(self.lines):
                self.pos = 0
                if self.p.shuffle:
                    self.shuffle_lines()


@register_layer("HeatmapData")
class HeatmapDataLayer(BasePrefetchingDataLayer):
    """Images and Gaussian key-point heat maps (hhy5277/car_keypoint_caffe,
    src/caffe/layers/heatmap_data_layer.cpp).

    ``source`` lines: ``<image> x1 y1 x2 y2 ... xK yK`` (K = coordinate_num; integer pixel
    coordinates of the original image, <= 0 for a missing point). Each image (root_folder +
    name; gray when is_color is false) is resized to new_width x new_height (both required,
    bilinear), cropped to crop_size x crop_size when set (TRAIN: random offset, TEST: centred),
    mirrored with probability 1/2 when ``mirror``, then (pixel - mean) * scale, the mean from
    mean_file (the resized image's size, indexed before the crop) or mean_value (1 or C
    values). A point follows the resize (rounded), the crop and the mirror (x -> w - 1 - x,
    then the ``mirror_pairs`` "a,b" swapped, indices from 0); one outside the crop is missing.
    Heat map k (label_size x label_size, the point scaled by label_size / w and label_size / h,
    rounded): exp(-((i - y)^2 + (j - x)^2) / (2 * 2^2)) where > 1e-4, else 0; a missing
    point's map is all -1 (KeypointAcc skips it). ``shuffle`` reshuffles at every pass,
    ``rand_skip`` skips a random number of lines at start.
    prototxt: ``heatmap_data_param { source root_folder batch_size new_height new_width
    crop_size label_size coordinate_num mirror mirror_pairs mean_file mean_value scale shuffle
    rand_skip is_color }``; ``rotation: true`` (the fork's random warpAffine) is refused.
    Tops: data (N x C x S x S or N x C x new_height x new_width), heat maps (N x K x
    label_size x label_size).
    """
    exact_num_top_blobs = 2
    min_top_blobs = max_top_blobs = None

    def prefetch_count(self):
        return 2

    def make_loader(self, top):
        p = self.layer_param.heatmap_data_param
        refuse_unread(self, p, READ, "heatmap_data_param")
        if p.rotation:
            raise self.error("heatmap_data_param.rotation (random rotation) is not supported")
        if not (p.new_height > 0 and p.new_width > 0):
            raise self.error("heatmap_data_param: both new_width and new_height must be > 0")
        if p.new_height < p.crop_size or p.new_width < p.crop_size:
            raise self.error("heatmap_data_param: new_width and new_height must be >= crop_size")
        if p.batch_size < 1 or p.coordinate_num < 1 or p.label_size < 1:
            raise self.error("heatmap_data_param: batch_size, coordinate_num and label_size must "
                             "be positive")
        try:
            return _Loader(self)
        except CaffeError as e:
            raise self.error(str(e))

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        p = self.layer_param.heatmap_data_param
        top[1].reshape((p.batch_size, p.coordinate_num, p.label_size, p.label_size))


@register_layer("KeypointL2Loss")
class KeypointL2LossLayer(LossLayer):
    """Half squared error over the visible key points' maps (hhy5277/car_keypoint_caffe,
    src/caffe/layers/keypoint_L2_loss_layer.cpp):

        d = x - t, zeroed on every map (n, k) whose target's first value t[n, k, 0, 0] < 0
        (HeatmapData's -1 map of a missing point);
        loss = sum d^2 / (2 N);   dL/dx = g d / N,   dL/dt = -g d / N

    (g: the top's diff, N: the batch). Bottoms: x, t (N x K x H x W each); both take a gradient
    (force_backward allowed on either, as in the fork). Top: loss.
    """
    exact_num_bottom_blobs = 2

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        if bottom[0].num_axes < 2 or bottom[0].shape != bottom[1].shape:
            raise self.shape_mismatch("prediction and target maps differ", 0, 1, bottom)

    def allow_force_backward(self, bottom_index):
        return True

    def forward_cpu(self, bottom, top):
        x, t = bottom[0].data, bottom[1].data
        n, k = x.shape[:2]
        d = (x - t).reshape(n, k, -1)
        d[t.reshape(n, k, -1)[:, :, 0] < 0] = 0
        self.diff = d.reshape(x.shape)
        top[0].data[...] = np.sum(self.diff * self.diff) / n / 2

    def backward_cpu(self, top, propagate_down, bottom):
        g = float(top[0].diff) / bottom[0].shape[0]
        for i, sign in ((0, 1.0), (1, -1.0)):
            if propagate_down[i]:
                bottom[i].diff[...] = sign * g * self.diff


@register_layer("KeypointAcc")
class KeypointAccLayer(Layer):
    """Fraction of visible key points located within ``metric`` (hhy5277/car_keypoint_caffe,
    src/caffe/layers/keypoint_acc_layer.cpp).

    Bottoms: predicted maps x and target maps t (N x K x H x W each). A point (n, k) is visible
    when t[n, k, 0, 0] != -1 (|t + 1| > 1e-6). For it, p and g are the first argmax of x[n, k]
    and t[n, k] over H x W, as (col / W, row / H); it is correct when |p - g|^2 < metric^2.
    Top 0: correct / visible (0 when none is visible); optional top 1 (K): per point k the
    same ratio over the batch. ``keypoint_acc_param { metric: 0.05 }`` (``axis`` is declared
    by the fork and not read). No backward.
    """
    exact_num_bottom_blobs = 2
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        self.metric = float(self.layer_param.keypoint_acc_param.metric)

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4 or bottom[1].num_axes != 4:
            raise self.error("both bottoms must have 4 axes, got %s and %s"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        if bottom[0].shape != bottom[1].shape:
            raise self.shape_mismatch("prediction and target maps differ", 0, 1, bottom)
        top[0].reshape(())
        if len(top) > 1:
            top[1].reshape((bottom[0].shape[1],))

    def allow_force_backward(self, bottom_index):
        return False

    def forward_cpu(self, bottom, top):
        n, k, h, w = bottom[0].shape
        x = bottom[0].data.reshape(n, k, h * w)
        t = bottom[1].data.reshape(n, k, h * w)
        visible = np.abs(t[:, :, 0].astype(np.float64) + 1) > 1e-6
        pi, gi = np.argmax(x, axis=2), np.argmax(t, axis=2)
        f32 = np.float32
        d2 = (((pi % w).astype(f32) / f32(w) - (gi % w).astype(f32) / f32(w)) ** 2
              + ((pi // w).astype(f32) / f32(h) - (gi // w).astype(f32) / f32(h)) ** 2)
        hit = visible & (d2 < f32(self.metric) * f32(self.metric))   # in the fork's float
        count = int(visible.sum())
        top[0].data[...] = hit.sum() / count if count else 0
        if len(top) > 1:
            per, seen = hit.sum(axis=0), visible.sum(axis=0)
            top[1].data[...] = np.where(seen > 0, per / np.maximum(seen, 1), 0)
