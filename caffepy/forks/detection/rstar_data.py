"""R*CNN's training data layer ``roi_data_layer.layer.RoIDataLayer`` (Gkioxari's R*CNN, as the
liyantett/Joint-Local-and-Global-...-Micro-expression-Re repository ships it: lib/roi_data_layer/
layer.py and minibatch.py, lib/fast_rcnn/config.py): regions and their context boxes.

    layer { name: 'data' type: 'Python' top: 'data' top: 'rois' top: 'secondary_rois'
            top: 'labels' python_param { module: 'roi_data_layer.layer' layer: 'RoIDataLayer'
                                         param_str: "'num_classes': 4" } }

``setup`` shapes the tops 1 x 3 x 100 x 100, 1 x 5, CONTEXT_NUM_ROIS x 5 and 1 (the fork's; its
setup turns box regression off, so there are always these four). The training script hands the
layer its roidb (``set_roidb``; entries as in ``caffepy.forks.detection.frcnn.roi_minibatch``,
with ``boxes``, ``max_classes``, ``max_overlaps``, ``image``, ``flipped``). Each forward takes the
next IMS_PER_BATCH entries of a shuffled order (reshuffled, from the start, when fewer than
IMS_PER_BATCH + 1 remain) and, per image (:data:`CFG`: the fork's configuration):
    the image blob as py-faster-rcnn's (a scale drawn from SCALES, MAX_SIZE, PIXEL_MEANS);
    up to round(FG_FRACTION BATCH_SIZE / N) regions drawn without replacement from the boxes with
    max_overlaps >= FG_THRESH; for each, CONTEXT_NUM_ROIS context boxes drawn from the boxes whose
    IoU with it lies in [IOU_LB, IOU_UB] (without replacement when there are more, with
    replacement when fewer; a region with none is dropped);
    rois = [image index, box * scale] (R x 5), secondary_rois likewise (R CONTEXT_NUM_ROIS x 5,
    region r's context boxes in rows r CONTEXT_NUM_ROIS ..), labels = max_classes (R).
No background regions are drawn (the fork's sampling keeps foreground ones only). No gradient.
"""
import numpy as np

from ... import common
from ...layers.stand_ins import StandInForm
from .frcnn import boxes
from .frcnn.config import Section, default_config
from .frcnn.roi_data import RoIDataLayer
from .frcnn.roi_minibatch import (RoidbError, best_overlaps, check_entry, images_to_blob,
                                  prep_image, read_entry_image)


def rstar_config():
    """R*CNN's lib/fast_rcnn/config.py defaults (those the data layer reads)."""
    cfg = default_config()
    cfg["TRAIN"] = Section(cfg["TRAIN"], BATCH_SIZE=80, FG_FRACTION=1.0, FG_THRESH=0.5,
                           CONTEXT_NUM_ROIS=10, IOU_LB=0.2, IOU_UB=0.75, SCALES=(600,),
                           MAX_SIZE=1000, IMS_PER_BATCH=2, BBOX_REG=False, HAS_RPN=False,
                           USE_PREFETCH=False)
    return cfg


#: The configuration the layer reads; a training script changes it as R*CNN's ``cfg``.
CFG = rstar_config()
TOPS = ("data", "rois", "secondary_rois", "labels")


def sample_regions(entry, boxes_, fg_per_image, train, rng):
    """(labels, region boxes, context boxes) of one entry, at the original scale."""
    labels, overlaps = best_overlaps(entry)
    n = int(train["CONTEXT_NUM_ROIS"])
    fg = np.where(overlaps >= train["FG_THRESH"])[0]
    take = int(min(fg_per_image, fg.size))
    if fg.size:
        fg = rng.choice(fg, size=take, replace=False)
    ious = boxes.bbox_overlaps(boxes_, boxes_)
    kept, context = [], []
    for f in fg:
        cands = np.where((ious[:, f] >= train["IOU_LB"]) & (ious[:, f] <= train["IOU_UB"]))[0]
        if cands.size:
            context.append(rng.choice(cands, size=n, replace=cands.size <= n))
            kept.append(f)
    kept = np.asarray(kept, dtype=np.int64)
    context = np.concatenate(context) if context else np.zeros(0, np.int64)
    return labels[kept], boxes_[kept], boxes_[context]


def get_minibatch(entries, num_classes, cfg, rng, read=read_entry_image):
    """The layer's four blobs (module doc) for the roidb entries ``entries``."""
    train = cfg["TRAIN"]
    n = len(entries)
    if train["BATCH_SIZE"] % n:
        raise RoidbError("%d images per batch do not divide cfg.TRAIN.BATCH_SIZE %d"
                         % (n, train["BATCH_SIZE"]))
    fg_per_image = np.round(train["FG_FRACTION"] * (train["BATCH_SIZE"] // n))
    scale_inds = rng.integers(0, len(train["SCALES"]), size=n)
    ims, rois, context, labels = [], [], [], []
    for i, (entry, k) in enumerate(zip(entries, scale_inds)):
        try:
            b = check_entry(entry, num_classes, False, False)
            im = read(entry)
        except RoidbError as e:
            raise RoidbError("roidb entry %d: %s" % (i, e))
        im, scale = prep_image(im, cfg["PIXEL_MEANS"], train["SCALES"][k], train["MAX_SIZE"])
        ims.append(im)
        lab, reg, ctx = sample_regions(entry, b, fg_per_image, train, rng)
        rois.append(np.hstack([np.full((len(reg), 1), i), reg * scale]))
        context.append(np.hstack([np.full((len(ctx), 1), i), ctx * scale]))
        labels.append(lab)
    return {"data": images_to_blob(ims),
            "rois": np.concatenate(rois + [np.zeros((0, 5))]).astype(np.float32),
            "secondary_rois": np.concatenate(context + [np.zeros((0, 5))]).astype(np.float32),
            "labels": np.concatenate(labels + [np.zeros(0)]).astype(np.float32)}


class RStarRoIDataLayer(RoIDataLayer):
    """See module doc."""
    stand_in_form = StandInForm("R*CNN", bottoms=0, tops=4, keys=("num_classes",),
                                note="data, rois, secondary_rois, labels")

    def setup(self, bottom, top):
        try:
            params = boxes.parse_param_str(self.param_str)
        except ValueError as e:
            raise self._error(str(e))
        num_classes = params.get("num_classes")
        if not isinstance(num_classes, int) or num_classes < 1:
            raise self._error("param_str %r needs 'num_classes' (a positive integer)"
                              % self.param_str)
        if bottom or len(top) != 4:
            raise self._error("takes no bottom and 4 tops (%s); got %d bottoms and %d tops"
                              % (", ".join(TOPS), len(bottom), len(top)))
        self.num_classes, self.names = num_classes, TOPS
        self._order = self._prefetcher = None
        shapes = ((1, 3, 100, 100), (1, 5), (int(CFG["TRAIN"]["CONTEXT_NUM_ROIS"]), 5), (1,))
        for t, s in zip(top, shapes):
            t.reshape(*s)

    def set_roidb(self, roidb):
        """Train on ``roidb`` from now on."""
        self.roidb_ = list(roidb)
        if not self.roidb_:
            raise self._error("set_roidb got an empty roidb")
        self._order = True
        self._shuffle()

    @property
    def roidb(self):
        return getattr(self, "roidb_", None)

    def _shuffle(self):
        self.perm = common.rng().permutation(len(self.roidb_))
        self.cur = 0

    def _next_blobs(self):
        if self.roidb is None:
            raise self._error("no roidb: call set_roidb(roidb) on this layer before the first "
                              "forward (R*CNN's train_net does solver.net.layers[0]."
                              "set_roidb(roidb))")
        k = int(CFG["TRAIN"]["IMS_PER_BATCH"])
        if self.cur + k >= len(self.roidb_):
            self._shuffle()
        inds = self.perm[self.cur:self.cur + k]
        self.cur += k
        try:
            return get_minibatch([self.roidb_[i] for i in inds], self.num_classes, CFG,
                                 common.rng())
        except RoidbError as e:
            raise self._error(str(e))
