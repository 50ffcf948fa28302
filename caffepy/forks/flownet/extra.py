"""More layers of lmb-freiburg/flownet2: Correlation1D (DispNet-style horizontal correlation),
Accum (resize and stack several blobs), NegReLU, Mean and LpqLoss."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer
from .flow import CorrelationLayer
from .loss import _FlowDifferenceLoss


@register_layer("Correlation1D")
class Correlation1DLayer(CorrelationLayer):
    """Multiplicative correlation along x only (the fork's corr1d kernels).

    Bottoms are zero-padded by ``pad`` in x only. With k = kernel_size, d = max_displacement,
    R = d / stride_2: displacements o stride_2 for o in [-R, R] (``single_direction: 0``),
    [0, R] (1, to the right) or [-(R + 1), -1] (-1, as the fork's x_shift = -(R + 1): the
    leftmost output then reads (R + 1) stride_2 - d pixels before the padded row, which in the
    fork's row-major buffer is the row above's right padding, zero: caffepy pads that many zeros
    more on the left, and refuses the layer when ``pad`` is smaller, where the fork reads pixels);
        y[n, t, i, j] = sum_{c, a < k, b < k} f1[n, c, i s1 + a, x0 + b]
                                              f2[n, c, i s1 + a, x0 + o_t stride_2 + b] / (k k C)
    with x0 = j stride_1 + d (padded x). Output W' = ceil((W + 2 pad - 2 (d + (k-1)/2)) / s1),
    H' = ceil((H - (k - 1)) / s1). Backward: the matching sums.

    prototxt: ``correlation_param { pad: 0 kernel_size max_displacement stride_1: 1 stride_2: 1
    single_direction: 0 }`` (SUBTRACT and do_abs are refused). Bottoms f1, f2 (N, C, H, W);
    top (N, number of displacements, H', W').
    """
    pad_axes = (3,)

    def layer_setup(self, bottom, top):
        p = self.layer_param.correlation_param
        if p.correlation_type != p.MULTIPLY or p.do_abs:
            raise self.error("only multiplicative correlation is supported (correlation_type "
                             "SUBTRACT and do_abs are not)")
        self._geometry(p)
        if p.single_direction not in (-1, 0, 1):
            raise self.error("single_direction must be -1, 0 or 1")
        r = self.d // self.s2
        self.offsets = {0: range(-r, r + 1), 1: range(0, r + 1),
                        -1: range(-(r + 1), 0)}[int(p.single_direction)]
        self.lead = max(0, -min(self.offsets) * self.s2 - self.d)
        if self.lead > self.pad:
            raise self.error("single_direction: -1 reaches %d pixels left, beyond max_displacement "
                             "%d and pad %d (the fork reads the row above there)"
                             % (-min(self.offsets) * self.s2, self.d, self.pad))

    def _padded(self, a):
        return np.pad(a, [(0, 0)] * 3 + [(self.pad + self.lead, self.pad)])

    def _unpadded(self, g, shape):
        return g[..., self.pad + self.lead:self.pad + self.lead + shape[3]]

    def reshape(self, bottom, top):
        N, C, H, W = self._bottom_shape(bottom)
        kr = (self.k - 1) // 2
        self.out = (-(-(H - 2 * kr) // self.s1),
                    -(-(W + 2 * self.pad - 2 * (self.d + kr)) // self.s1))
        if min(self.out) < 1:
            raise self.error("the neighbourhood and kernel do not fit a %dx%d input" % (H, W),
                             ShapeError)
        top[0].reshape(N, len(self.offsets), self.out[0], self.out[1])

    def _terms(self):
        oh, ow = self.out
        for t, o in enumerate(self.offsets):
            dx = o * self.s2
            for a in range(self.k):
                for b in range(self.k):
                    x0 = self.lead + self.d + b
                    rows = slice(a, a + (oh - 1) * self.s1 + 1, self.s1)
                    cols = slice(x0, x0 + (ow - 1) * self.s1 + 1, self.s1)
                    cols2 = slice(x0 + dx, x0 + dx + (ow - 1) * self.s1 + 1, self.s1)
                    yield t, rows, cols, rows, cols2


def _align_corners_matrix(n_out, n_in):
    """Rows: bilinear weights of output o at input position o (n_in - 1) / (n_out - 1)."""
    A = np.zeros((n_out, n_in))
    t = (np.arange(n_out, dtype=np.float32) / np.float32(max(n_out - 1, 1))
         * np.float32(n_in - 1)).astype(np.float64)
    lo = np.minimum(np.floor(t).astype(np.int64), n_in - 1)
    frac = t - lo
    A[np.arange(n_out), lo] += 1 - frac
    hi = np.minimum(lo + 1, n_in - 1)
    A[np.arange(n_out), hi] += np.where(lo + 1 < n_in, frac, 0.0)
    return A


@register_layer("Accum")
class AccumLayer(Layer):
    """FlowNet 2's Accum: each bottom resized bilinearly (corners aligned: output o reads input
    o (n - 1) / (n' - 1)) to one size, then stacked in the channels.

    Size: with ``have_reference`` the last bottom's H x W (it gives only the size); otherwise the
    largest bottom height and width, or ``top_height`` x ``top_width`` (or the largest sizes
    rounded up to ``size_divisible_by``) when both are larger. Backward: the transposed
    interpolation.

    prototxt: ``accum_param { top_height: 0 top_width: 0 size_divisible_by: 0
    have_reference: false }``. Bottoms (N, C_i, H_i, W_i) [, reference]. Top (N, sum C_i, H, W).
    """
    min_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        p = self.layer_param.accum_param
        data = bottom[:-1] if p.have_reference else bottom
        if not data:
            raise self.error("have_reference needs a data bottom and the reference")
        n = data[0].shape[0]
        if any(b.num_axes != 4 or b.shape[0] != n for b in bottom):
            raise self.error("bottoms must be N x C x H x W with one N", ShapeError)
        if p.have_reference:
            h, w = bottom[-1].shape[2:]
        else:
            mh, mw = max(b.shape[2] for b in data), max(b.shape[3] for b in data)
            if p.HasField("size_divisible_by") and p.size_divisible_by:
                d = float(p.size_divisible_by)
                th, tw = int(np.ceil(mh / d) * d), int(np.ceil(mw / d) * d)
            else:
                th, tw = p.top_height, p.top_width
            h, w = (th, tw) if th > mh and tw > mw else (mh, mw)
        self.mats = [(_align_corners_matrix(h, b.shape[2]), _align_corners_matrix(w, b.shape[3]))
                     for b in data]
        top[0].reshape(n, sum(b.shape[1] for b in data), h, w)

    def forward_cpu(self, bottom, top):
        c = 0
        for b, (ay, ax) in zip(bottom, self.mats):
            k = b.shape[1]
            top[0].data[:, c:c + k] = ay @ b.data @ ax.T
            c += k

    def backward_cpu(self, top, propagate_down, bottom):
        c = 0
        for i, (b, (ay, ax)) in enumerate(zip(bottom, self.mats)):
            k = b.shape[1]
            if propagate_down[i]:
                b.diff[...] = ay.T @ top[0].diff[:, c:c + k] @ ax
            c += k


@register_layer("NegReLU")
class NegReLULayer(Layer):
    """FlowNet 2's NegReLU: ReLU mirrored, y = min(x, 0) + s max(x, 0) (s =
    ``relu_param.negative_slope``, default 0); dx = dy (x < 0 ? 1 : s). Bottom / top any shape."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if top[0] is not bottom[0]:
            top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        x, s = bottom[0].data, self.layer_param.relu_param.negative_slope
        self.neg = x < 0
        top[0].data[...] = np.where(self.neg, x, s * x)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            s = self.layer_param.relu_param.negative_slope
            bottom[0].diff[...] = top[0].diff * np.where(self.neg, 1.0, s)


@register_layer("Mean")
class MeanLayer(Layer):
    """FlowNet 2's Mean: y = output_scale (input_scale x + mean_scale m) per bottom, with
    m = +mean (``operation: ADD``) or -mean (SUBTRACT); mean from ``file`` (a BlobProto, repeated
    over the channels when it has fewer) or ``value`` (value[c % len]). No backward (as the fork).

    prototxt: ``mean_param { operation file value mean_scale: 1 input_scale: 1
    output_scale: 1 }``. Bottoms / tops: k blobs (N, C, H, W) each.
    """
    min_bottom_blobs = 1
    equal_num_bottom_top_blobs = True

    def layer_setup(self, bottom, top):
        p = self.layer_param.mean_param
        if not p.HasField("operation") or p.operation not in (p.ADD, p.SUBTRACT):
            raise self.error("mean_param.operation (ADD or SUBTRACT) is required")
        self.mean = None
        if p.file:
            from ..video.data import _load_mean
            try:
                self.mean = _load_mean(p.file)
            except Exception as e:
                raise self.error("cannot read mean file %s: %s" % (p.file, e))
        elif not p.value:
            raise self.error("mean_param needs a file or values")

    def reshape(self, bottom, top):
        p = self.layer_param.mean_param
        for b, t in zip(bottom, top):
            if b.num_axes != 4:
                raise self.error("bottoms must be N x C x H x W", ShapeError)
            m = self.mean
            if m is not None and (m.ndim < 2 or m.shape[-2:] != b.shape[2:]
                                  or b.shape[1] % int(np.prod(m.shape[:-2]) or 1)):
                raise self.error("mean %s does not fit bottom %s" % (m.shape, b.shape), ShapeError)
            if m is None and b.shape[1] % len(p.value):
                raise self.error("%d values do not divide %d channels" % (len(p.value), b.shape[1]),
                                 ShapeError)
            t.reshape(b.shape)

    def forward_cpu(self, bottom, top):
        p = self.layer_param.mean_param
        sign = -1.0 if p.operation == p.SUBTRACT else 1.0
        for b, t in zip(bottom, top):
            C = b.shape[1]
            if self.mean is not None:
                plane = self.mean.reshape(-1, *b.shape[2:])
                m = np.resize(plane, (C,) + tuple(b.shape[2:]))     # mean[j % count]
            else:
                m = np.resize(np.asarray(p.value, dtype=np.float64), C).reshape(C, 1, 1)
            t.data[...] = p.output_scale * (p.input_scale * b.data + p.mean_scale * sign * m)


@register_layer("LpqLoss")
class LpqLossLayer(_FlowDifferenceLoss):
    """FlowNet 2's LpqLoss: a robust per-location loss.

    d = x - y (or x); NaN entries masked to 0; a = |d|;
        L = sum_{n, h, w} (w sum_c (a + e_p)^p + e_q)^q / normalizer
    with w = 1 / C (``l2_prescale_by_channels``) or 1, normalizer = N or (non-NaN entries / C)
    (``normalize_by_num_entries``). dx = sign(d) (sign(0) = -1, as the fork) q S^(q-1) w p
    (a + e_p)^(p-1) / normalizer (0 where masked), S = w sum_c (a + e_p)^p + e_q; y gets -dx.
    p, q change at the iterations of ``pq_episode_starts_at_iter`` (counted as this layer's
    TRAIN forwards: the solver's iteration when iter_size is 1).

    prototxt: ``lpq_loss_param { p q pq_episode_starts_at_iter p_epsilon: 0 q_epsilon: 0.01
    l2_prescale_by_channels: false normalize_by_num_entries: false }``. Bottoms x [, y]
    (N, C, H, W). Top: the loss ().
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.lpq_loss_param
        starts, ps, qs = list(p.pq_episode_starts_at_iter), list(p.p), list(p.q)
        if not starts and len(ps) == 1 and len(qs) == 1:
            starts = [0]
        if not (len(starts) == len(ps) == len(qs)) or not starts:
            raise self.error("pq_episode_starts_at_iter, p and q need one entry each per episode "
                             "(got %d, %d, %d)" % (len(starts), len(ps), len(qs)))
        if starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:])):
            raise self.error("pq_episode_starts_at_iter must start at 0 and increase")
        self.schedule = list(zip(starts, ps, qs))
        self.forwards = 0

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4 or (len(bottom) == 2 and bottom[0].shape != bottom[1].shape):
            raise self.error("bottoms must be N x C x H x W of equal shapes", ShapeError)
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        prm = self.layer_param.lpq_loss_param
        it = self.forwards
        if self.phase == self._caffe_pb2.TRAIN:
            self.forwards += 1
        self.p, self.q = [(p, q) for s, p, q in self.schedule if s <= it][-1]
        d, self.mask = self._difference(bottom)
        C = d.shape[1]
        self.sign = np.where(d > 0, 1.0, -1.0)
        self.a = np.abs(d) + prm.p_epsilon
        self.w = 1.0 / C if prm.l2_prescale_by_channels else 1.0
        self.S = self.w * (self.a ** self.p).sum(axis=1, keepdims=True) + prm.q_epsilon
        self.norm = self.mask.sum() / C if prm.normalize_by_num_entries else d.shape[0]
        top[0].data[...] = (self.S ** self.q).sum() / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        alpha = float(top[0].diff) / self.norm
        g = (alpha * self.q * self.S ** (self.q - 1) * self.w * self.p * self.a ** (self.p - 1)
             * self.sign)
        self._put_diff(g, propagate_down, bottom)
