"""The minibatch of py-faster-rcnn's ``RoIDataLayer`` (its ``lib/roi_data_layer/minibatch.py`` and
``lib/utils/blob.py``): images of roidb entries become one blob, plus the RoIs / labels / box
targets (Fast R-CNN) or the ground-truth boxes and image info (Faster R-CNN, ``HAS_RPN``).

A roidb is a list of dicts, one per image (py-faster-rcnn's ``get_training_roidb`` builds it):

==================  ===========================================================================
key                 meaning
==================  ===========================================================================
image               path of the image file (read as ``cv2.imread``: uint8 BGR)
flipped             the image is mirrored left-right before use (its ``boxes`` are stored flipped
                    already: :func:`append_flipped` makes such entries)
boxes               ``R x 4`` ``[x1, y1, x2, y2]`` at the original image scale (gt boxes and,
                    without RPN, the proposals)
gt_classes          ``R``: class of each gt box, 0 for a proposal (RPN path)
max_classes,        ``R`` each: class and IoU of each box's best gt box (non-RPN path); derived
max_overlaps        from ``gt_overlaps`` (``R x K``, dense or scipy sparse) when absent
bbox_targets        ``R x 5`` ``[class, dx, dy, dw, dh]`` (non-RPN path with ``BBOX_REG``)
width, height       image size (``ASPECT_GROUPING`` only)
==================  ===========================================================================

Per image (``cfg``): a target size drawn from ``TRAIN.SCALES``; the image as float32 minus
``PIXEL_MEANS`` (BGR), scaled by ``s = target / min(h, w)``, or ``MAX_SIZE / max(h, w)`` when
``round(s * max(h, w)) > MAX_SIZE``, with OpenCV's ``resize(fx=s, fy=s, INTER_LINEAR)`` (output
``round(h s) x round(w s)``); images are zero-padded to the largest and stacked, ``N x 3 x H x W``.

RPN path (one image): ``gt_boxes`` ``G x 5`` = boxes with ``gt_classes != 0`` times ``s``, class in
column 4; ``im_info`` ``1 x 3`` = ``[H, W, s]`` of the blob. Non-RPN path: per image
``BATCH_SIZE / N`` RoIs, of which up to ``round(FG_FRACTION * that)`` drawn from boxes with
``max_overlaps >= FG_THRESH`` (labels ``max_classes``) and the rest from ``[BG_THRESH_LO,
BG_THRESH_HI)`` (label 0), without replacement; ``rois`` ``R x 5`` = ``[image index, box * s]``,
``labels`` ``R``; with ``BBOX_REG``, ``bbox_targets`` ``R x 4K`` holds the entry's 4 targets in
columns ``4c .. 4c + 3`` of its class ``c`` (none for class 0), ``bbox_inside_weights`` holds
``BBOX_INSIDE_WEIGHTS`` there and ``bbox_outside_weights`` is 1 where those are > 0.
"""
import collections

import numpy as np

from ....errors import CaffeError
from .proposal_target import draw_fg_bg


class RoidbError(ValueError):
    """A roidb entry that cannot be used (the data layer adds its own name to the message)."""


def image_scale(height, width, target_size, max_size):
    """The factor taking the shorter side to ``target_size``, capped so the longer one stays
    within ``max_size`` (after rounding)."""
    short, long_ = float(min(height, width)), float(max(height, width))
    scale = float(target_size) / short
    if np.round(scale * long_) > max_size:
        scale = float(max_size) / long_
    return scale


def _axis(src, scale):
    """Source indices and weights of OpenCV's INTER_LINEAR along one axis of ``src`` samples
    resized by ``scale`` (``cv2.resize``'s ``fx``: positions divide by ``scale``, not src / dst)."""
    from ....data.image import linear_taps
    dst = int(np.rint(src * scale))
    i0, i1, frac = linear_taps((np.arange(dst, dtype=np.float64) + 0.5) / scale - 0.5, src)
    return i0, i1, frac.astype(np.float32)


def resize_by(im, scale):
    """``cv2.resize(im, None, fx=scale, fy=scale, interpolation=INTER_LINEAR)`` of a float32
    ``H x W x C`` image (float weights, as OpenCV's non-8-bit path)."""
    y0, y1, fy = _axis(im.shape[0], scale)
    x0, x1, fx = _axis(im.shape[1], scale)
    rows = im[:, x0] * (1 - fx)[None, :, None] + im[:, x1] * fx[None, :, None]
    return (rows[y0] * (1 - fy)[:, None, None] + rows[y1] * fy[:, None, None]).astype(np.float32)


def prep_image(im, pixel_means, target_size, max_size):
    """(float32 image minus the means and scaled, scale) of a ``H x W x 3`` BGR image."""
    im = np.asarray(im, dtype=np.float32) - np.asarray(pixel_means, dtype=np.float32).reshape(-1)
    scale = image_scale(im.shape[0], im.shape[1], target_size, max_size)
    return resize_by(im, scale), scale


def images_to_blob(ims):
    """``N x 3 x H x W`` float32 of ``H x W x 3`` images, zero-padded to the largest H and W."""
    h = max(im.shape[0] for im in ims)
    w = max(im.shape[1] for im in ims)
    blob = np.zeros((len(ims), 3, h, w), dtype=np.float32)
    for i, im in enumerate(ims):
        blob[i, :, :im.shape[0], :im.shape[1]] = im.transpose(2, 0, 1)
    return blob


def _dense(x):
    return np.asarray(x.toarray() if hasattr(x, "toarray") else x, dtype=np.float64)


def best_overlaps(entry):
    """(max_classes, max_overlaps) of an entry, from ``gt_overlaps`` when it has not got them."""
    if "max_overlaps" in entry and "max_classes" in entry:
        return np.asarray(entry["max_classes"]), np.asarray(entry["max_overlaps"], np.float64)
    if "gt_overlaps" not in entry:
        raise RoidbError("has neither max_classes/max_overlaps nor gt_overlaps")
    overlaps = _dense(entry["gt_overlaps"])
    if overlaps.ndim != 2 or not overlaps.shape[1]:
        raise RoidbError("gt_overlaps must be boxes x classes, got shape %s" % (overlaps.shape,))
    return overlaps.argmax(axis=1), overlaps.max(axis=1)


def check_entry(entry, num_classes, rpn, bbox_reg):
    """The entry's boxes ``R x 4`` (float64) after checking the keys the minibatch reads."""
    if not hasattr(entry, "get"):
        raise RoidbError("is a %s, not a dict" % type(entry).__name__)
    if "image" not in entry:
        raise RoidbError("has no 'image' path")
    b = np.asarray(entry.get("boxes", np.zeros((0, 4))), dtype=np.float64)
    if b.ndim != 2 or b.shape[1] != 4:
        raise RoidbError("boxes must be R x 4 [x1, y1, x2, y2], got shape %s" % (b.shape,))
    bad = ~np.isfinite(b).all(axis=1) | (b[:, 2] < b[:, 0]) | (b[:, 3] < b[:, 1])
    if bad.any():
        raise RoidbError("box %d %s is not finite with x2 >= x1, y2 >= y1"
                         % (np.where(bad)[0][0], b[np.where(bad)[0][0]].tolist()))
    if rpn:
        need = ["gt_classes"]
    else:
        has_best = "max_overlaps" in entry and "max_classes" in entry
        need = ["max_classes", "max_overlaps"] if has_best else ["gt_overlaps"]
        need += ["bbox_targets"] if bbox_reg else []
    for key in need:
        if key not in entry:
            raise RoidbError("has no '%s'" % key)
        rows = np.shape(_dense(entry[key]))
        if not rows or rows[0] != len(b):
            raise RoidbError("'%s' has shape %s for %d boxes" % (key, rows, len(b)))
    if "bbox_targets" in need and np.shape(entry["bbox_targets"])[1:] != (5,):
        raise RoidbError("bbox_targets must be R x 5 [class, dx, dy, dw, dh], got shape %s"
                         % (np.shape(entry["bbox_targets"]),))
    classes = entry["gt_classes"] if rpn else best_overlaps(entry)[0]
    if "bbox_targets" in need:
        classes = np.concatenate([classes, np.asarray(entry["bbox_targets"])[:, 0]])
    classes = np.asarray(classes)
    if len(classes) and (classes.min() < 0 or classes.max() >= num_classes):
        raise RoidbError("class %d outside [0, num_classes = %d)"
                         % (classes.max() if classes.max() >= num_classes else classes.min(),
                            num_classes))
    return b


def expand_bbox_targets(compact, num_classes, inside_weights):
    """(``R x 4K`` targets, inside weights) from ``R x 5`` ``[class, 4 targets]`` rows."""
    compact = np.asarray(compact, dtype=np.float32).reshape(-1, 5)
    targets = np.zeros((len(compact), 4 * num_classes), dtype=np.float32)
    inside = np.zeros_like(targets)
    for i in np.where(compact[:, 0] > 0)[0]:
        c = int(compact[i, 0])
        targets[i, 4 * c:4 * c + 4] = compact[i, 1:]
        inside[i, 4 * c:4 * c + 4] = inside_weights
    return targets, inside


def sample_rois(entry, fg_per_image, rois_per_image, num_classes, settings, rng):
    """(labels, boxes, bbox targets, inside weights) of one image's sampled RoIs (module doc)."""
    s = settings
    classes, overlaps = best_overlaps(entry)
    keep, n_fg = draw_fg_bg(overlaps, fg_per_image, rois_per_image, s, rng)
    labels = np.asarray(classes, dtype=np.float32)[keep]
    labels[n_fg:] = 0
    rois = np.asarray(entry["boxes"], dtype=np.float64).reshape(-1, 4)[keep]
    compact = entry.get("bbox_targets")
    compact = np.zeros((len(keep), 5)) if compact is None else np.asarray(compact)[keep]
    targets, inside = expand_bbox_targets(compact, num_classes, s["BBOX_INSIDE_WEIGHTS"])
    return labels, rois, targets, inside


def read_entry_image(entry):
    """The entry's image as ``cv2.imread`` gives it (uint8 BGR), mirrored when ``flipped``."""
    from ....data.image import read_image
    im = read_image(entry["image"])
    return im[:, ::-1, :] if entry.get("flipped", False) else im


def get_minibatch(entries, num_classes, config, rng, ids=None, read=read_entry_image):
    """An ordered dict of the layer's blobs (module doc) for the roidb entries ``entries``;
    ``config`` is py-faster-rcnn's ``cfg``. Raises RoidbError naming the entry (by ``ids[i]``,
    its roidb index, else its position in ``entries``)."""
    train = config["TRAIN"]
    rpn, bbox_reg = bool(train["HAS_RPN"]), bool(train["BBOX_REG"])
    n = len(entries)
    if rpn and n != 1:
        raise RoidbError("HAS_RPN takes one image per batch (cfg.TRAIN.IMS_PER_BATCH = 1), got %d"
                         % n)
    if not rpn and train["BATCH_SIZE"] % n:
        raise RoidbError("%d images per batch do not divide cfg.TRAIN.BATCH_SIZE %d"
                         % (n, train["BATCH_SIZE"]))
    scale_inds = rng.integers(0, len(train["SCALES"]), size=n)
    ims, scales, boxes = [], [], []
    for i, (entry, k) in enumerate(zip(entries, scale_inds)):
        try:
            boxes.append(check_entry(entry, num_classes, rpn, bbox_reg))
            im = read(entry)
        except (RoidbError, CaffeError) as e:
            raise RoidbError("roidb entry %s: %s" % (i if ids is None else ids[i], e))
        im, scale = prep_image(im, config["PIXEL_MEANS"], train["SCALES"][k], train["MAX_SIZE"])
        ims.append(im)
        scales.append(scale)
    blobs = collections.OrderedDict(data=images_to_blob(ims))
    if rpn:
        gt = np.where(np.asarray(entries[0]["gt_classes"]) != 0)[0]
        gt_boxes = np.empty((len(gt), 5), dtype=np.float32)
        gt_boxes[:, :4] = boxes[0][gt] * scales[0]
        gt_boxes[:, 4] = np.asarray(entries[0]["gt_classes"])[gt]
        blobs["im_info"] = np.array([[blobs["data"].shape[2], blobs["data"].shape[3], scales[0]]],
                                    dtype=np.float32)
        blobs["gt_boxes"] = gt_boxes
        return blobs
    rois_per_image = train["BATCH_SIZE"] // n
    fg_per_image = np.round(train["FG_FRACTION"] * rois_per_image)
    parts = [sample_rois(e, fg_per_image, rois_per_image, num_classes, train, rng)
             for e in entries]
    blobs["rois"] = np.concatenate(
        [np.hstack([np.full((len(p[1]), 1), i), p[1] * scales[i]]) for i, p in enumerate(parts)]
        + [np.zeros((0, 5))]).astype(np.float32)
    blobs["labels"] = np.concatenate([p[0] for p in parts]).astype(np.float32)
    if bbox_reg:
        blobs["bbox_targets"] = np.concatenate([p[2] for p in parts])
        blobs["bbox_inside_weights"] = np.concatenate([p[3] for p in parts])
        blobs["bbox_outside_weights"] = (blobs["bbox_inside_weights"] > 0).astype(np.float32)
    return blobs


def append_flipped(roidb):
    """``roidb`` followed by a mirrored copy of each entry (py-faster-rcnn's
    ``imdb.append_flipped_images``): ``x1' = width - x2 - 1``, ``x2' = width - x1 - 1``,
    ``flipped`` True, the other keys shared. Entries need ``width``."""
    out = list(roidb)
    for entry in roidb:
        b = np.array(entry["boxes"]).reshape(-1, 4)
        x1 = b[:, 0].copy()
        b[:, 0] = entry["width"] - b[:, 2] - 1
        b[:, 2] = entry["width"] - x1 - 1
        out.append(dict(entry, boxes=b, flipped=True))
    return out
