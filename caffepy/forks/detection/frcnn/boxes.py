"""Box arithmetic of py-faster-rcnn, in numpy.

Boxes are rows ``[x1, y1, x2, y2]`` of inclusive pixel corners, so a box is ``x2 - x1 + 1`` wide.

* ``generate_anchors(base_size=16, ratios=(0.5, 1, 2), scales=(8, 16, 32))``: the reference box
  ``[0, 0, base_size - 1, base_size - 1]`` is reshaped to each aspect ratio ``h / w`` keeping its
  area (``w = round(sqrt(area / ratio))``, ``h = round(w * ratio)``, numpy rounding, same centre),
  then each of those is scaled by each scale; rows are ordered ratio-major, scale-minor.
* ``shifted_anchors``: those anchors placed at every cell of an ``H x W`` map with stride
  ``feat_stride``, rows ordered ``(h, w, anchor)``.
* ``bbox_transform(ex, gt)``: regression targets ``dx = (gx - ex) / ew``, ``dy`` alike,
  ``dw = log(gw / ew)``, ``dh`` alike (centres ``x1 + 0.5 * w``); ``bbox_transform_inv`` applies
  deltas (``N x 4k``) back to boxes (``x2 = cx + 0.5 * w``, as py-faster-rcnn).
* ``clip_boxes(boxes, (H, W))``: into ``[0, W - 1] x [0, H - 1]``.
* ``bbox_overlaps(a, b)``: the ``len(a) x len(b)`` intersection-over-union matrix.
* ``nms(boxes, scores, thresh)``: greedy non-maximum suppression, highest score first; a box is
  dropped when its IoU with a kept box is above ``thresh``; returns kept indices.
* ``parse_param_str``: the layers' ``param_str`` (YAML in py-faster-rcnn: a ``{...}`` dict or
  ``key: value`` lines, ``!!python/tuple`` tags allowed, a bare word value a string as YAML
  reads it: ``'phase': TEST``) as a dict, without a YAML dependency.
"""
import ast
import re

import numpy as np


def generate_anchors(base_size=16, ratios=(0.5, 1, 2), scales=(8, 16, 32)):
    size = float(base_size)
    centre = 0.5 * (size - 1)
    ratios = np.asarray(ratios, dtype=np.float64)
    ws = np.round(np.sqrt(size * size / ratios))
    hs = np.round(ws * ratios)
    scales = np.asarray(scales, dtype=np.float64)
    ws = (ws[:, None] * scales[None, :]).ravel()
    hs = (hs[:, None] * scales[None, :]).ravel()
    return np.stack([centre - 0.5 * (ws - 1), centre - 0.5 * (hs - 1),
                     centre + 0.5 * (ws - 1), centre + 0.5 * (hs - 1)], axis=1)


def shifted_anchors(anchors, height, width, feat_stride):
    sx, sy = np.meshgrid(np.arange(width) * feat_stride, np.arange(height) * feat_stride)
    shifts = np.stack([sx.ravel(), sy.ravel(), sx.ravel(), sy.ravel()], axis=1)
    return (shifts[:, None, :] + anchors[None, :, :]).reshape(-1, 4).astype(np.float64)


def _centres(boxes):
    w = boxes[:, 2] - boxes[:, 0] + 1.0
    h = boxes[:, 3] - boxes[:, 1] + 1.0
    return boxes[:, 0] + 0.5 * w, boxes[:, 1] + 0.5 * h, w, h


def bbox_transform(ex_rois, gt_rois):
    ex_x, ex_y, ex_w, ex_h = _centres(np.asarray(ex_rois, dtype=np.float64))
    gt_x, gt_y, gt_w, gt_h = _centres(np.asarray(gt_rois, dtype=np.float64))
    return np.stack([(gt_x - ex_x) / ex_w, (gt_y - ex_y) / ex_h,
                     np.log(gt_w / ex_w), np.log(gt_h / ex_h)], axis=1)


def bbox_transform_inv(boxes, deltas):
    deltas = np.asarray(deltas, dtype=np.float64)
    if len(boxes) == 0:
        return np.zeros((0, deltas.shape[1]))
    cx, cy, w, h = (v[:, None] for v in _centres(np.asarray(boxes, dtype=np.float64)))
    px = deltas[:, 0::4] * w + cx
    py = deltas[:, 1::4] * h + cy
    with np.errstate(over="ignore"):
        pw = np.exp(deltas[:, 2::4]) * w
        ph = np.exp(deltas[:, 3::4]) * h
    out = np.empty_like(deltas)
    out[:, 0::4] = px - 0.5 * pw
    out[:, 1::4] = py - 0.5 * ph
    out[:, 2::4] = px + 0.5 * pw
    out[:, 3::4] = py + 0.5 * ph
    return out


def clip_boxes(boxes, im_shape):
    h, w = float(im_shape[0]), float(im_shape[1])
    out = np.array(boxes, dtype=np.float64)
    out[:, 0::4] = np.clip(out[:, 0::4], 0, w - 1)
    out[:, 1::4] = np.clip(out[:, 1::4], 0, h - 1)
    out[:, 2::4] = np.clip(out[:, 2::4], 0, w - 1)
    out[:, 3::4] = np.clip(out[:, 3::4], 0, h - 1)
    return out


def _areas(b):
    return (b[:, 2] - b[:, 0] + 1.0) * (b[:, 3] - b[:, 1] + 1.0)


def bbox_overlaps(a, b):
    a = np.asarray(a, dtype=np.float64)[:, :4]
    b = np.asarray(b, dtype=np.float64)[:, :4]
    iw = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]) + 1
    ih = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]) + 1
    inter = np.maximum(iw, 0) * np.maximum(ih, 0)
    union = _areas(a)[:, None] + _areas(b)[None, :] - inter
    return np.where(inter > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def nms(boxes, scores, thresh):
    boxes = np.asarray(boxes, dtype=np.float64)
    areas = _areas(boxes)
    order = np.argsort(-np.asarray(scores, dtype=np.float64).ravel(), kind="stable")
    keep = []
    while order.size:
        i = order[0]
        keep.append(i)
        rest = order[1:]
        iw = np.minimum(boxes[i, 2], boxes[rest, 2]) - np.maximum(boxes[i, 0], boxes[rest, 0]) + 1
        ih = np.minimum(boxes[i, 3], boxes[rest, 3]) - np.maximum(boxes[i, 1], boxes[rest, 1]) + 1
        inter = np.maximum(iw, 0) * np.maximum(ih, 0)
        iou = inter / (areas[i] + areas[rest] - inter)
        order = rest[iou <= thresh]
    return np.asarray(keep, dtype=np.int64)


_BARE_KEY = re.compile(r"(^|[{,\n])\s*([A-Za-z_]\w*)\s*:")
_BARE_VALUE = re.compile(r"(:\s*)([A-Za-z_]\w*)(\s*[,}])")


def parse_param_str(text):
    """``param_str`` as a dict (see module doc); raises ValueError naming the text."""
    s = re.sub(r"!!python/\w+", "", text or "").strip()
    if not s:
        return {}
    if not s.startswith("{"):
        s = "{%s}" % ",".join(line for line in s.splitlines() if line.strip())
    s = _BARE_KEY.sub(lambda m: "%s'%s':" % (m.group(1), m.group(2)), s)
    s = _BARE_VALUE.sub(lambda m: m.group(0) if m.group(2) in ("True", "False", "None") else
                        "%s'%s'%s" % (m.group(1), m.group(2), m.group(3)), s)   # YAML: a string
    try:
        value = ast.literal_eval(s)
    except (ValueError, SyntaxError):
        raise ValueError("cannot read param_str %r (expected a dict or 'key: value' lines)" % text)
    if not isinstance(value, dict):
        raise ValueError("param_str %r is not a dict" % text)
    return value


def anchors_from_params(params):
    """``generate_anchors`` for a layer's parsed ``param_str`` (keys ``base_size``, ``ratios``,
    ``scales``; py-faster-rcnn's own layers ignore them and use the defaults, forks read them)."""
    return generate_anchors(params.get("base_size", 16), params.get("ratios", (0.5, 1, 2)),
                            params.get("scales", (8, 16, 32)))


def phase_key(phase):
    """'TRAIN' or 'TEST' for a phase given as caffe_pb2 enum value or string."""
    if isinstance(phase, str):
        return "TRAIN" if phase.upper() == "TRAIN" else "TEST"
    return "TRAIN" if int(phase) == 0 else "TEST"


def feat_stride(layer, params):
    """A proposal layer's required ``feat_stride`` from its parsed ``param_str``; ValueError
    naming the layer's class and its param_str when it is missing."""
    if "feat_stride" not in params:
        raise ValueError("%s: param_str %r has no 'feat_stride'"
                         % (type(layer).__name__, layer.param_str))
    return params["feat_stride"]


def write_proposals(top, rois, scores):
    """A proposal layer's tops: ``rois`` (R x k) in top[0], and, when there is a second top, the
    scores (a list of per-image arrays) as an R x 1 column."""
    top[0].reshape(*rois.shape)
    top[0].data[...] = rois
    if len(top) > 1:
        scores = np.concatenate(scores)[:, None]
        top[1].reshape(*scores.shape)
        top[1].data[...] = scores
