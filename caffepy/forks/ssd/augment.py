"""SSD's image and box augmentation (weiliu89/caffe's util/sampler, util/bbox_util, util/im_transforms
and the AnnotatedDatum paths of its DataTransformer), in numpy, for the AnnotatedData layer.

Images are H x W x C arrays (uint8 BGR as decoded, or float for ``float_data`` datums). A box is a
list ``[xmin, ymin, xmax, ymax]`` in coordinates normalised to the image; an annotation is
``(instance_id, box, difficult)``; a group is ``(group_label, [annotations])``.

* ``generate_batch_samples``: each ``batch_sampler`` (with ``use_original_image``) draws up to
  ``max_trials`` boxes (scale in [min_scale, max_scale], aspect ratio in [min, max] clamped to
  [scale^2, 1/scale^2], offset uniform) and keeps those meeting ``sample_constraint`` against some
  object box (Jaccard overlap, sample coverage, object coverage; no constraint: kept), at most
  ``max_sample`` per sampler.
* ``transform_annotation``: SSD's TransformAnnotation: resize-policy update, emit constraint
  (CENTER: the box centre inside the crop; MIN_OVERLAP: coverage of the box by the crop above
  ``emit_overlap``), projection onto the crop (clipped; a box that leaves no area is dropped; a
  group left empty is dropped), mirror (x -> 1 - x).
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
LANCZOS4 are reproduced up to rounding; box arithmetic is in double precision (SSD: float).
"""
import math

import numpy as np

from ...data import cvops
from ...data.image import resize_bilinear
from ...errors import CaffeError
from ...proto import caffe_pb2

RP = caffe_pb2.ResizeParameter


# ---------------------------------------------------------------- boxes (util/bbox_util.cpp)

def box_size(b):
    if b[2] < b[0] or b[3] < b[1]:
        return 0.0
    return (b[2] - b[0]) * (b[3] - b[1])


def intersect(a, b):
    if b[0] > a[2] or b[2] < a[0] or b[1] > a[3] or b[3] < a[1]:
        return [0.0, 0.0, 0.0, 0.0]
    return [max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])]


def jaccard(a, b):
    i = intersect(a, b)
    w, h = i[2] - i[0], i[3] - i[1]
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / (box_size(a) + box_size(b) - inter)


def coverage(a, b):
    """The part of ``a`` that ``b`` covers (SSD's BBoxCoverage(a, b))."""
    inter = box_size(intersect(a, b))
    return inter / box_size(a) if inter > 0 else 0.0


def clip(b):
    return [min(max(v, 0.0), 1.0) for v in b]


def locate(src, b):
    w, h = src[2] - src[0], src[3] - src[1]
    return [src[0] + b[0] * w, src[1] + b[1] * h, src[0] + b[2] * w, src[1] + b[3] * h]


def project(src, b):
    """``b`` in the coordinates of the crop ``src``, clipped; None when nothing is left."""
    if b[0] >= src[2] or b[2] <= src[0] or b[1] >= src[3] or b[3] <= src[1]:
        return None
    w, h = src[2] - src[0], src[3] - src[1]
    p = clip([(b[0] - src[0]) / w, (b[1] - src[1]) / h, (b[2] - src[0]) / w, (b[3] - src[1]) / h])
    return p if box_size(p) > 0 else None


def meet_emit_constraint(src, b, ec):
    if ec.emit_type == caffe_pb2.EmitConstraint.CENTER:
        cx, cy = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
        return src[0] <= cx <= src[2] and src[1] <= cy <= src[3]
    if ec.emit_type == caffe_pb2.EmitConstraint.MIN_OVERLAP:
        return coverage(b, src) > ec.emit_overlap
    raise CaffeError("emit_constraint: emit_type %d is not SSD's CENTER or MIN_OVERLAP" % ec.emit_type)


def update_by_resize_policy(rp, old_w, old_h, b):
    """SSD's UpdateBBoxByResizePolicy: the box in the resized (and padded) image's coordinates."""
    new_h, new_w = float(rp.height), float(rp.width)
    orig_aspect, new_aspect = old_w / old_h, new_w / new_h
    x0, y0, x1, y1 = b[0] * old_w, b[1] * old_h, b[2] * old_w, b[3] * old_h
    mode = rp.resize_mode
    if mode == RP.FIT_LARGE_SIZE_AND_PAD and orig_aspect > new_aspect:
        pad = (new_h - new_w / orig_aspect) / 2
        x0, x1 = max(0.0, x0 * new_w / old_w), min(new_w, x1 * new_w / old_w)
        y0 = pad + max(0.0, y0 * (new_h - 2 * pad) / old_h)
        y1 = pad + min(new_h, y1 * (new_h - 2 * pad) / old_h)
    elif mode == RP.FIT_LARGE_SIZE_AND_PAD:
        pad = (new_w - orig_aspect * new_h) / 2
        x0 = pad + max(0.0, x0 * (new_w - 2 * pad) / old_w)
        x1 = pad + min(new_w, x1 * (new_w - 2 * pad) / old_w)
        y0, y1 = max(0.0, y0 * new_h / old_h), min(new_h, y1 * new_h / old_h)
    else:
        if mode == RP.FIT_SMALL_SIZE:
            if orig_aspect < new_aspect:
                new_h = new_w / orig_aspect
            else:
                new_w = orig_aspect * new_h
        x0, x1 = max(0.0, x0 * new_w / old_w), min(new_w, x1 * new_w / old_w)
        y0, y1 = max(0.0, y0 * new_h / old_h), min(new_h, y1 * new_h / old_h)
    return [x0 / new_w, y0 / new_h, x1 / new_w, y1 / new_h]


def extrapolate(rp, height, width, crop, b):
    """SSD's ExtrapolateBBox (FIT_SMALL_SIZE with height_scale / width_scale only)."""
    if not (rp.height_scale > 0 and rp.width_scale > 0 and rp.resize_mode == RP.FIT_SMALL_SIZE):
        return b
    rh, rw = float(rp.height), float(rp.width)
    if width / height < rw / rh:
        rh = rw / (width / height)
    else:
        rw = rh * (width / height)
    ch, cw = rh * (crop[3] - crop[1]), rw * (crop[2] - crop[0])
    sx, sy = cw / rp.width_scale, ch / rp.height_scale
    return [b[0] * sx, b[1] * sy, b[2] * sx, b[3] * sy]


def transform_annotation(groups, crop, mirror=False, tp=None, img_hw=None):
    """SSD's TransformAnnotation; ``tp`` (TransformationParameter) brings the emit constraint and,
    with ``img_hw``, the resize policy."""
    resize = tp is not None and img_hw is not None and tp.HasField("resize_param")
    emit = tp.emit_constraint if tp is not None and tp.HasField("emit_constraint") else None
    out = []
    for label, annos in groups:
        kept = []
        for inst, box, difficult in annos:
            if resize:
                box = update_by_resize_policy(tp.resize_param, img_hw[1], img_hw[0], box)
            if emit is not None and not meet_emit_constraint(crop, box, emit):
                continue
            p = project(crop, box)
            if p is None:
                continue
            if mirror:
                p = [1 - p[2], p[1], 1 - p[0], p[3]]
            if resize:
                p = extrapolate(tp.resize_param, img_hw[0], img_hw[1], crop, p)
            kept.append((inst, p, difficult))
        if kept:
            out.append((label, kept))
    return out


# ---------------------------------------------------------------- sampler (util/sampler.cpp)

def satisfies(sample, objects, sc):
    has = {k: sc.HasField("min_" + k) or sc.HasField("max_" + k)
           for k in ("jaccard_overlap", "sample_coverage", "object_coverage")}
    if not any(has.values()):
        return True
    measures = (("jaccard_overlap", jaccard), ("sample_coverage", coverage),
                ("object_coverage", lambda s, o: coverage(o, s)))
    found = False
    for obj in objects:
        ok = True
        for key, fn in measures:
            if not has[key]:
                continue
            v = fn(sample, obj)
            if (sc.HasField("min_" + key) and v < getattr(sc, "min_" + key)) or \
                    (sc.HasField("max_" + key) and v > getattr(sc, "max_" + key)):
                ok = False
                break
            found = True
        if ok and found:
            return True
    return found


def sample_box(s, rng):
    if not (0 < s.min_scale <= s.max_scale <= 1):
        raise CaffeError("batch_sampler: need 0 < min_scale <= max_scale <= 1, got %g, %g"
                         % (s.min_scale, s.max_scale))
    if not (0 < s.min_aspect_ratio <= s.max_aspect_ratio):
        raise CaffeError("batch_sampler: need 0 < min_aspect_ratio <= max_aspect_ratio, got %g, %g"
                         % (s.min_aspect_ratio, s.max_aspect_ratio))
    scale = rng.uniform(s.min_scale, s.max_scale)
    ar = rng.uniform(s.min_aspect_ratio, s.max_aspect_ratio)
    ar = min(max(ar, scale ** 2), 1 / scale ** 2)
    w, h = scale * math.sqrt(ar), scale / math.sqrt(ar)
    x, y = rng.uniform(0, max(0.0, 1 - w)), rng.uniform(0, max(0.0, 1 - h))
    return [x, y, x + w, y + h]


def generate_batch_samples(groups, samplers, rng):
    objects = [box for _, annos in groups for _, box, _ in annos]
    out = []
    for bs in samplers:
        if not bs.use_original_image:
            continue
        found = 0
        for _ in range(bs.max_trials):
            if bs.HasField("max_sample") and found >= bs.max_sample:
                break
            box = locate([0.0, 0.0, 1.0, 1.0], sample_box(bs.sampler, rng))
            if satisfies(box, objects, bs.sample_constraint):
                found += 1
                out.append(box)
    return out


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
