"""py-faster-rcnn's training data layer ``roi_data_layer.layer.RoIDataLayer``.

    layer { name: "input-data" type: "Python" top: "data" top: "im_info" top: "gt_boxes"
            python_param { module: "roi_data_layer.layer" layer: "RoIDataLayer"
                           param_str: "'num_classes': 21" } }

The training script hands the layer its roidb (``caffepy.forks.detection.frcnn.roi_minibatch`` lists the
keys of an entry) before the first forward::

    solver.net.layers[0].set_roidb(roidb)

Tops, by ``cfg.TRAIN.HAS_RPN`` (``caffepy.forks.detection.frcnn.config``): ``data``, ``im_info``,
``gt_boxes`` when True; else ``data``, ``rois``, ``labels`` and, when ``cfg.TRAIN.BBOX_REG``,
``bbox_targets``, ``bbox_inside_weights``, ``bbox_outside_weights``. ``setup`` shapes them
``IMS_PER_BATCH x 3 x max(SCALES) x MAX_SIZE``, ``1 x 3``, ``1 x 4`` / ``1 x 5``, ``1``,
``1 x 4K`` (K = ``num_classes``); each forward reshapes them to the minibatch's blobs
(``roi_minibatch.get_minibatch``: ``N x 3 x H x W``, ``1 x 3``, ``G x 5`` / ``R x 5``, ``R``,
``R x 4K``).

Order: the roidb is shuffled (``caffepy.common.rng``) when set and whenever fewer than
``IMS_PER_BATCH + 1`` entries remain (the last ones of a pass are skipped, as upstream); each
forward takes the next ``IMS_PER_BATCH``. With ``ASPECT_GROUPING`` the landscape entries
(``width >= height``) and then the portrait ones are shuffled, concatenated, cut into consecutive
pairs and the pairs shuffled, so a pair of images has one orientation when both counts are even
(flipped copies make them so); an odd total leaves one entry alone (upstream fails there).
``USE_PREFETCH``: a thread (its own generator seeded with ``cfg.RNG_SEED``, and aspect grouping as
configured) prepares up to 10 minibatches ahead; ``close()`` (or the layer's end) stops it. No
gradient flows back.
"""
import queue
import threading
import weakref

import numpy as np

from .... import common
from ....errors import CaffeError, layer_error
from ....layers.python_layer import Layer
from . import boxes, config
from .roi_minibatch import RoidbError, get_minibatch


def top_names(train):
    """The layer's top names for ``cfg.TRAIN`` settings ``train``."""
    if train["HAS_RPN"]:
        return ["data", "im_info", "gt_boxes"]
    bbox = ["bbox_targets", "bbox_inside_weights", "bbox_outside_weights"]
    return ["data", "rois", "labels"] + (bbox if train["BBOX_REG"] else [])


def _structure_settings(train, count):
    """For commands that only read a net's structure (``caffepy summary`` / ``draw``): the
    ``cfg.TRAIN`` settings (HAS_RPN, BBOX_REG) whose tops number ``count``, since the training
    script that would set them is not run (end to end, HAS_RPN: one image per minibatch, as the
    end-to-end configurations set); otherwise ``train`` unchanged (the count is an error)."""
    from ....proto.harvest_policy import is_structure_only
    if not is_structure_only():
        return train
    for has_rpn, bbox_reg in ((True, train["BBOX_REG"]), (False, True), (False, False)):
        trial = dict(train, HAS_RPN=has_rpn, BBOX_REG=bbox_reg)
        if has_rpn:
            trial["IMS_PER_BATCH"] = 1      # py-faster-rcnn's end-to-end minibatch: one image
        if len(top_names(trial)) == count:
            return trial
    return train


def shuffled_order(roidb, aspect_grouping, rng):
    """A permutation of the roidb's indices (module doc: aspect grouping)."""
    if not aspect_grouping:
        return rng.permutation(len(roidb))
    try:
        landscape = np.array([e["width"] >= e["height"] for e in roidb], dtype=bool)
    except (KeyError, TypeError):
        raise RoidbError("ASPECT_GROUPING needs 'width' and 'height' in every roidb entry")
    inds = np.concatenate([rng.permutation(np.where(landscape)[0]),
                           rng.permutation(np.where(~landscape)[0])])
    pairs = [inds[i:i + 2] for i in range(0, len(inds), 2)]
    return np.concatenate([pairs[k] for k in rng.permutation(len(pairs))]).astype(np.int64)


class _Order(object):
    """The roidb's shuffled order and the position in it."""

    def __init__(self, roidb, rng):
        self.roidb, self.rng = roidb, rng
        self._reshuffle()

    def _reshuffle(self):
        self.perm = shuffled_order(self.roidb, config.cfg.TRAIN["ASPECT_GROUPING"], self.rng)
        self.cur = 0

    def next_indices(self):
        n = config.cfg.TRAIN["IMS_PER_BATCH"]
        if self.cur + n >= len(self.roidb):
            self._reshuffle()
        inds = self.perm[self.cur:self.cur + n]
        self.cur += n
        return inds

    def next_minibatch(self, num_classes):
        inds = self.next_indices()
        return get_minibatch([self.roidb[i] for i in inds], num_classes, config.cfg, self.rng,
                             ids=[int(i) for i in inds])


class _Prefetcher(threading.Thread):
    """Builds minibatches ahead into a queue of 10 (``USE_PREFETCH``); an error is handed on."""

    def __init__(self, roidb, num_classes):
        super(_Prefetcher, self).__init__(name="RoIDataLayer-prefetch", daemon=True)
        self.order = _Order(roidb, np.random.default_rng(config.cfg["RNG_SEED"]))
        self.num_classes = num_classes
        self.queue = queue.Queue(10)
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.is_set():
            try:
                item = self.order.next_minibatch(self.num_classes)
            except Exception as e:  # handed to forward, which raises it
                item = e
            while not self.stopped.is_set():
                try:
                    self.queue.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if isinstance(item, Exception):
                return

    def get(self):
        item = self.queue.get()
        if isinstance(item, Exception):
            raise item
        return item

    def stop(self):
        self.stopped.set()
        self.join()


class RoIDataLayer(Layer):
    """See module doc."""
    #: the setup's shapes stand for every minibatch's (their images' sizes): ``caffepy summary``
    #: builds with them first, then searches a size the net takes (caffepy.zoo.readers)
    placeholder_shapes = True

    def _error(self, message):
        message = "RoIDataLayer: %s" % message
        if self.layer_param is None:
            return CaffeError(message)
        return layer_error(self.layer_param, message, CaffeError)

    def setup(self, bottom, top):
        try:
            params = boxes.parse_param_str(self.param_str)
        except ValueError as e:
            raise self._error(str(e))
        num_classes = params.get("num_classes")
        if not isinstance(num_classes, int) or num_classes < 1:
            raise self._error("param_str %r needs 'num_classes' (a positive integer)"
                              % self.param_str)
        train = config.cfg.TRAIN
        names = top_names(train)
        if not bottom and len(top) != len(names):
            train = _structure_settings(train, len(top))
            names = top_names(train)
        if bottom or len(top) != len(names):
            raise self._error(
                "takes no bottom and %d tops (%s: cfg.TRAIN.HAS_RPN = %s, BBOX_REG = %s); got %d "
                "bottoms and %d tops" % (len(names), ", ".join(names), train["HAS_RPN"],
                                         train["BBOX_REG"], len(bottom), len(top)))
        self.num_classes = num_classes
        self.names = names
        self._order = self._prefetcher = None
        shapes = dict(data=(train["IMS_PER_BATCH"], 3, max(train["SCALES"]), train["MAX_SIZE"]),
                      im_info=(1, 3), gt_boxes=(1, 4), rois=(1, 5), labels=(1,))
        for name, t in zip(names, top):
            t.reshape(*shapes.get(name, (1, 4 * num_classes)))

    def set_roidb(self, roidb):
        """Train on ``roidb`` (a list of entries, see ``roi_minibatch``) from now on."""
        roidb = list(roidb)
        if not roidb:
            raise self._error("set_roidb got an empty roidb")
        self.close()
        try:
            self._order = _Order(roidb, common.rng())
        except RoidbError as e:
            raise self._error(str(e))
        if config.cfg.TRAIN["USE_PREFETCH"]:
            self._prefetcher = _Prefetcher(roidb, self.num_classes)
            self._prefetcher.start()
            weakref.finalize(self, self._prefetcher.stopped.set)

    @property
    def roidb(self):
        return self._order.roidb if getattr(self, "_order", None) is not None else None

    def close(self):
        """Stop the prefetch thread, if there is one."""
        if getattr(self, "_prefetcher", None) is not None:
            self._prefetcher.stop()
            self._prefetcher = None

    def _next_blobs(self):
        if getattr(self, "_order", None) is None:
            raise self._error("no roidb: call set_roidb(roidb) on this layer before the first "
                              "forward (py-faster-rcnn's train_net does "
                              "solver.net.layers[0].set_roidb(roidb))")
        try:
            if self._prefetcher is not None:
                return self._prefetcher.get()
            self._order.rng = common.rng()
            return self._order.next_minibatch(self.num_classes)
        except RoidbError as e:
            raise self._error(str(e))

    def forward(self, bottom, top):
        blobs = self._next_blobs()
        for name, t in zip(self.names, top):
            if name not in blobs:
                raise self._error("the minibatch has no '%s' (cfg.TRAIN.HAS_RPN or BBOX_REG "
                                  "changed after setup)" % name)
            t.reshape(*blobs[name].shape)
            t.data[...] = blobs[name]

    def reshape(self, bottom, top):
        pass

    def backward(self, top, propagate_down, bottom):
        pass
