"""The window readers of pulkitag/caffe: GenericWindowData (groups of image windows with a vector
label per example; src/caffe/layers/generic_window_data_layer.cpp and the CropData helper it runs
per image of a group, crop_data_layer.cpp) and SquareBoxData (square boxes sampled around an
object point; square_box_window_data_layer.cpp).
"""
import math

import numpy as np

from ... import common
from ...data.datum import read_mean
from ...data.image import read_image, resize_bilinear
from ...data.state import set_rng
from ...errors import CaffeError
from ...layers.base import register_layer
from ...layers.data import BasePrefetchingDataLayer, _ensure

F32 = np.float32


def _round(x):
    """C's round(): halves away from zero."""
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def _tokens(path, what):
    try:
        with open(path, "r") as f:
            return f.read().split()
    except OSError as e:
        raise CaffeError("%s: cannot open window file %s: %s" % (what, path, e.strerror or e))


def parse_generic_window_file(path, root_folder, what):
    """(group, label_size, examples, labels): ``examples[k]`` lists the group's (image path,
    (C, H, W), (x1, y1, x2, y2)); ``labels`` is (num_examples, label_size) float32.

    Format: ``# GenericDataLayer <num_examples> <images per example> <label size>``, then per
    example ``# <index>``, one line ``<path> <C> <H> <W> <x1> <y1> <x2> <y2>`` per image and the
    label values."""
    tok = _tokens(path, what)
    i = 0

    def take(n):
        nonlocal i
        if i + n > len(tok):
            raise CaffeError("%s: %s ends early (token %d)" % (what, path, i))
        i += n
        return tok[i - n:i]
    try:
        head = take(5)
        if head[:2] != ["#", "GenericDataLayer"]:
            raise CaffeError("%s: %s must start with '# GenericDataLayer', got %r"
                             % (what, path, " ".join(head[:2])))
        num, group, label_size = (int(t) for t in head[2:])
        if num < 1 or group < 1 or label_size < 0:
            raise CaffeError("%s: %s: bad header (%d examples, %d images each, label size %d)"
                             % (what, path, num, group, label_size))
        examples, labels = [], np.zeros((num, label_size), F32)
        while i < len(tok):
            if len(examples) == num:
                raise CaffeError("%s: %s holds more than its %d examples" % (what, path, num))
            if take(2)[0] != "#":
                raise CaffeError("%s: %s: expected '#' before example %d" % (what, path,
                                                                             len(examples)))
            images = []
            for _ in range(group):
                t = take(8)
                size = tuple(int(v) for v in t[1:4])
                box = tuple(int(v) for v in t[4:8])
                if box[0] < 0 or box[1] < 0 or box[2] >= size[2] or box[3] >= size[1]:
                    raise CaffeError("%s: %s: window %s of %s lies outside its %d x %d image"
                                     % (what, path, box, t[0], size[1], size[2]))
                images.append((root_folder + t[0], size, box))
            labels[len(examples)] = [float(v) for v in take(label_size)]
            examples.append(images)
    except ValueError:
        raise CaffeError("%s: %s: malformed number near token %d" % (what, path, i))
    if len(examples) != num:
        raise CaffeError("%s: %s holds %d examples, its header says %d"
                         % (what, path, len(examples), num))
    return group, label_size, examples, labels


class _Mean(object):
    """transform_param's mean_file / mean_value, as the fork's readers subtract them."""

    def __init__(self, tp, channels, crop, what):
        self.file = self.values = None
        if tp.HasField("mean_file") and len(tp.mean_value):
            raise CaffeError("%s: cannot specify mean_file and mean_value at the same time" % what)
        if tp.HasField("mean_file"):
            self.file = read_mean(tp.mean_file)
            self.off = (self.file.shape[2] - crop) // 2
        elif len(tp.mean_value):
            if len(tp.mean_value) not in (1, channels):
                raise CaffeError("%s: specify either 1 mean_value or as many as channels: %d"
                                 % (what, channels))
            self.values = np.broadcast_to(np.asarray(tp.mean_value, F32), (channels,))

    def subtract(self, pix, ph, pw):
        c, h, w = pix.shape
        if self.file is not None:
            o = self.off
            return pix - self.file[:c, o + ph:o + ph + h, o + pw:o + pw + w]
        if self.values is not None:
            return pix - self.values[:, None, None]
        return pix


class _GenericLoader(object):
    def __init__(self, p, tp, phase, dtype, what):
        self.what, self.p, self.dtype = what, p, dtype
        self.crop, self.batch_size = int(p.crop_size), int(p.batch_size)
        self.pad, self.square = int(p.context_pad), p.crop_mode == "square"
        self.random_crop, self.jitter = bool(p.random_crop), int(p.max_jitter)
        self.jitter_on = self.jitter > 0 and phase == 0     # the fork jitters in TRAIN only
        self.channels = 1 if p.is_gray else 3
        self.group, self.label_size, self.examples, self.labels = parse_generic_window_file(
            p.source, p.root_folder, what)
        self.mean = _Mean(tp, self.channels, self.crop, what)
        self.count = 0
        self.cache = {}
        # one mt19937 per image of the group, each seeded 3 (CropData's rand_seed_): the images of
        # an example draw the same numbers
        self.rngs = [np.random.MT19937() for _ in range(self.group)]
        for r in self.rngs:
            r._legacy_seeding(3)

    def data_shape(self):
        return (self.batch_size, self.group * self.channels, self.crop, self.crop)

    def get_state(self):
        return {"count": self.count, "rngs": [r.state for r in self.rngs]}

    def set_state(self, state):
        self.count = int(state["count"])
        for r, s in zip(self.rngs, state["rngs"]):
            r.state = s

    def _image(self, path):
        img = self.cache.get(path)
        if img is None:
            img = read_image(path, 0, 0, self.channels == 3)
            if self.p.cache_images:
                self.cache[path] = img
        return img

    def _crop(self, member, path, size, box):
        rng = self.rngs[member]
        draw = lambda: int(rng.random_raw())          # PrefetchRand: one raw 32-bit draw
        do_mirror = self.p.mirror and draw() % 2 == 1
        img = self._image(path)
        _, im_h, im_w = size                            # the window file's size, as the fork
        crop = self.crop
        x1, y1, x2, y2 = box
        if self.random_crop:
            max_h, max_w = max(0, im_h - crop), max(0, im_w - crop)
            rh, rw = draw(), draw()
            if not max_h or not max_w:
                raise CaffeError("%s: random_crop needs images larger than crop_size %d; %s is "
                                 "%d x %d" % (self.what, crop, path, im_h, im_w))
            x1, y1 = rw % max_w, rh % max_h
            x2, y2 = x1 + crop - 1, y1 + crop - 1
        elif self.jitter_on:
            rh, rw, sh, sw = draw(), draw(), draw(), draw()
            xj, yj = rw % self.jitter, rh % self.jitter
            xj, yj = (xj if sw % 2 else -xj), (yj if sh % 2 else -yj)
            x1, x2, y1, y2 = max(0, x1 + xj), min(im_w - 1, x2 + xj), max(0, y1 + yj), y2 + yj
            y2 = max(im_h - 1, y2)                      # sic: the fork's max, not min
        out_h = out_w = crop
        if self.pad > 0 or self.square:
            context = F32(crop) / F32(crop - 2 * self.pad)
            half_h, half_w = F32(y2 - y1 + 1) / F32(2), F32(x2 - x1 + 1) / F32(2)
            cx, cy = F32(x1) + half_w, F32(y1) + half_h
            if self.square:
                half_h = half_w = max(half_h, half_w)
            x1, x2 = _round(cx - half_w * context), _round(cx + half_w * context)
            y1, y2 = _round(cy - half_h * context), _round(cy + half_h * context)
            uh, uw = y2 - y1 + 1, x2 - x1 + 1
            x1, y1 = max(x1, 0), max(y1, 0)
            x2, y2 = min(x2, img.shape[1] - 1), min(y2, img.shape[0] - 1)
            out_w = min(_round(F32(uw) * (F32(crop) / F32(uw))), crop)
            out_h = min(_round(F32(uh) * (F32(crop) / F32(uh))), crop)
        if x1 < 0 or y1 < 0 or x2 >= img.shape[1] or y2 >= img.shape[0] or x2 < x1 or y2 < y1:
            raise CaffeError("%s: window (%d, %d, %d, %d) does not fit %s (%d x %d)"
                             % (self.what, x1, y1, x2, y2, path, img.shape[0], img.shape[1]))
        if img.shape[2] != self.channels:
            raise CaffeError("%s: %s has %d channels, expected %d"
                             % (self.what, path, img.shape[2], self.channels))
        warped = resize_bilinear(img[y1:y2 + 1, x1:x2 + 1], out_h, out_w)
        if warped.ndim == 2:
            warped = warped[:, :, None]
        if do_mirror:
            warped = warped[:, ::-1]
        pix = self.mean.subtract(warped.transpose(2, 0, 1).astype(F32), 0, 0)
        return pix * F32(self.p.scale)

    def load_batch(self, buf):
        data = buf["data"]
        data[...] = 0
        labels = _ensure(buf, "label", (self.batch_size, self.label_size, 1, 1), data.dtype)
        c = self.channels
        for n in range(self.batch_size):
            k = self.count
            labels[n, :, 0, 0] = self.labels[k]
            for member, (path, size, box) in enumerate(self.examples[k]):
                pix = self._crop(member, path, size, box)
                data[n, member * c:(member + 1) * c, :pix.shape[1], :pix.shape[2]] = pix
            self.count = (k + 1) % len(self.examples)


@register_layer("GenericWindowData")
class GenericWindowDataLayer(BasePrefetchingDataLayer):
    """Examples of ``G`` image windows each (pairs of frames, views ...) with a label vector,
    read in the window file's order (wrapping), as pulkitag/caffe's GenericWindowData.

    prototxt: ``generic_window_data_param { source (window file, see
    :func:`parse_generic_window_file`) root_folder batch_size crop_size (> 0) context_pad (0)
    crop_mode ("warp" | "square") random_crop max_jitter mirror scale (1) is_gray cache_images
    }``; transform_param's mean_file / mean_value are subtracted. Tops: data (N, G C, crop,
    crop), the G crops of an example stacked on the channels (C = 1 with ``is_gray``, else 3,
    BGR), and label (N, label_size, 1, 1).

    Each image's window, as the fork's CropData crops it: ``random_crop`` replaces it by a
    crop_size square at (r_w mod (W - crop), r_h mod (H - crop)) (W, H from the window file);
    otherwise in TRAIN ``max_jitter`` shifts it by +-(r mod max_jitter) per axis (clipped to
    the image, except that the fork's bottom edge takes max(H - 1, y2)). ``context_pad`` (or
    ``square``) then widens it about its centre by crop / (crop - 2 context_pad) (square: to its
    longer side) and clips it to the image. The clipped window is warped bilinearly to crop x
    crop, mirrored when ``mirror`` and an odd draw say so, mean-subtracted and multiplied by
    ``scale``. The draws are 32-bit outputs of one mt19937 per image of the group, each seeded
    3 as the fork seeds its CropData layers, in the fork's order (mirror, then h, w for
    random_crop or h, w, sign h, sign w for the jitter). ``mirror`` needs random_crop or
    max_jitter: otherwise the fork's CropData has no generator to draw from and stops.
    ``is_ready`` is the fork's flag between the reader and its CropData threads; it changes
    nothing here. ``cache_images`` keeps decoded images in memory.
    """
    exact_num_top_blobs = 2
    min_top_blobs = max_top_blobs = None

    def make_loader(self, top):
        p = self.layer_param.generic_window_data_param
        if p.crop_size < 1:
            raise self.error("generic_window_data_param.crop_size must be positive")
        if p.batch_size < 1:
            raise self.error("generic_window_data_param.batch_size must be positive")
        if 2 * p.context_pad >= p.crop_size:
            raise self.error("context_pad (%d) must be less than half of crop_size (%d)"
                             % (p.context_pad, p.crop_size))
        if p.crop_mode not in ("warp", "square"):
            raise self.error("crop_mode must be 'warp' or 'square', got '%s'" % p.crop_mode)
        if p.mirror and not (p.random_crop or p.max_jitter > 0):
            raise self.error("mirror needs random_crop or max_jitter (the fork's CropData has "
                             "no random generator otherwise)")
        try:
            self.loader = _GenericLoader(p, self.layer_param.transform_param, self.phase,
                                         self.dtype, self.describe())
        except CaffeError as e:
            raise e if str(e).startswith(self.describe()) else self.error(str(e))
        return self.loader

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        top[1].reshape((self.loader.batch_size, self.loader.label_size, 1, 1))


class _SquareBoxLoader(object):
    def __init__(self, p, tp, dtype, what):
        self.what, self.p = what, p
        self.crop, self.batch_size = int(p.crop_size), int(p.batch_size)
        self.mirror = bool(tp.mirror)
        self.images, self.windows, channels = self._parse(p.source, p.root_folder)
        if channels != 3:
            raise CaffeError("%s: images are read in colour (3 channels); the window file says "
                             "%d" % (what, channels))
        self.channels = channels
        self.mean = _Mean(tp, channels, self.crop, what)
        self.rng = np.random.default_rng(int(common.rng().integers(0, 2 ** 63)))

    def _parse(self, path, root):
        tok = _tokens(path, self.what)
        try:
            if tok[:2] != ["#", "SqBoxWindowDataLayer"]:
                raise CaffeError("%s: %s must start with '# SqBoxWindowDataLayer'"
                                 % (self.what, path))
            i, images, windows, channels = 3, {}, [], 0
            while i < len(tok):
                if tok[i] != "#":
                    raise CaffeError("%s: %s: expected '#' at token %d" % (self.what, path, i))
                index, num = int(tok[i + 1]), int(tok[i + 2])
                size = tuple(int(v) for v in tok[i + 4:i + 7])
                images[index] = (root + tok[i + 3], size)
                channels = size[0]
                i += 7
                for _ in range(num):
                    windows.append((index,) + tuple(int(v) for v in tok[i:i + 5]))
                    i += 5
                if i > len(tok):
                    raise IndexError
        except (IndexError, ValueError):
            raise CaffeError("%s: %s: malformed window file" % (self.what, path))
        if not windows:
            raise CaffeError("%s: %s lists no windows" % (self.what, path))
        return images, windows, channels

    def data_shape(self):
        return (self.batch_size, self.channels, self.crop, self.crop)

    def get_state(self):
        return {"rng": self.rng.bit_generator.state}

    def set_state(self, state):
        set_rng(self.rng, state["rng"])

    def _sample(self, ox, oy, side):
        p, rng = self.p, self.rng
        for _ in range(100000):
            bsz = F32(side * F32(rng.uniform(p.mn_bxsz_by_imsz, p.mx_bxsz_by_imsz)))
            d1, d2, c1, c2 = (F32(v) for v in (rng.uniform(0, p.mx_dist), rng.uniform(0, p.mx_dist),
                                                rng.uniform(), rng.uniform()))
            d1, d2 = (-d1 if c1 < 0.5 else d1), (-d2 if c2 < 0.5 else d2)
            cx, cy = F32(ox + d1), F32(oy + d2)
            yield bsz, cx, cy, d1, d2
        raise CaffeError("%s: no box around (%d, %d) fits the image after 100000 draws"
                         % (self.what, ox, oy))

    def load_batch(self, buf):
        data = buf["data"]
        data[...] = 0
        _ensure(buf, "label", (self.batch_size, 1, 1, 1), data.dtype)[...] = 0  # never written
        crop = self.crop
        for n in range(self.batch_size):
            index, ox, oy = self.windows[int(self.rng.integers(0, 2 ** 32)) % len(self.windows)][:3]
            do_mirror = self.mirror and int(self.rng.integers(0, 2 ** 32)) % 2 == 1
            path, (_, im_h, im_w) = self.images[index]
            img = read_image(path, 0, 0, True)
            for bsz, cx, cy, d1, d2 in self._sample(ox, oy, max(im_h, im_w)):
                if 0 < cx < im_w and 0 < cy < im_h and abs(d1) < bsz and abs(d2) < bsz:
                    break
            x1, x2 = _round(cx - bsz / F32(2)), _round(cx + bsz / F32(2))
            y1, y2 = _round(cy - bsz / F32(2)), _round(cy + bsz / F32(2))
            uh, uw = y2 - y1 + 1, x2 - x1 + 1
            px1, py1 = max(0, -x1), max(0, -y1)
            px2, py2 = max(0, x2 - img.shape[1] + 1), max(0, y2 - img.shape[0] + 1)
            x1, x2, y1, y2 = x1 + px1, x2 - px2, y1 + py1, y2 - py2
            sx, sy = F32(crop) / F32(uw), F32(crop) / F32(uh)
            out_w, out_h = _round(F32(x2 - x1 + 1) * sx), _round(F32(y2 - y1 + 1) * sy)
            ph = _round(F32(py1) * sy)
            pw = _round(F32(px2 if do_mirror else px1) * sx)
            out_h, out_w = min(out_h, crop - ph), min(out_w, crop - pw)
            if out_h < 1 or out_w < 1 or x2 < x1 or y2 < y1:
                raise CaffeError("%s: the box sampled in %s is empty after clipping"
                                 % (self.what, path))
            warped = resize_bilinear(img[y1:y2 + 1, x1:x2 + 1], out_h, out_w)
            if do_mirror:
                warped = warped[:, ::-1]
            pix = self.mean.subtract(warped.transpose(2, 0, 1).astype(F32), ph, pw)
            data[n, :, ph:ph + out_h, pw:pw + out_w] = pix


@register_layer("SquareBoxData")
class SquareBoxDataLayer(BasePrefetchingDataLayer):
    """Square boxes sampled near an object point, as pulkitag/caffe's SquareBoxData.

    prototxt: ``square_box_data_param { source root_folder batch_size crop_size (> 0)
    mn_bxsz_by_imsz (0.5) mx_bxsz_by_imsz (1) mx_dist (10) }``; transform_param's mirror and
    mean_file / mean_value. Window file: ``# SqBoxWindowDataLayer <num images>``, then per image
    ``# <index> <num windows> <path> <C> <H> <W>`` and per window ``<obj_x> <obj_y> <box_cx>
    <box_cy> <box_size>``. Per item: a window drawn at random; a box of side max(H, W) u, u ~
    U(mn_bxsz_by_imsz, mx_bxsz_by_imsz), centred at the object point moved by +-U(0, mx_dist)
    per axis, drawn again until its centre is inside the image and each shift is less than the
    side; the box clipped to the image is warped bilinearly into crop x crop (its clipped-off
    part left 0, on the mirrored side when mirrored), mean-subtracted (no scale). Tops: data (N,
    C, crop, crop), C from the window file's last image (3: the images are read in colour), and
    label (N, 1, 1, 1), which the fork never writes: zeros. The fork's box_cx / box_cy /
    box_size feed an overlap it computes and never uses. Draws come from caffepy's generator.
    """
    exact_num_top_blobs = 2
    min_top_blobs = max_top_blobs = None

    def make_loader(self, top):
        p = self.layer_param.square_box_data_param
        if p.crop_size < 1:
            raise self.error("square_box_data_param.crop_size must be positive")
        if p.batch_size < 1:
            raise self.error("square_box_data_param.batch_size must be positive")
        if p.mn_bxsz_by_imsz > p.mx_bxsz_by_imsz or p.mx_dist < 0:
            raise self.error("needs mn_bxsz_by_imsz <= mx_bxsz_by_imsz and mx_dist >= 0")
        try:
            self.loader = _SquareBoxLoader(p, self.layer_param.transform_param, self.dtype,
                                           self.describe())
        except CaffeError as e:
            raise e if str(e).startswith(self.describe()) else self.error(str(e))
        return self.loader

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        top[1].reshape((self.loader.batch_size, 1, 1, 1))
