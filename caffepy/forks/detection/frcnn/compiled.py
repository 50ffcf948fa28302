"""py-faster-rcnn's compiled helpers in numpy, with the results of its Cython / CUDA code.

A repository that copies py-faster-rcnn's ``lib/`` ships these as ``.pyx`` / ``.cu`` sources
built by ``lib/setup.py``; where that was never run, a user's module importing them gets these
functions under the extension's name (:mod:`caffepy.layers.legacy_import`).

* ``utils.cython_bbox.bbox_overlaps(boxes, query_boxes)`` (``lib/utils/bbox.pyx``): both
  float64 ``(N, 4)`` / ``(K, 4)`` arrays of inclusive corners ``x1 y1 x2 y2`` (another dtype is
  the extension's buffer-dtype ``ValueError``); the ``(N, K)`` float64 matrix
  ``iw * ih / ua`` with ``iw = min(x2, qx2) - max(x1, qx1) + 1`` (likewise ``ih``), 0 where
  ``iw <= 0`` or ``ih <= 0``, and ``ua = (x2 - x1 + 1)(y2 - y1 + 1) + query area - iw * ih``.
* ``nms.cpu_nms.cpu_nms(dets, thresh)`` (``lib/nms/cpu_nms.pyx``; fast-rcnn's
  ``utils.cython_nms.nms`` is the same code): ``dets`` float32 ``(N, >= 5)``, rows
  ``x1 y1 x2 y2 score``. Boxes are visited in ``scores.argsort()[::-1]`` order; each one not yet
  suppressed is kept and suppresses every later box whose overlap
  ``inter / (area_i + area_j - inter)`` (float32 arithmetic, ``+ 1`` in widths and heights) is
  ``>= thresh`` (compared in double). Returns the kept indices, a list of Python ints, in the
  order kept.
* ``nms.gpu_nms.gpu_nms(dets, thresh, device_id=0)`` (``lib/nms/gpu_nms.pyx``,
  ``nms_kernel.cu``), run on the CPU: the same greedy pass over the boxes sorted by that order,
  except that a box is suppressed when its float32 overlap is ``> thresh`` (the kernel's test,
  ``thresh`` as a float); returns ``list(order[keep])`` (numpy integers). ``device_id`` is
  accepted and not used.
"""
import numpy as np


def _float_array(name, x, dtype, ndim=2):
    if not isinstance(x, np.ndarray):
        raise TypeError("Argument '%s' has incorrect type (expected numpy.ndarray, got %s)"
                        % (name, type(x).__name__))
    if x.dtype != dtype:
        raise ValueError("Buffer dtype mismatch, expected '%s' but got '%s'"
                         % (np.dtype(dtype).name, x.dtype.name))
    if x.ndim != ndim:
        raise ValueError("Buffer has wrong number of dimensions (expected %d, got %d)"
                         % (ndim, x.ndim))
    return x


def bbox_overlaps(boxes, query_boxes):
    b = _float_array("boxes", boxes, np.float64)
    q = _float_array("query_boxes", query_boxes, np.float64)
    query_area = (q[:, 2] - q[:, 0] + 1) * (q[:, 3] - q[:, 1] + 1)
    iw = np.minimum(b[:, None, 2], q[None, :, 2]) - np.maximum(b[:, None, 0], q[None, :, 0]) + 1
    ih = np.minimum(b[:, None, 3], q[None, :, 3]) - np.maximum(b[:, None, 1], q[None, :, 1]) + 1
    inside = (iw > 0) & (ih > 0)
    area = (b[:, 2] - b[:, 0] + 1) * (b[:, 3] - b[:, 1] + 1)
    ua = area[:, None] + query_area[None, :] - iw * ih
    if np.any(inside & (ua == 0)):
        raise ZeroDivisionError("float division")
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(inside, iw * ih / np.where(inside, ua, 1.0), 0.0)


def _greedy(dets, suppress):
    """(order, kept positions in ``order``) of the greedy pass; ``suppress(ovr)`` says which."""
    x1, y1, x2, y2, scores = (dets[:, k] for k in range(5))
    areas = (x2 - x1 + 1) * (y2 - y1 + 1)
    order = scores.argsort()[::-1]
    suppressed = np.zeros(len(order), dtype=bool)       # by position in order
    kept = []
    for pos in range(len(order)):
        if suppressed[pos]:
            continue
        kept.append(pos)
        i, rest = order[pos], order[pos + 1:]
        w = np.maximum(np.float32(0), np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest])
                       + np.float32(1))
        h = np.maximum(np.float32(0), np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest])
                       + np.float32(1))
        inter = w * h
        union = areas[i] + areas[rest] - inter
        if np.any(union[~suppressed[pos + 1:]] == 0):
            raise ZeroDivisionError("float division")
        with np.errstate(divide="ignore", invalid="ignore"):
            ovr = inter / union
        suppressed[pos + 1:] |= suppress(ovr)
    return order, kept


def cpu_nms(dets, thresh):
    dets = _float_array("dets", dets, np.float32)
    thresh = float(thresh)
    order, kept = _greedy(dets, lambda ovr: ovr.astype(np.float64) >= thresh)
    return [int(order[pos]) for pos in kept]


nms = cpu_nms


def gpu_nms(dets, thresh, device_id=0):
    dets = _float_array("dets", dets, np.float32)
    thresh = np.float32(thresh)
    order, kept = _greedy(dets, lambda ovr: ovr > thresh)
    return list(order[np.asarray(kept, dtype=np.int64)])
