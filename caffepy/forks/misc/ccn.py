"""Layers of limuhit/CCN (a learned image-compression Caffe) behind its V1 types CONST_SCALE, DTOW,
MTRANSPOSE, MULTOBIN, BCODER_LOSS and MLQUANT: ConstScale, Dtow (depth <-> space rearrangement,
plain or along anti-diagonals), MTranspose (channel groups moved last), MulToBin (integer codes
split into bit groups), BcoderLoss and MLQuant (a learned per-channel quantiser). Each
rearrangement is a permutation; its backward is the inverse permutation.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, NeuronLayer, register_layer


@register_layer("ConstScale")
class ConstScaleLayer(NeuronLayer):
    """y = scale x + bias;  dL/dx = scale dL/dy (limuhit/CCN, const_scale_layer.cpp).
    prototxt: ``const_scale_param { scale: 1 bias: 0 }``."""

    def forward_cpu(self, bottom, top):
        p = self.layer_param.const_scale_param
        top[0].data[...] = bottom[0].data * p.scale + p.bias

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff * self.layer_param.const_scale_param.scale


class _Permute(Layer):
    """top.flat[dst] = bottom.flat (``scatter``) or top.flat = bottom.flat[dst]; the backward
    applies the inverse."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def forward_cpu(self, bottom, top):
        src, out = bottom[0].data.reshape(-1), top[0].data.reshape(-1)
        if self.scatter:
            out[self.dst] = src
        else:
            out[...] = src[self.dst]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            dy, dx = top[0].diff.reshape(-1), bottom[0].diff.reshape(-1)
            if self.scatter:
                dx[...] = dy[self.dst]
            else:
                dx[self.dst] = dy


@register_layer("Dtow")
class DtowLayer(_Permute):
    """Depth to space and back (limuhit/CCN, dtow_layer.cpp), p = ``psize``:

    MDTOW: N x C x H x W -> N x C/p^2 x pH x pW, channel c = c' p^2 + r going to the pixel
    (h p + r // p, w p + r % p) of channel c'; MWTOD: the inverse arrangement
    (N x C x H x W -> N x C p^2 x H/p x W/p). LDTOW / LWTOD: the same with the p x p cell
    filled along its anti-diagonals (the fork's zig-zag index) and the channels taken in
    ``ngroup`` interleaved groups. prototxt: ``dtow_param { psize: 2 method: MDTOW ngroup: 1 }``.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.dtow_param
        m = type(p).DtowMethod
        self.p, self.g = int(p.psize), int(p.ngroup)
        if self.p < 1 or self.g < 1:
            raise self.error("dtow_param: psize and ngroup must be positive")
        self.d2w = p.method in (m.Value("MDTOW"), m.Value("LDTOW"))
        self.zig = p.method in (m.Value("LDTOW"), m.Value("LWTOD"))
        p2 = self.p * self.p
        self.offset = np.zeros((2, p2), np.int64)
        xi = 0
        for i in range(2 * self.p - 1):
            for j in range(max(0, i - self.p + 1), min(self.p, i + 1)):
                self.offset[0, xi] = j - xi // self.p
                self.offset[1, xi] = i - j - xi % self.p
                xi += 1

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be N x C x H x W", ShapeError)
        n, c, h, w = bottom[0].shape
        p2 = self.p * self.p
        if self.d2w:
            if c % (p2 * (self.g if self.zig else 1)):
                raise self.error("channels %d must be a multiple of psize^2 (x ngroup)" % c,
                                 ShapeError)
            shape = (n, c // p2, h * self.p, w * self.p)
        else:
            if h % self.p or w % self.p:
                raise self.error("height and width must be multiples of psize", ShapeError)
            shape = (n, c * p2, h // self.p, w // self.p)
        top[0].reshape(shape)
        self._index(bottom[0].shape, shape)

    def _zig(self, n, c, h, w):
        """The fork's zig kernel: the target index of each element of an N x c x h x w array."""
        p, g = self.p, self.g
        i = np.arange(n * c * h * w)
        pw, ph = i % w, (i // w) % h
        pc, pn = (i // (w * h)) % c, i // (w * h * c)
        mod = p * p * g
        tch = c // mod * g
        tt = pc % mod
        tc = pc // mod * g + tt % g
        tt = tt // g
        fh, fw = tt // p, tt % p
        th = ph * p + fh + self.offset[0, tt]
        tw = pw * p + fw + self.offset[1, tt]
        return ((pn * tch + tc) * h * p + th) * w * p + tw

    def _index(self, shape, out):
        n, c, h, w = shape
        p, p2 = self.p, self.p * self.p
        self.scatter = True
        if self.zig:
            if self.d2w:
                self.dst = self._zig(n, c, h, w)
            else:
                self.dst, self.scatter = self._zig(*out), False
            return
        i = np.arange(n * c * h * w)
        tw, th = i % w, (i // w) % h
        tc, tn = (i // (w * h)) % c, i // (w * h * c)
        _, co, ho, wo = out
        if self.d2w:
            pc, rc = tc // p2, tc % p2
            ph, pw = th * p + rc // p, tw * p + rc % p
        else:
            ph, pw = th // p, tw // p
            pc = tc * p2 + (th % p) * p + tw % p
        self.dst = tn * c * h * w + (pc * ho + ph) * wo + pw


@register_layer("MTranspose")
class MTransposeLayer(_Permute):
    """Channel groups moved to the last axis (limuhit/CCN, mtranspose_layer.cpp), G = ``groups``:
    N x C x H x W -> (N C H W / G) x G, element (n, c, s) going to row
    n C S / G + (c // G) S + s, column c % G (S = H W). ``inverse: true`` undoes it into
    N x channel x height x width from the given ``width``, ``height``, ``channel`` (the fork has
    no backward for the inverse; caffepy's is the permutation's). prototxt: ``mtranspose_param
    { groups: 1 inverse: false width height channel }``.
    """

    def reshape(self, bottom, top):
        p = self.layer_param.mtranspose_param
        g = int(p.groups)
        if p.inverse:
            c, h, w = int(p.channel), int(p.height), int(p.width)
            if not c * h * w or bottom[0].count % (c * h * w):
                raise self.error("mtranspose_param: channel x height x width must divide the "
                                 "bottom's count", ShapeError)
            n = bottom[0].count // (c * h * w)
            top[0].reshape((n, c, h, w))
        else:
            if bottom[0].num_axes != 4:
                raise self.error("bottom must be N x C x H x W", ShapeError)
            n, c, h, w = bottom[0].shape
            top[0].reshape((n * c * h * w // g, g))
        if g < 1 or c % g:
            raise self.error("channels %d must be a multiple of groups %d" % (c, g), ShapeError)
        s = h * w
        i = np.arange(n * c * s)
        pn, pc, ps = i // (s * c), (i // s) % c, i % s
        self.dst = (pn * s * c // g + pc // g * s + ps) * g + pc % g
        self.scatter = not p.inverse


@register_layer("MulToBin")
class MulToBinLayer(Layer):
    """Integer codes split into ``levels`` groups of ``mod`` bits (limuhit/CCN,
    multobin_layer.cpp): N x C x H x W -> N x C levels x H x W, channel c l + j holding
    (v >> (j mod)) % 2^mod for v = int(x) (j counted from the last channel with ``inverse``).
    ``imp``: v = 0 gives all zeros, else (v - 1) is split and each digit is 1 + its value.
    No backward in the fork; caffepy writes a zero gradient. prototxt: ``multobin_param
    { levels: 1 mod: 1 inverse: false imp: false }``.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be N x C x H x W", ShapeError)
        n, c, h, w = bottom[0].shape
        top[0].reshape((n, c * self.layer_param.multobin_param.levels, h, w))

    def forward_cpu(self, bottom, top):
        p = self.layer_param.multobin_param
        v = bottom[0].data.astype(np.int64) & 0xFFFFFFFF
        flag = np.ones_like(v)
        if p.imp:
            flag = (v > 0).astype(np.int64)
            v = np.where(v > 0, v - 1, v)
        n, c, h, w = v.shape
        digits = [((v >> (j * p.mod)) % (1 << p.mod)) * flag + (flag if p.imp else 0)
                  for j in range(p.levels)]
        if p.inverse:
            digits = digits[::-1]
        top[0].data[...] = np.stack(digits, 2).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = 0


@register_layer("BcoderLoss")
class BcoderLossLayer(LossLayer):
    """Binary cross-entropy of codes against targets, as a KL divergence (limuhit/CCN,
    bcoder_loss_layer.cpp). With e = 1e-6, per element of x (bottom 0) and t (bottom 1):

        d = t log(t + e) - t log(x + e) + (1 - t) log(1 - t + e) - (1 - t) log(1 - x + e)
        loss = sum |w d| / W;   dL/dx = g w (-t / (x + e) + (1 - t) / (1 + e - x)) / W

    with w the optional third bottom (W = sum |w|) or 1 (W = the element count). Bottoms: x, t
    [, w], all of one count. Top: loss.
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 2
    max_bottom_blobs = 3

    def reshape(self, bottom, top):
        if any(b.count != bottom[0].count for b in bottom[1:]):
            raise self.error("bottoms must have one count, got %s"
                             % ([b.shape for b in bottom],), ShapeError)
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        e = 1e-6
        x = bottom[0].data.astype(np.float64)
        t = bottom[1].data.reshape(x.shape)
        d = (t * np.log(t + e) - t * np.log(x + e) + (1 - t) * np.log(1 - t + e)
             - (1 - t) * np.log(1 - x + e))
        self.w = bottom[2].data.reshape(x.shape) if len(bottom) > 2 else None
        if self.w is not None:
            d = d * self.w
        self.norm = float(np.abs(self.w).sum()) if self.w is not None else x.size
        top[0].data[...] = np.abs(d).sum() / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down[1:]):
            raise self.error("cannot backpropagate to the targets or the weights")
        if propagate_down[0]:
            e = 1e-6
            x = bottom[0].data
            t = bottom[1].data.reshape(x.shape)
            g = (-t / (x + e) + (1 - t) / (1 + e - x)) * float(top[0].diff) / self.norm
            if self.w is not None:
                g = g * self.w
            bottom[0].diff[...] = g


@register_layer("MLQuant")
class MLQuantLayer(Layer):
    """Learned multi-level quantiser per channel (limuhit/CCN, ml_quant_layer.cpp), the
    ``method: SINGLE`` form. Blob 0 holds per channel c and L = ``groups`` levels the values
    b[c, 0..L-1]: level k of channel c is q_k = b[c, 0] + sum_{1..k} exp(b[c, i]). Each input
    goes to its nearest level (below q_0: q_0; above q_{L-1}: q_{L-1}):

        top[0] = q_{k(x)};  top[1] (optional) = k(x)
        dL/dx = dL/dtop[0] + s dL/dtop[1]   (straight through; s = blob 1[0])
        d/db[c, i] = sum over the channel's inputs with k(x) >= i of (q_{k(x)} - x), times
        exp(b[c, i]) for i > 0: the levels follow the quantisation error, not the loss.

    Blob 1 holds (s = 1, decay = 0.999, the forward count, the period P = 200, the last mean
    squared error written by backward); blob 2 the decayed per-level use counts. Every forward
    multiplies the counts by the decay; every P-th forward first respreads the unused top levels
    (the last used step split evenly in their place) and, when level 0 went unused, moves it up
    by one step (the fork's check_weight). New blobs: b[c, 0] = 1 / (2L), b[c, i] = log(1 / L).
    ``method: NEIGHBOR`` (levels chosen by the neighbours' codes) is refused. prototxt:
    ``mlquant_param { groups: L method: SINGLE }``. Bottom: N x C x H x W; tops: the quantised
    values [, the level indices].
    """
    exact_num_bottom_blobs = 1
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.mlquant_param
        if p.method != type(p).MLQuantMethod.Value("SINGLE"):
            raise self.error("mlquant_param: only method SINGLE is supported")
        self.levels, self.ch = int(p.groups), bottom[0].shape[1]
        if self.levels < 3:
            raise self.error("mlquant_param: groups must be at least 3")
        shape = (1, self.ch, 1, self.levels)
        if not self.blobs:
            b = np.full(shape, np.log(1.0 / self.levels))
            b[..., 0] = 0.5 / self.levels
            self.blobs = [self.new_blob(shape), self.new_blob((5, 1, 1, 1)), self.new_blob(shape)]
            self.blobs[0].data[...] = b
            self.blobs[1].data.reshape(-1)[:4] = (1.0, 0.999, 0, 200)
        if self.blobs[0].count != self.ch * self.levels or self.blobs[1].count != 5:
            raise self.error("parameter blobs do not match %d channels x %d levels"
                             % (self.ch, self.levels))
        self.param_propagate_down = [True, False, False]

    def reshape(self, bottom, top):
        for t in top:
            t.reshape(bottom[0].shape)

    def _check_weight(self):
        b = self.blobs[0].data.reshape(self.ch, self.levels)
        cnt = self.blobs[2].data.reshape(self.ch, self.levels)
        n = self.levels
        for c in range(self.ch):
            j = n - 1
            while j > 1 and not cnt[c, j] > 0:
                j -= 1
            b[c, j:] = b[c, j] - np.log(n - j)
            if cnt[c, 0] < 1:
                b[c, 0] += np.exp(b[c, 1])
                b[c, 1] = b[c, 2] = np.log((np.exp(b[c, 1]) + np.exp(b[c, 2])) / 2)

    def forward_cpu(self, bottom, top):
        state = self.blobs[1].data.reshape(-1)
        it, period = int(state[2]), int(state[3])
        state[2] += 1
        if it != 0 and period and it % period == 0:
            self._check_weight()
        b = self.blobs[0].data.reshape(self.ch, self.levels)
        steps = np.concatenate([b[:, :1], np.exp(b[:, 1:])], 1)
        self.steps = steps
        q = np.cumsum(steps, 1)                                    # C x L levels
        x = bottom[0].data
        xc = np.moveaxis(x, 1, -1)                                 # ... x C
        below = xc[..., None] >= q                                 # reached level k
        k = np.maximum(below.sum(-1) - 1, 0)
        up = np.minimum(k + 1, self.levels - 1)
        lo, hi = np.take_along_axis(np.broadcast_to(q, xc.shape + (self.levels,)),
                                    np.stack([k, up], -1), -1).transpose(-1, *range(xc.ndim))
        nearer_up = (up > k) & (xc - lo >= hi - xc)    # the fork rounds midpoints up
        k = np.where(nearer_up, up, k)
        k = np.where(xc < q[:, 0], 0, k)
        self.k = np.moveaxis(k, -1, 1)
        qv = np.take_along_axis(np.broadcast_to(q, xc.shape + (self.levels,)), k[..., None],
                                -1)[..., 0]
        counts = self.blobs[2].data.reshape(self.ch, self.levels)
        counts *= state[1]
        np.add.at(counts, (np.broadcast_to(np.arange(self.ch), k.shape).reshape(-1),
                           k.reshape(-1)), 1)
        top[0].data[...] = np.moveaxis(qv, -1, 1)
        if len(top) > 1:
            top[1].data[...] = self.k

    def backward_cpu(self, top, propagate_down, bottom):
        x = bottom[0].data
        err = top[0].data - x
        self.blobs[1].data.reshape(-1)[4] = float((err * err).mean())
        if propagate_down[0]:
            dx = top[0].diff.copy()
            if len(top) > 1:
                dx += self.blobs[1].data.reshape(-1)[0] * top[1].diff
            bottom[0].diff[...] = dx
        if self.param_propagate_down[0]:
            e = np.moveaxis(err, 1, -1).reshape(-1, self.ch)
            k = np.moveaxis(self.k, 1, -1).reshape(-1, self.ch)
            reached = k[..., None] >= np.arange(self.levels)       # M x C x L
            g = (reached * e[..., None]).sum(0)
            g[:, 1:] *= self.steps[:, 1:]
            self.blobs[0].diff[...] = g.reshape(self.blobs[0].shape)
