"""SSD's box arithmetic and batch sampler (weiliu89/caffe's util/bbox_util and util/sampler), for
the AnnotatedData layer and the image augmentation of :mod:`caffepy.forks.ssd.augment`.

A box is a list ``[xmin, ymin, xmax, ymax]`` in coordinates normalised to the image; an annotation
is ``(instance_id, box, difficult)``; a group is ``(group_label, [annotations])``.

* ``generate_batch_samples``: each ``batch_sampler`` (with ``use_original_image``) draws up to
  ``max_trials`` boxes (scale in [min_scale, max_scale], aspect ratio in [min, max] clamped to
  [scale^2, 1/scale^2], offset uniform) and keeps those meeting ``sample_constraint`` against some
  object box (Jaccard overlap, sample coverage, object coverage; no constraint: kept), at most
  ``max_sample`` per sampler.
* ``transform_annotation``: SSD's TransformAnnotation: resize-policy update, emit constraint
  (CENTER: the box centre inside the crop; MIN_OVERLAP: coverage of the box by the crop above
  ``emit_overlap``), projection onto the crop (clipped; a box that leaves no area is dropped; a
  group left empty is dropped), mirror (x -> 1 - x).

Random draws come from the generator handed in, in SSD's order. Box arithmetic is in double
precision (SSD: float).
"""
import math

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
    raise CaffeError("emit_constraint: emit_type %d is not SSD's CENTER or MIN_OVERLAP"
                     % ec.emit_type)


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
