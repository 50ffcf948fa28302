"""dillerch/caffe's SPP (Christian Diller's spatial pyramid pooling, 2015): two fork layers under
BVLC's type, one per schema the fork had (proto/additions.d/spp_pyramid_type.json).

* ``spp_param { pyramid_type: SPP_NET4 | SPP_NET6 | CUSTOM }`` (the fork from 04534eb7 to
  b6422c22; src/caffe/layers/spp_layer.cpp as of 416c7a45): Caffe's Pooling at each level with
  kernel ceil(H / b), stride floor(H / b) and no padding.
* ``spp_param { pyramid_shape: b ... }`` (6b25ce9a to HEAD 1ad2f210): its own max pooling over
  the bins [floor(i H / b), ceil((i + 1) H / b)), top (N, C, sum b^2).

A net without either field builds BVLC's SPP (caffepy.layers.spp).
"""
import logging

import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_variant
from ...layers.pooling import PoolGeometry, pool_input_hw
from ...layers.spp import SPPLayer

_log = logging.getLogger(__name__)

FLT_MAX = float(np.finfo(np.float32).max)
#: the pyramids of the SPP-net paper that pyramid_type names (bins per side, level by level)
PRESET_BINS = {"SPP_NET4": (1, 2, 3, 4), "SPP_NET6": (1, 2, 3, 6)}


def _check_input(layer, bottom):
    hw = pool_input_hw(layer, bottom)
    if min(hw) <= 0:
        raise layer.error("input dimensions cannot be zero", ShapeError)
    return hw


@register_variant("SPP", lambda lp: lp.spp_param.HasField("pyramid_type")
                  and not lp.spp_param.pyramid_shape)
class PyramidTypeSPPLayer(SPPLayer):
    """dillerch/caffe's SPP with ``pyramid_type`` (416c7a45): pool (N, C, H, W) at each level of
    the pyramid with Caffe's Pooling, flatten, concatenate.

    Level bins b: SPP_NET4 1, 2, 3, 4; SPP_NET6 1, 2, 3, 6; CUSTOM (the fork's default) 2^l for
    l = 0 .. pyramid_height - 1. Level geometry (each axis): kernel = ceil(H / b), stride =
    floor(H / b), pad 0, so the level has ceil((H - kernel) / stride) + 1 outputs per axis
    (Pooling's size rule; b or more, e.g. 10 for H = 11, b = 6), windows clipped to the image.
    MAX (first maximum), AVE (divided by the clipped window) and STOCHASTIC as Caffe's Pooling.
    The backward is the sum of the levels' Pooling backwards (the fork's Split).
    prototxt: ``spp_param { pyramid_type: CUSTOM pyramid_height pool: MAX }`` (pyramid_height read
    for CUSTOM only). Blobs: bottom (N, C, H, W) -> top (N, C * sum_l PH_l * PW_l), always 2-D.
    Refused as the fork refuses them: fewer than 2 levels ("Pyramid height must be at least 2"),
    pool other than MAX / AVE / STOCHASTIC; and an input side smaller than a level's b (the
    fork's stride is then 0, and Caffe's Pooling divides by it).
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.spp_param
        P = type(p)
        kind = P.PyramidType.Name(p.pyramid_type)
        self.bins = PRESET_BINS.get(kind) or tuple(2 ** i for i in range(p.pyramid_height))
        if len(self.bins) < 2:
            raise self.error("pyramid_height must be at least 2 with pyramid_type: CUSTOM (the "
                             "fork's check), got %d" % len(self.bins))
        if p.pool not in (P.MAX, P.AVE, P.STOCHASTIC):
            raise self.error("pool %s: the fork's SPP pools MAX, AVE or STOCHASTIC"
                             % P.PoolMethod.Name(p.pool))
        self.height = len(self.bins)
        self.method = p.pool

    def reshape(self, bottom, top):
        hw = _check_input(self, bottom[0])
        self.levels = []
        for b in self.bins:
            if min(hw) < b:
                raise self.error("input %dx%d is smaller than the %d bins of a level: the fork's "
                                 "pooling stride floor(%d / %d) is 0, which Caffe's Pooling "
                                 "divides by" % (hw + (b, min(hw), b)), ShapeError)
            kernel = tuple(-(-s // b) for s in hw)
            stride = tuple(s // b for s in hw)
            self.levels.append(PoolGeometry(hw, kernel, stride, (0, 0)))
        n, c = bottom[0].shape[:2]
        top[0].reshape((n, sum(c * g.out_hw[0] * g.out_hw[1] for g in self.levels)))


def bin_edges(size, bins, dtype):
    """(start, end) of each of ``bins`` bins along an axis of ``size``, as the fork computes them
    in Dtype: bin = Dtype(size) / Dtype(bins), [floor(i bin), min(ceil((i + 1) bin), size))."""
    t = np.dtype(dtype).type
    step = t(size) / t(bins)
    return [(max(int(np.floor(t(i) * step)), 0), min(int(np.ceil(t(i + 1) * step)), size))
            for i in range(bins)]


@register_variant("SPP", lambda lp: len(lp.spp_param.pyramid_shape) > 0)
class PyramidShapeSPPLayer(Layer):
    """dillerch/caffe's SPP with ``pyramid_shape`` (HEAD 1ad2f210, CPU code): max pooling of each
    (N, C) plane over a pyramid of b x b bins per level.

    Level b, bin (i, j): rows [floor(i h), min(ceil((i + 1) h), H)), h = H / b, and columns
    likewise with w = W / b, computed in the blob's float type as the fork computes them in Dtype
    (bins may overlap by a pixel). y = the first maximum in row-major order of the values above
    -FLT_MAX (the fork starts from -FLT_MAX and keeps a value only if it is greater: a NaN never
    wins, and a bin with nothing above -FLT_MAX gives -FLT_MAX and passes no gradient).
    Backward: dL/dy of each bin added to its maximum's position, levels and bins in order.
    prototxt: ``spp_param { pyramid_shape: 1 pyramid_shape: 2 ... }`` (each > 0; pool is not read:
    the fork's layer pools MAX whatever it says). Blobs: bottom (N, C, H, W) -> top
    (N, C, sum_l b_l^2): per channel the bins of level 0, then level 1, ...
    Departures from the fork, where it has no defined result: a batch size changed after setup
    is followed (the fork's top keeps the setup's and its loops over it read past the bottom);
    its CUDA backward, which keeps only the last level's gradient, is not reproduced.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.spp_param
        if p.HasField("pyramid_type"):
            raise self.error("pyramid_shape and pyramid_type come from two versions of "
                             "dillerch/caffe's SPP; give one")
        self.bins = tuple(int(b) for b in p.pyramid_shape)
        if min(self.bins) <= 0:
            raise self.error("number of bins in pyramid shape must be > 0, got %s"
                             % list(self.bins))
        if p.pool != type(p).MAX:
            _log.warning("layer '%s' (SPP): pool %s is not read with pyramid_shape: dillerch/"
                         "caffe's layer pools MAX", self.name, type(p).PoolMethod.Name(p.pool))

    def reshape(self, bottom, top):
        h, w = _check_input(self, bottom[0])
        self.edges = [(bin_edges(h, b, self.dtype), bin_edges(w, b, self.dtype))
                      for b in self.bins]
        self.windows = [(r, c) for rows, cols in self.edges for r in rows for c in cols]
        top[0].reshape(tuple(bottom[0].shape[:2]) + (len(self.windows),))

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        n, c, h, w = x.shape
        y = top[0].data
        lowest = self.dtype.type(-FLT_MAX)
        self.mask = np.empty(y.shape, dtype=np.int64)
        for t, ((hs, he), (ws, we)) in enumerate(self.windows):
            win = x[:, :, hs:he, ws:we].reshape(n, c, -1)
            live = win > lowest
            k = np.where(live, win, -np.inf).argmax(axis=2)
            found = live.any(axis=2)
            best = np.take_along_axis(win, k[..., None], axis=2)[..., 0]
            y[:, :, t] = np.where(found, best, lowest)
            self.mask[:, :, t] = np.where(found, (hs + k // (we - ws)) * w + ws + k % (we - ws), -1)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        x = bottom[0].data
        rows = np.arange(x.shape[0] * x.shape[1])
        dx = np.zeros((rows.size, x.shape[2] * x.shape[3]), dtype=x.dtype)
        dy = top[0].diff.reshape(rows.size, -1)
        mask = self.mask.reshape(rows.size, -1)
        for t in range(mask.shape[1]):
            ok = mask[:, t] >= 0
            dx[rows[ok], mask[ok, t]] += dy[ok, t]
        bottom[0].diff[...] = dx.reshape(x.shape)
