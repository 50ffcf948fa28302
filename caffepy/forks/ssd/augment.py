"""SSD's image augmentation (weiliu89/caffe's util/im_transforms and the AnnotatedDatum paths of
its DataTransformer), in numpy, for the AnnotatedData layer. The boxes, the batch sampler and the
annotation transform are :mod:`caffepy.forks.ssd.boxes` (their names imported here too).

Images are H x W x C arrays (uint8 BGR as decoded, or float for ``float_data`` datums).

* ``distort``: brightness, contrast, saturation, hue (on OpenCV's 8-bit HSV: H in [0, 180) shifted
  with saturation to [0, 255] then wrapped, S and V in [0, 255]) and channel reorder, each with its
  probability, in one of SSD's two orders picked by a fair draw.
* ``expand``: the image placed at a random integer offset in a canvas ``ratio`` times larger
  (ratio uniform in [1, max_expand_ratio]) filled with the mean values (or the mean file).
* ``resize``: WARP, FIT_SMALL_SIZE, FIT_LARGE_SIZE_AND_PAD (pad CONSTANT / MIRRORED /
  REPEAT_NEAREST), interp LINEAR (OpenCV's fixed-point bilinear), NEAREST, CUBIC, AREA, LANCZOS4,
  one of the listed ``interp_mode`` picked at random.

Random draws come from the generator handed in, in SSD's order. Differences from SSD: SSD re-encodes
an encoded image as JPEG after each of distort / expand / crop (lossy); here the decoded array goes
on unchanged; SSD distorts and resizes only encoded datums (a raw datum with a ``resize_param``
fails its shape check), here raw ones are distorted and resized too; OpenCV's 8-bit HSV, AREA and
LANCZOS4 are reproduced up to rounding.
"""
import math

import numpy as np

from ...data import cvops
from ...data.image import resize_bilinear
from ...errors import CaffeError
from .boxes import (  # noqa: F401 -- the box and sampler names, imported from here too
    RP, box_size, clip, coverage, extrapolate, generate_batch_samples, intersect, jaccard, locate,
    meet_emit_constraint, project, sample_box, satisfies, transform_annotation,
    update_by_resize_policy)


# ---------------------------------------------------------------- cropping

def crop_image(img, box):
    """The pixels of ``box`` (clipped, scaled, truncated to ints as SSD's CropImage)."""
    h, w = img.shape[:2]
    b = clip(box)
    x0, y0 = int(b[0] * w), int(b[1] * h)
    cw, ch = int(b[2] * w - b[0] * w), int(b[3] * h - b[1] * h)
    return img[y0:y0 + ch, x0:x0 + cw].copy()


# ---------------------------------------------------------------- distortion and expansion

def _store(x, like):
    if like.dtype == np.uint8:
        return np.clip(np.rint(x), 0, 255).astype(np.uint8)
    return x.astype(like.dtype)


def _adjust_hsv(img, channel, mul, add):
    if img.shape[2] != 3:
        raise CaffeError("distort_param: saturation and hue need 3-channel images, got %d"
                         % img.shape[2])
    hsv = cvops.bgr_to_hsv(img.astype(np.float64) / 255.0)
    h8, s8, v8 = np.rint(hsv[..., 0] / 2), np.rint(hsv[..., 1] * 255), np.rint(hsv[..., 2] * 255)
    h8 = np.where(h8 >= 180, h8 - 180, h8)
    planes = [h8, s8, v8]
    planes[channel] = np.clip(np.rint(planes[channel] * mul + add), 0, 255)
    back = cvops.hsv_to_bgr(np.stack([planes[0] * 2, planes[1] / 255, planes[2] / 255], -1))
    return _store(back * 255, img)


def distort(img, dp, rng):
    def brightness(x):
        if rng.uniform(0, 1) < dp.brightness_prob:
            d = rng.uniform(-dp.brightness_delta, dp.brightness_delta)
            if abs(d) > 0:
                return _store(x.astype(np.float64) + d, x)
        return x

    def contrast(x):
        if rng.uniform(0, 1) < dp.contrast_prob:
            d = rng.uniform(dp.contrast_lower, dp.contrast_upper)
            if abs(d - 1) > 1e-3:
                return _store(x.astype(np.float64) * d, x)
        return x

    def saturation(x):
        if rng.uniform(0, 1) < dp.saturation_prob:
            return _adjust_hsv(x, 1, rng.uniform(dp.saturation_lower, dp.saturation_upper), 0)
        return x

    def hue(x):
        if rng.uniform(0, 1) < dp.hue_prob:
            d = rng.uniform(-dp.hue_delta, dp.hue_delta)
            if abs(d) > 0:
                return _adjust_hsv(x, 0, 1, d)
        return x

    def reorder(x):
        if rng.uniform(0, 1) < dp.random_order_prob:
            return x[:, :, rng.permutation(x.shape[2])].copy()
        return x

    steps = ((brightness, contrast, saturation, hue, reorder) if rng.uniform(0, 1) > 0.5
             else (brightness, saturation, hue, contrast, reorder))
    for step in steps:
        img = step(img)
    return img


def expand(img, groups, ep, fill, rng, tp=None):
    """(image, groups) after SSD's ExpandImage; ``fill``: C-vector or C x H' x W' mean, or None."""
    if rng.uniform(0, 1) > ep.prob or abs(ep.max_expand_ratio - 1) < 1e-2:
        return img, groups
    ratio = rng.uniform(1, ep.max_expand_ratio)
    h, w, c = img.shape
    eh, ew = int(h * ratio), int(w * ratio)
    h_off = math.floor(rng.uniform(0, eh - h))
    w_off = math.floor(rng.uniform(0, ew - w))
    out = np.zeros((eh, ew, c), img.dtype)
    if fill is not None and fill.ndim == 3:
        if fill.shape != (c, eh, ew):
            raise CaffeError("expand_param: the mean file's shape %s is not the expanded image's %s"
                             % (fill.shape, (c, eh, ew)))
        out[...] = _store(fill.transpose(1, 2, 0), img)
    elif fill is not None:
        out[...] = _store(np.broadcast_to(fill, (c,)).astype(np.float64), img)
    out[h_off:h_off + h, w_off:w_off + w] = img
    box = [-w_off / w, -h_off / h, (ew - w_off) / w, (eh - h_off) / h]
    return out, transform_annotation(groups, box, tp=tp)


# ---------------------------------------------------------------- resize (util/im_transforms.cpp)

def _weights(n_in, n_out, mode):
    """An n_out x n_in matrix resampling one axis."""
    scale = n_in / n_out
    m = np.zeros((n_out, n_in))
    rows = np.arange(n_out)
    if mode == RP.NEAREST:
        m[rows, np.minimum((rows * scale).astype(np.int64), n_in - 1)] = 1
        return m
    if mode == RP.AREA and scale > 1:
        for d in range(n_out):
            a, b = d * scale, (d + 1) * scale
            for i in range(int(math.floor(a)), min(int(math.ceil(b)), n_in)):
                m[d, i] = min(b, i + 1) - max(a, i)
        return m / m.sum(1, keepdims=True)
    pos = (rows + 0.5) * scale - 0.5
    base = np.floor(pos).astype(np.int64)
    t = pos - base
    if mode == RP.LANCZOS4:
        taps = np.arange(-3, 5)
        x = t[:, None] - taps[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            k = np.where(np.abs(x) < 1e-12, 1.0, np.sin(np.pi * x) * np.sin(np.pi * x / 4)
                         / (np.pi ** 2 * x * x / 4))
        k /= k.sum(1, keepdims=True)
    elif mode == RP.AREA:                              # OpenCV's AREA when enlarging
        base = np.floor(rows * scale).astype(np.int64)
        t = (rows + 1) - (base + 1) / scale
        t = np.where(t <= 0, 0.0, t - np.floor(t))
        taps = np.arange(0, 2)
        k = np.stack([1 - t, t], 1)
    else:
        taps = np.arange(0, 2)
        k = np.stack([1 - t, t], 1)
    idx = np.clip(base[:, None] + taps[None, :], 0, n_in - 1)
    np.add.at(m, (np.repeat(rows, len(taps)), idx.ravel()), k.ravel())
    return m


def _resize(img, width, height, mode):
    if mode == RP.LINEAR:
        return resize_bilinear(img, height, width)
    if mode == RP.CUBIC:
        return _store(cvops.resize_cubic(img.astype(np.float64), width, height), img)
    h, w = img.shape[:2]
    x = np.einsum("ij,jkc->ikc", _weights(h, height, mode), img.astype(np.float64))
    x = np.einsum("ij,kjc->kic", _weights(w, width, mode), x)
    return _store(x, img)


def infer_new_size(rp, width, height):
    """SSD's InferNewSize: (width, height) an image of this size takes after ``resize_param``."""
    w, h = int(rp.width), int(rp.height)
    if rp.resize_mode == RP.FIT_SMALL_SIZE:
        if width / height < w / h:
            h = int(w / (width / height))
        else:
            w = int(width / height * h)
    return w, h


def resize(img, rp, rng):
    mode = RP.LINEAR
    if len(rp.interp_mode):
        cum = np.cumsum(np.full(len(rp.interp_mode), 1.0 / len(rp.interp_mode)))
        mode = rp.interp_mode[min(int(np.searchsorted(cum, rng.uniform(0, cum[-1]))),
                                  len(cum) - 1)]
    h, w, c = img.shape
    nw, nh = int(rp.width), int(rp.height)
    if rp.resize_mode == RP.WARP:
        return _resize(img, nw, nh, mode)
    if rp.resize_mode == RP.FIT_SMALL_SIZE:
        nw, nh = infer_new_size(rp, w, h)
        return _resize(img, nw, nh, mode)
    if rp.resize_mode != RP.FIT_LARGE_SIZE_AND_PAD:
        raise CaffeError("resize_param: unknown resize_mode %d" % rp.resize_mode)
    aspect = w / h
    if aspect > nw / nh:
        out = _resize(img, nw, int(math.floor(nw / aspect)), mode)
        pad = int(math.floor((nh - out.shape[0]) / 2.0))
        widths = ((pad, nh - out.shape[0] - pad), (0, 0), (0, 0))
    else:
        out = _resize(img, int(math.floor(aspect * nh)), nh, mode)
        pad = int(math.floor((nw - out.shape[1]) / 2.0))
        widths = ((0, 0), (pad, nw - out.shape[1] - pad), (0, 0))
    if rp.pad_mode == RP.MIRRORED:
        return np.pad(out, widths, mode="reflect")
    if rp.pad_mode == RP.REPEAT_NEAREST:
        return np.pad(out, widths, mode="edge")
    values = list(rp.pad_value) or [0.0]
    if len(values) not in (1, c):
        raise CaffeError("resize_param: give 1 pad_value or one per channel (%d), got %d"
                         % (c, len(values)))
    padded = np.empty((nh, nw, c), img.dtype)
    padded[...] = _store(np.broadcast_to(np.asarray(values, np.float64), (c,)), img)
    padded[widths[0][0]:widths[0][0] + out.shape[0], widths[1][0]:widths[1][0] + out.shape[1]] = out
    return padded
