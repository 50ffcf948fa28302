"""Heat-map layers of Tomas Pfister's heatmap Caffe as in MVIG-SJTU/RMPE (also CCChenfei/
pose_estimation, curious999/TGPnet): EuclideanLossHeatmap and the DataHeatmap reader, their V1
types EUCLIDEAN_LOSS_HEATMAP and DATA_HEATMAP.
"""
import numpy as np

from ... import common
from ...data.image import read_image, resize_bilinear
from ...data.state import ListLoaderState
from ...errors import CaffeError
from ...layers.base import LossLayer, register_layer
from ...layers.data import BasePrefetchingDataLayer
from .car_keypoint import refuse_unread

# heatmap_data_param fields DataHeatmap reads (the message also holds car_keypoint_caffe's
# HeatmapData fields, and Pfister's meanfile / cropsize / ... that this reader does not read).
READ = frozenset(["source", "root_img_dir", "batchsize", "outsize", "label_width", "label_height",
                  "multfact", "labelinds", "bbox_or_centerscale", "scale_width", "scale_height",
                  "shuffle", "segmentation", "data_augment", "angle_max", "sample_per_cluster"])


@register_layer("EuclideanLossHeatmap")
class EuclideanLossHeatmapLayer(LossLayer):
    """Mean squared error between predicted and target heat maps (MVIG-SJTU/RMPE,
    src/caffe/layers/euclidean_loss_heatmap_layer.cpp):

        loss = sum (x - t)^2 / (N C H W);    dL/dx = 2 g (x - t) / (N C H W)

    (g: the top's diff). The gradient is the loss's: the fork's CPU backward scales by the
    integer 2 / (C H W), which is 0 for any map of more than 2 values, and its GPU backward
    writes 2 (x - t) (no normalisation, no loss weight). The third bottom is the fork's
    visualisation image, not read (``visualise`` / ``visualise_channel`` only open OpenCV
    windows in the fork and are not honoured). Bottoms: x, t (N x C x H x W each), an image.
    Top: loss. Only x receives a gradient.
    """
    exact_num_bottom_blobs = 3

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        if bottom[0].shape[1:] != bottom[1].shape[1:] or bottom[0].num_axes < 2:
            raise self.shape_mismatch("prediction %s and target %s differ"
                                      % (bottom[0].shape, bottom[1].shape), 1, 0, bottom)

    def forward_cpu(self, bottom, top):
        self.diff = bottom[0].data - bottom[1].data
        top[0].data[...] = np.sum(self.diff * self.diff) / self.diff.size

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = 2 * float(top[0].diff) * self.diff / self.diff.size


def _floats(text):
    return [float(s) for s in text.split(",") if s != ""]


class _HeatmapLoader(ListLoaderState):
    """The fork's DataHeatmapLayer::DataLayerSetUp / load_batch (no rotation, no clusters)."""

    def __init__(self, layer):
        p = layer.layer_param.heatmap_data_param
        self.p, self.dtype, self.what = p, layer.dtype, layer.describe()
        inds = [int(float(s)) for s in p.labelinds.split(",") if s.strip()]
        self.rng = np.random.default_rng(int(common.rng().integers(0, 2 ** 63)))
        self.read_lines(p.source, 4, "'<image> <x1,y1,...> <crop info> <cluster>'")
        self.items = {}
        for name, labels, crop, _cluster in self.lines:
            vals = _floats(labels)
            if inds:
                vals = [v for k, v in enumerate(vals, 1) if k in inds]
            self.items[(name, labels, crop)] = (vals, _floats(crop))
        first = self.items[self.lines[0][:3]][0]
        self.joints = len(first) // 2
        if p.shuffle:
            self.shuffle_lines()
        self.pos = 0

    def data_shape(self):
        return (int(self.p.batchsize), 3, int(self.p.outsize), int(self.p.outsize))

    def _crop(self, img, crop, label):
        p = self.p
        height, width = img.shape[:2]
        m = float(p.multfact)
        if p.bbox_or_centerscale == "centerscale":
            length = 200 * crop[2]
            x_min, y_min = crop[0] - length / 2, crop[1] - length / 2
            left, top = max(x_min, 0.0), max(y_min, 0.0)
            pl, pt = max(-x_min, 0.0), max(-y_min, 0.0)
            pr = max(left + length - width - pl, 0.0)
            pb = max(top + length - height - pt, 0.0)
            w = int(min(length - pl, width - left))
            h = int(min(length - pt, height - top))
            x0, y0, sx, sy = int(left), int(top), x_min, y_min
        elif p.bbox_or_centerscale == "bbox":
            x_min, y_min, x_max, y_max = crop[:4]
            bw, bh = x_max - x_min, y_max - y_min
            x_min = max(0.0, x_min - bw * (p.scale_width - 1) / 2)
            y_min = max(0.0, y_min - bh * (p.scale_height - 1) / 2)
            x_max = min(float(width), x_max + bw * (p.scale_width - 1) / 2)
            y_max = min(float(height), y_max + bh * (p.scale_height - 1) / 2)
            bw, bh = x_max - x_min, y_max - y_min
            length = max(bw, bh)
            pl = pr = max(0.0, length - bw) / 2
            pt = pb = max(0.0, length - bh) / 2
            x0, y0, w, h = int(x_min), int(y_min), int(x_max - x_min), int(y_max - y_min)
            sx, sy = x_min - pl, y_min - pt
        else:
            raise CaffeError("bbox_or_centerscale must be \"bbox\" or \"centerscale\"")
        out = img[y0:y0 + h, x0:x0 + w]
        out = np.pad(out, [(int(pt), int(pb)), (int(pl), int(pr)), (0, 0)])
        label = label.copy()
        label[0::2] -= sx / m
        label[1::2] -= sy / m
        return out, label, length

    def load_batch(self, buf):
        p = self.p
        n, c, size, _ = self.data_shape()
        lh, lw = int(p.label_height), int(p.label_width)
        data = buf.setdefault("data", np.zeros((n, c, size, size), self.dtype))
        label = buf.get("label")
        if label is None or label.shape != (n, self.joints, lh, lw):
            label = buf["label"] = np.zeros((n, self.joints, lh, lw), self.dtype)
        rows, cols = np.arange(lh)[:, None], np.arange(lw)[None, :]
        for b in range(n):
            name, labels, crop = self.lines[self.pos][:3]
            vals, cinfo = self.items[(name, labels, crop)]
            img = read_image(p.root_img_dir + name)[:, :, ::-1].astype(np.float32)   # RGB
            if p.segmentation:
                seg = read_image(p.root_img_dir + "segs/" + name, is_color=False)[:, :, 0]
                img[seg > 40] = 0
            cur = np.asarray(vals, np.float64)
            res, aug, length = self._crop(img, cinfo, cur)
            res = resize_bilinear(res, size, size)
            aug *= size / length
            data[b] = res.transpose(2, 0, 1) / 255.0
            f = lh / float(size)
            for k in range(len(cur) // 2):
                if int(cur[2 * k]) <= 0 and int(cur[2 * k + 1]) <= 0:
                    label[b, k] = 0
                    continue
                x = f * aug[2 * k] * p.multfact
                y = f * aug[2 * k + 1] * p.multfact
                label[b, k] = np.exp(-0.5 * ((rows - y) ** 2 + (cols - x) ** 2))
            self.pos += 1
            if self.pos >= len(self.lines):
                self.pos = 0
                if p.shuffle:
                    self.shuffle_lines()


@register_layer("DataHeatmap")
class DataHeatmapLayer(BasePrefetchingDataLayer):
    """Images cropped around a person and Gaussian joint heat maps (MVIG-SJTU/RMPE,
    src/caffe/layers/data_heatmap.cpp).

    ``source`` lines: ``<image> <x1,y1,x2,y2,...> <crop info> <cluster>`` (comma lists, no
    spaces); ``labelinds`` ("1,2,5,6": 1-based positions in the coordinate list) keeps some
    coordinates. Each image (``root_img_dir`` + name, as RGB) is cropped to a square:
    ``bbox_or_centerscale: "centerscale"`` (crop info x_c, y_c, s: side 200 s centred there) or
    ``"bbox"`` (x_min, y_min, x_max, y_max grown by scale_width / scale_height, clipped to the
    image, then padded to a square), zero padding where the square leaves the image, resized
    (bilinear) to outsize x outsize and divided by 255. The coordinates (times ``multfact``)
    follow the crop and resize; joint k's map (label_height x label_width, coordinates scaled
    by label_height / outsize) is exp(-((i - y)^2 + (j - x)^2) / 2) (sigma 1, as the fork
    hard-codes), all zero when the joint's listed x and y are both <= 0. ``segmentation``
    zeroes the pixels where root_img_dir/segs/<image> exceeds 40. ``shuffle`` shuffles the
    list at the start and at each wrap (caffepy's generator).
    prototxt: ``heatmap_data_param { source root_img_dir batchsize outsize label_width
    label_height multfact: 1 labelinds bbox_or_centerscale scale_width scale_height shuffle
    segmentation }``; any other field of the message set to a non-default value is refused;
    ``sample_per_cluster`` and rotation (``data_augment`` with angle_max
    != 0) are refused. Tops: data (batchsize x 3 x outsize x outsize), heat maps (batchsize x
    joints x label_height x label_width).
    """
    exact_num_top_blobs = 2
    min_top_blobs = 2

    def prefetch_count(self):
        return 2

    def make_loader(self, top):
        p = self.layer_param.heatmap_data_param
        refuse_unread(self, p, READ, "heatmap_data_param")
        if p.sample_per_cluster:
            raise self.error("heatmap_data_param: sample_per_cluster is not supported")
        if p.data_augment and p.angle_max != 0:
            raise self.error("heatmap_data_param: rotation (data_augment, angle_max) is not "
                             "supported")
        if p.batchsize < 1 or p.outsize < 1:
            raise self.error("heatmap_data_param: batchsize and outsize must be positive")
        try:
            loader = _HeatmapLoader(self)
        except CaffeError as e:
            raise self.error(str(e))
        self._joints = loader.joints
        return loader

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        p = self.layer_param.heatmap_data_param
        top[1].reshape((p.batchsize, self._joints, p.label_height, p.label_width))

