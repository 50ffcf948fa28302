"""Layer chains a net runs as one step: BatchNorm -> Scale (-> ReLU) in training, in place, and
Eltwise SUM -> ReLU (-> the Split the net put after it) (:class:`SumReLU`).

ResNet-style nets follow every convolution with a BatchNorm on batch statistics, a Scale with a
bias and often a ReLU, all three in place on the convolution's top::

    layer { type: "BatchNorm" bottom: "res2a" top: "res2a" }   # or top: a blob of its own
    layer { type: "Scale"     bottom: "res2a" top: "res2a" scale_param { bias_term: true } }
    layer { type: "ReLU"      bottom: "res2a" top: "res2a" }   # optional

Run layer by layer, the chain makes six passes over the blob forward and six backward; run as one
numba kernel each way (caffepy.math._numba_fused) it makes three and two, each channel staying in
cache. Everything Caffe's layers leave behind is the same: the blob's data and diff, the moving
averages, the Scale's parameter diffs (accumulated), BatchNorm's saved normalised input and
standard deviations and the Scale's saved input (an alias of the former), so the layers' own
backward may follow a fused forward. A net run from or to a layer inside a chain runs those
layers one by one, and so does a backward whose forward did (the Scale's saved input is then not
BatchNorm's). The values equal the separate layers' up to float32 rounding.

Found at build time by :func:`find`: consecutive layers of exactly these types (not subclasses:
NVCaffe's BatchNorm with its own scale is not one), the Scale with one bottom, axis 1 and one
scale per channel, the Scale and ReLU in place on BatchNorm's top, no loss weight. Each run checks
the rest and falls back to the layers when one fails: CPU mode, numba kernels on, BatchNorm on
batch statistics (not ``use_global_stats``), float32 / float64 contiguous blobs; backward also
needs every layer of the chain to run backward down to BatchNorm's bottom. ``net.fusion.enabled
= False`` (or ``CAFFEPY_FUSE=0``) runs every layer by itself.
"""
import numpy as np

from .. import common
from ..layers.eltwise import EltwiseLayer
from ..layers.neuron import ReLULayer
from ..layers.normalization import BatchNormLayer, _ncs
from ..layers.scale import ScaleLayer
from ..layers.shape import SplitLayer
from ..math import kernels
from ..proto import caffe_pb2

_SUM = caffe_pb2.EltwiseParameter.SUM


class BNScaleReLU:
    """One chain: layers ``first`` .. ``last`` of ``net``."""

    def __init__(self, net, first, relu):
        self.net, self.first = net, first
        self.last = first + (2 if relu else 1)
        self.bn, self.scale = net.layers[first], net.layers[first + 1]
        self.relu = net.layers[first + 2] if relu else None
        self.bottom, self.top = net.bottom_vecs[first][0], net.top_vecs[first][0]

    def _ready(self):
        bn = self.bn
        return (common.mode() == common.CPU and not bn.use_global_stats
                and self.top.data.dtype in (np.float32, np.float64)
                and self.scale.blobs[0].count == bn.channels and kernels.get() is not None)

    def _shift(self):
        sc = self.scale
        if sc.bias_index is not None:
            return sc.blobs[sc.bias_index].data.reshape(-1)
        return np.zeros(sc.blobs[0].count, sc.blobs[0].data.dtype)

    def forward(self):
        """Runs the chain's forward; False (nothing done) where the layers must run it."""
        if not self._ready():
            return False
        net, bn, c = self.net, self.bn, self.bn.channels
        for i in range(self.first, self.last + 1):
            net.layers[i].reshape(net.bottom_vecs[i], net.top_vecs[i])
        x, y = _ncs(self.bottom.data, c), _ncs(self.top.data, c)
        scale = self.scale.blobs[0].data.reshape(-1)
        if not all(a.flags.c_contiguous for a in (x, y, scale)):
            return False
        buf = bn.x_norm_buffer(x)
        mu, var = np.empty(c), np.empty(c)
        std = np.empty(c, x.dtype)
        slope = float(self.relu.negative_slope) if self.relu is not None else 0.0
        kernels.get().bn_scale_relu_train(x, float(bn.eps), scale, self._shift(), slope,
                                          self.relu is not None, mu, var, std, buf, y)
        bn.x_norm, bn.std = buf, std
        bn._accumulate(mu, var, x.size)
        self.scale.saved_x = buf.reshape(self.scale.dims)    # the Scale's input: BatchNorm's top
        return True

    def backward(self):
        """Runs the chain's backward; False (nothing done) where the layers must run it."""
        net, bn, sc, c = self.net, self.bn, self.scale, self.bn.channels
        if not (self._ready() and all(net.layer_need_backward[self.first:self.last + 1])
                and net.bottom_need_backward[self.first][0]):
            return False
        x_norm = bn.x_norm
        if sc.saved_x is None or sc.saved_x.base is not x_norm:
            return False    # the chain's last forward ran layer by layer, or only in part
        dy, y, dx = (_ncs(a, c) for a in (self.top.diff, self.top.data, self.bottom.diff))
        scale, std = sc.blobs[0].data.reshape(-1), bn.std
        if (x_norm is None or x_norm.shape != dy.shape or std is None or std.shape != (c,)
                or not all(a.flags.c_contiguous for a in (dy, y, dx, x_norm, scale))):
            return False
        want_scale = bool(sc.param_propagate_down[0])
        want_shift = sc.bias_index is not None and bool(sc.param_propagate_down[sc.bias_index])
        dscale = sc.blobs[0].diff.reshape(-1)
        dshift = sc.blobs[sc.bias_index].diff.reshape(-1) if want_shift else dscale[:0]
        slope = float(self.relu.negative_slope) if self.relu is not None else 0.0
        kernels.get().bn_scale_relu_train_backward(
            dy, y, x_norm, scale, std, slope, self.relu is not None, dscale, dshift, want_scale,
            want_shift, dy, self.bottom is not self.top, dx)
        return True


class SumReLU:
    """Eltwise SUM of two bottoms (coefficients 1) into a blob of its own, then a ReLU in place on
    it (ResNet's shortcut joins): forward y = relu(a + b) in one pass instead of two; backward
    g = relu'(y) dy written to the top's diff (as the in-place ReLU leaves it) and to both bottoms'
    diffs in one pass instead of three. Where the net's Split of y into two tops follows (the
    join feeding the next block and its shortcut), the chain takes it in too: its forward shares
    y as before, and the backward's dy is the sum of the two tops' diffs, made in the same pass
    (Split's own backward writes that sum into y's diff, which the ReLU then overwrites with g).
    Equal to the layers bit for bit; no direction keeps state, so either may follow the other's
    layer-by-layer run."""

    def __init__(self, net, first, split):
        self.net, self.first = net, first
        self.last = first + (2 if split else 1)
        self.relu = net.layers[first + 1]
        self.split = net.layers[first + 2] if split else None
        self.bottom, self.top = net.bottom_vecs[first], net.top_vecs[first][0]

    def _flat(self, *arrays):
        if common.mode() != common.CPU or kernels.get() is None:
            return None
        flat = [a.reshape(-1) for a in arrays]
        ok = all(a.flags.c_contiguous and a.dtype == flat[0].dtype and a.size == flat[0].size
                 for a in arrays) and flat[0].dtype in (np.float32, np.float64)
        return flat if ok else None

    def forward(self):
        net = self.net
        for i in (self.first, self.first + 1):
            net.layers[i].reshape(net.bottom_vecs[i], net.top_vecs[i])
        flat = self._flat(self.bottom[0].data, self.bottom[1].data, self.top.data)
        if flat is None:
            return False
        kernels.get().sum2_relu(*flat[:2], float(self.relu.negative_slope), flat[2])
        if self.split is not None:
            i = self.last
            self.split.forward(net.bottom_vecs[i], net.top_vecs[i])
        return True

    def backward(self):
        net = self.net
        if not all(net.layer_need_backward[self.first:self.last + 1]):
            return False
        down = net.bottom_need_backward[self.first]
        k, slope = kernels.get(), float(self.relu.negative_slope)
        diffs = (self.bottom[0].diff, self.bottom[1].diff)
        if self.split is None:
            flat = self._flat(self.top.data, self.top.diff, *diffs)
            if flat is None:
                return False
            k.relu_grad_to2(*flat[:2], slope, *flat[2:], bool(down[0]), bool(down[1]))
            return True
        if not net.bottom_need_backward[self.last][0]:
            return False
        tops = net.top_vecs[self.last]
        flat = self._flat(self.top.data, tops[0].diff, tops[1].diff, self.top.diff, *diffs)
        if flat is None:
            return False
        k.relu_grad_sum2_to2(*flat[:3], slope, *flat[3:], bool(down[0]), bool(down[1]))
        return True


def _in_place_on(net, i, blob, cls):
    return (i < len(net.layers) and type(net.layers[i]) is cls
            and len(net.bottom_vecs[i]) == 1 and len(net.top_vecs[i]) == 1
            and net.bottom_vecs[i][0] is blob and net.top_vecs[i][0] is blob
            and not any(net.layers[i].loss_weights))


class Fusion:
    """The chains of one net: ``by_first`` / ``by_last`` map a chain's first / last layer index
    to it; ``enabled`` switches them all (default: ``CAFFEPY_FUSE`` is not 0)."""

    def __init__(self, chains):
        self.by_first = {g.first: g for g in chains}
        self.by_last = {g.last: g for g in chains}
        self.enabled = kernels.env_on("CAFFEPY_FUSE")

    def __len__(self):
        return len(self.by_first)


def _split_of(net, i, blob):
    """Whether layer i is a Split of ``blob`` into two tops of their own."""
    return (i < len(net.layers) and type(net.layers[i]) is SplitLayer
            and len(net.bottom_vecs[i]) == 1 and net.bottom_vecs[i][0] is blob
            and len(net.top_vecs[i]) == 2 and all(t is not blob for t in net.top_vecs[i])
            and net.top_vecs[i][0] is not net.top_vecs[i][1]
            and not any(net.layers[i].loss_weights))


def _sum_relu(net, i):
    """Whether layers i, i + 1 are a :class:`SumReLU` chain."""
    layer, bottom = net.layers[i], net.bottom_vecs[i]
    return (type(layer) is EltwiseLayer and layer.op == _SUM and len(bottom) == 2
            and all(c == 1 for c in layer.coeffs) and layer.fused_relu is None
            and bottom[0] is not bottom[1] and not any(layer.loss_weights)
            and all(net.top_vecs[i][0] is not b for b in bottom)
            and _in_place_on(net, i + 1, net.top_vecs[i][0], ReLULayer))


def find(net):
    """The net's BatchNorm -> Scale (-> ReLU) and Eltwise SUM -> ReLU chains (module doc)."""
    chains, i = [], 0
    while i < len(net.layers):
        layer = net.layers[i]
        if _sum_relu(net, i):
            chains.append(SumReLU(net, i, _split_of(net, i + 2, net.top_vecs[i][0])))
            i = chains[-1].last + 1
            continue
        if (type(layer) is BatchNormLayer and not layer.scale_bias
                and len(net.bottom_vecs[i]) == 1 and len(net.top_vecs[i]) == 1
                and not any(layer.loss_weights) and net.bottom_vecs[i][0].num_axes >= 2):
            top = net.top_vecs[i][0]
            if _in_place_on(net, i + 1, top, ScaleLayer) \
                    and net.layers[i + 1].layer_param.scale_param.axis in (1, -top.num_axes + 1) \
                    and net.layers[i + 1].layer_param.scale_param.num_axes == 1:
                chains.append(BNScaleReLU(net, i, _in_place_on(net, i + 2, top, ReLULayer)))
                i = chains[-1].last + 1
                continue
        i += 1
    return Fusion(chains)
