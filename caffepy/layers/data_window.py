"""WindowData: foreground/background windows cropped from images and warped (R-CNN fine-tuning)."""
import math

import numpy as np

from .. import common
from ..data.state import set_rng
from ..data.datum import read_mean
from ..data.image import read_image, resize_bilinear
from ..data.transformer import effective_transform_param
from ..errors import CaffeError
from .base import register_layer
from .data import BasePrefetchingDataLayer


def _round(x):
    """C's round(): halves away from zero."""
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def parse_window_file(path, root_folder, fg_threshold, bg_threshold):
    """([(image_path, (C, H, W))] by image index, fg windows, bg windows); a window is
    (image_index, label, overlap, x1, y1, x2, y2). Background windows get label 0."""
    try:
        with open(path, "r") as f:
            tok = f.read().split()
    except OSError as e:
        raise CaffeError("%s: cannot open window file: %s" % (path, e.strerror or e))
    if len(tok) < 2:
        raise CaffeError("%s: window file is empty" % path)
    images, fg, bg = {}, [], []
    i = 0
    try:
        while i < len(tok):
            if tok[i] != "#":
                raise CaffeError("%s: expected '#' starting an image entry, got %r" % (path, tok[i]))
            index = int(tok[i + 1])
            images[index] = (root_folder + tok[i + 2], tuple(int(t) for t in tok[i + 3:i + 6]))
            num = int(tok[i + 6])
            i += 7
            for _ in range(num):
                label, overlap = int(tok[i]), float(tok[i + 1])
                x1, y1, x2, y2 = (int(t) for t in tok[i + 2:i + 6])
                i += 6
                if overlap >= fg_threshold:
                    if label <= 0:
                        raise CaffeError("%s: foreground window of image %d has label %d (must be > 0)"
                                         % (path, index, label))
                    fg.append((index, label, overlap, x1, y1, x2, y2))
                elif overlap < bg_threshold:
                    bg.append((index, 0, 0.0, x1, y1, x2, y2))
    except (IndexError, ValueError):
        raise CaffeError("%s: malformed window file near token %d" % (path, i))
    return images, fg, bg


class _WindowLoader(object):
    def __init__(self, wp, tp, batch_size, crop_size, dtype, what):
        self.what = what
        self.wp = wp
        self.batch_size = batch_size
        self.crop = crop_size
        self.dtype = dtype
        self.scale = float(tp.scale)
        self.mirror = bool(tp.mirror)
        self.images, self.fg, self.bg = parse_window_file(wp.source, wp.root_folder,
                                                          wp.fg_threshold, wp.bg_threshold)
        self.num_fg = int(np.float32(batch_size) * np.float32(wp.fg_fraction))
        if self.num_fg and not self.fg:
            raise CaffeError("%s: %s has no foreground windows (overlap >= %g)"
                             % (what, wp.source, wp.fg_threshold))
        if batch_size - self.num_fg and not self.bg:
            raise CaffeError("%s: %s has no background windows (overlap < %g)"
                             % (what, wp.source, wp.bg_threshold))
        self.channels = next(iter(self.images.values()))[1][0]
        self.mean = read_mean(tp.mean_file).astype(dtype) if tp.HasField("mean_file") else None
        if self.mean is not None:
            if self.mean.shape[1] != self.mean.shape[2] or self.mean.shape[1] < crop_size:
                raise CaffeError("%s: mean_file must be square and at least crop_size (%d), got %s"
                                 % (what, crop_size, self.mean.shape))
            self.mean_off = (self.mean.shape[2] - crop_size) // 2
        self.mean_values = np.asarray(tp.mean_value, dtype=dtype) if len(tp.mean_value) else None
        self.square = wp.crop_mode == "square"
        if wp.crop_mode not in ("warp", "square"):
            raise CaffeError("%s: crop_mode must be 'warp' or 'square', got '%s'" % (what, wp.crop_mode))
        self.cache = {}
        self.rng = np.random.default_rng(int(common.rng().integers(0, 2 ** 63)))

    def data_shape(self):
        return (self.batch_size, self.channels, self.crop, self.crop)

    def get_state(self):
        return {"sample": self.rng.bit_generator.state}

    def set_state(self, state):
        set_rng(self.rng, state["sample"])

    def _image(self, index):
        if index not in self.images:
            raise CaffeError("%s: window refers to unknown image index %d" % (self.what, index))
        path = self.images[index][0]
        if path in self.cache:
            return self.cache[path]
        img = read_image(path, 0, 0, True)
        if self.wp.cache_images:
            self.cache[path] = img
        return img

    def _warp(self, img, window, do_mirror):
        """The warped crop (h x w x C uint8) and its (pad_h, pad_w) offset in the crop_size box."""
        crop, pad = self.crop, int(self.wp.context_pad)
        _, _, _, x1, y1, x2, y2 = window
        size_h = size_w = crop
        pad_h = pad_w = 0
        if pad > 0 or self.square:
            context_scale = crop / float(crop - 2 * pad)
            half_h, half_w = (y2 - y1 + 1) / 2.0, (x2 - x1 + 1) / 2.0
            cx, cy = x1 + half_w, y1 + half_h
            if self.square:
                half_h = half_w = max(half_h, half_w)
            x1, x2 = _round(cx - half_w * context_scale), _round(cx + half_w * context_scale)
            y1, y2 = _round(cy - half_h * context_scale), _round(cy + half_h * context_scale)
            unclipped_h, unclipped_w = y2 - y1 + 1, x2 - x1 + 1
            px1, py1 = max(0, -x1), max(0, -y1)
            px2, py2 = max(0, x2 - img.shape[1] + 1), max(0, y2 - img.shape[0] + 1)
            x1, x2, y1, y2 = x1 + px1, x2 - px2, y1 + py1, y2 - py2
            sx, sy = crop / float(unclipped_w), crop / float(unclipped_h)
            size_w, size_h = _round((x2 - x1 + 1) * sx), _round((y2 - y1 + 1) * sy)
            px1, px2 = _round(px1 * sx), _round(px2 * sx)
            py1 = _round(py1 * sy)
            pad_h, pad_w = py1, (px2 if do_mirror else px1)
            size_h = min(size_h, crop - pad_h)
            size_w = min(size_w, crop - pad_w)
        x1, y1 = max(0, x1), max(0, y1)
        x2, y2 = min(img.shape[1] - 1, x2), min(img.shape[0] - 1, y2)
        if x2 < x1 or y2 < y1 or size_h < 1 or size_w < 1:
            raise CaffeError("%s: window %s is empty after clipping" % (self.what, window[3:]))
        out = resize_bilinear(img[y1:y2 + 1, x1:x2 + 1], size_h, size_w)
        if do_mirror:
            out = out[:, ::-1]
        return out, pad_h, pad_w

    def load_batch(self, buf):
        data = buf["data"]
        data[...] = 0
        labels = buf["label"]
        counts = (self.batch_size - self.num_fg, self.num_fg)
        item = 0
        for is_fg, pool in ((0, self.bg), (1, self.fg)):
            for _ in range(counts[is_fg]):
                window = pool[int(self.rng.integers(0, len(pool)))]
                do_mirror = self.mirror and bool(self.rng.integers(0, 2))
                img = self._image(window[0])
                if img.shape[2] != self.channels:
                    raise CaffeError("%s: image %s has %d channels, window file says %d"
                                     % (self.what, self.images[window[0]][0], img.shape[2], self.channels))
                warped, ph, pw = self._warp(img, window, do_mirror)
                h, w = warped.shape[:2]
                pix = warped.transpose(2, 0, 1).astype(self.dtype)
                if self.mean is not None:
                    o = self.mean_off
                    pix -= self.mean[:, o + ph:o + ph + h, o + pw:o + pw + w]
                elif self.mean_values is not None:
                    pix -= np.broadcast_to(self.mean_values, (self.channels,))[:, None, None]
                data[item, :, ph:ph + h, pw:pw + w] = pix * self.dtype.type(self.scale)
                labels[item] = window[1]
                item += 1


@register_layer("WindowData")
class WindowDataLayer(BasePrefetchingDataLayer):
    """Samples windows of images listed in a window file, as Caffe's WindowDataLayer (R-CNN).

    window_data_param: ``source`` (window file), ``batch_size``, ``fg_threshold`` (0.5),
    ``bg_threshold`` (0.5), ``fg_fraction`` (0.25), ``context_pad`` (0), ``crop_mode`` ("warp" |
    "square"), ``cache_images`` (false), ``root_folder`` (""); crop_size, mirror, scale, mean_file /
    mean_value from ``transform_param`` (the deprecated window_data_param copies are honoured).
    Window file: repeated ``# <image_index> <path> <channels> <height> <width> <num_windows>``
    then per window ``<label> <overlap> <x1> <y1> <x2> <y2>``. Windows with overlap >= fg_threshold
    are foreground (label kept), < bg_threshold background (label 0). Each batch holds
    batch_size - int(batch_size * fg_fraction) background then the foreground windows, drawn at
    random; each is expanded by context_pad (and made square in "square" mode), clipped to the
    image, warped bilinearly to crop_size (the clipped part keeps its place; the rest is 0),
    optionally mirrored, mean-subtracted and scaled. Tops: data (N x C x crop x crop), label (N).
    """
    exact_num_top_blobs = 2
    min_top_blobs = max_top_blobs = None

    def make_loader(self, top):
        wp = self.layer_param.window_data_param
        tp = effective_transform_param(self.layer_param, wp)
        if tp.HasField("mean_file") and len(tp.mean_value):
            raise self.error("cannot specify mean_file and mean_value at the same time")
        if tp.crop_size < 1:
            raise self.error("crop_size must be set (transform_param.crop_size)")
        if 2 * wp.context_pad >= tp.crop_size:
            raise self.error("context_pad (%d) must be less than half of crop_size (%d)"
                             % (wp.context_pad, tp.crop_size))
        if wp.batch_size < 1:
            raise self.error("window_data_param.batch_size must be positive")
        try:
            return _WindowLoader(wp, tp, int(wp.batch_size), int(tp.crop_size), self.dtype,
                                 self.describe())
        except CaffeError as e:
            raise e if str(e).startswith(self.describe()) else self.error(str(e))
