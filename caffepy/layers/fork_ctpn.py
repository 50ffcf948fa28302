"""Sequence layers of CTPN's caffe (tianzhi0549/CTPN, with junhyukoh/caffe-lstm's ``Lstm``), also
in the OCR forks built on it (senlinuc/caffe_ocr): ``Transpose``, ``Reverse`` and ``Lstm``.
"""
import numpy as np

from .. import fillers
from ..errors import ShapeError
from .base import Layer, register_layer


@register_layer("Transpose")
class TransposeLayer(Layer):
    """Permute the axes: top axis i is bottom axis dim[i] (y = x.transpose(dim)).

    prototxt: ``transpose_param { dim: ... }`` (a permutation of 0 .. num_axes - 1).
    Backward: dx = dy transposed by the inverse permutation.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.perm = [int(d) for d in self.layer_param.transpose_param.dim]
        if sorted(self.perm) != list(range(bottom[0].num_axes)):
            raise self.error("transpose_param.dim %s is not a permutation of the %d axes of %s"
                             % (self.perm, bottom[0].num_axes, bottom[0].shape), ShapeError)
        self.inverse = list(np.argsort(self.perm))

    def reshape(self, bottom, top):
        if bottom[0].num_axes != len(self.perm):
            raise self.error("bottom %s has %d axes; transpose_param names %d"
                             % (bottom[0].shape, bottom[0].num_axes, len(self.perm)), ShapeError)
        top[0].reshape(tuple(bottom[0].shape[d] for d in self.perm))

    def forward_cpu(self, bottom, top):
        top[0].data[...] = bottom[0].data.transpose(self.perm)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff.transpose(self.inverse)


@register_layer("Reverse")
class ReverseLayer(Layer):
    """Reverse the order along one axis: y[.., i, ..] = x[.., L - 1 - i, ..]; dx likewise.

    prototxt: ``reverse_param { axis: 0 }`` (a sequence's time axis in CTPN's T x N x C blobs).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        axis = int(self.layer_param.reverse_param.axis)
        if not -bottom[0].num_axes <= axis < bottom[0].num_axes:
            raise self.error("reverse_param.axis %d out of range for %s" % (axis, bottom[0].shape))
        self.axis = axis % bottom[0].num_axes

    def reshape(self, bottom, top):
        top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = np.flip(bottom[0].data, self.axis)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = np.flip(top[0].diff, self.axis)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@register_layer("Lstm")
class LstmLayer(Layer):
    """junhyukoh's LSTM (caffe-lstm, as CTPN ships it) over a T x N x I sequence.

        z_t = x_t W_x^T + b + [t > 0] h_{t-1} W_h^T        (4H values: gates i, f, o, g)
        i, o = sigmoid(z_i), sigmoid(z_o); f = sigmoid(z_f) for t > 0, 0 at t = 0; g = tanh(z_g)
        c_t = f * c_{t-1} + i * g;  h_t = o * tanh(c_t)     (c_{-1} = h_{-1} = 0)
    Backward is BPTT; with ``clipping_threshold`` > 0 the gradient of z is clipped to
    [-threshold, threshold] (the fork's rule). The fork's CPU forward adds sample 0's recurrent
    term to every sample (its GPU path, which people ran, does not); this follows the GPU math.

    prototxt: ``lstm_param { num_output (H) clipping_threshold: 0 weight_filler bias_filler }``.
    Bottom: x (T x N x ...; I = count of the axes after 1). Top: h (T x N x H).
    Blobs: W_x (4H x I), W_h (4H x H), b (4H). The fork's optional second bottom (sequence
    continuation with state kept across batches) is not supported.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.lstm_param
        if not p.num_output:
            raise self.error("lstm_param.num_output must be positive")
        if bottom[0].num_axes < 3:
            raise self.error("bottom %s must be T x N x ... (3 or more axes)" % (bottom[0].shape,),
                             ShapeError)
        self.H, self.I = int(p.num_output), bottom[0].count_range(2)
        self.clip = float(p.clipping_threshold)
        if not self.blobs:
            wx, wh, b = (self.new_blob(s) for s in ((4 * self.H, self.I), (4 * self.H, self.H),
                                                    (4 * self.H,)))
            fillers.fill(wx, p.weight_filler)
            fillers.fill(wh, p.weight_filler)
            fillers.fill(b, p.bias_filler)
            self.blobs = [wx, wh, b]

    def reshape(self, bottom, top):
        if bottom[0].count_range(2) != self.I:
            raise self.error("input size %d per step; the weights take %d"
                             % (bottom[0].count_range(2), self.I), ShapeError)
        top[0].reshape((bottom[0].shape[0], bottom[0].shape[1], self.H))

    def forward_cpu(self, bottom, top):
        T, N = bottom[0].shape[:2]
        H = self.H
        wx, wh, b = (blob.data.astype(np.float64) for blob in self.blobs)
        x = bottom[0].data.reshape(T, N, self.I).astype(np.float64)
        z = x @ wx.T + b
        gates, cells, hs = np.zeros((T, N, 4 * H)), np.zeros((T, N, H)), np.zeros((T, N, H))
        h, c = np.zeros((N, H)), np.zeros((N, H))
        for t in range(T):
            zt = z[t] + (h @ wh.T if t > 0 else 0.0)
            g = np.empty_like(zt)
            g[:, :H] = _sigmoid(zt[:, :H])
            g[:, H:2 * H] = _sigmoid(zt[:, H:2 * H]) if t > 0 else 0.0
            g[:, 2 * H:3 * H] = _sigmoid(zt[:, 2 * H:3 * H])
            g[:, 3 * H:] = np.tanh(zt[:, 3 * H:])
            c = g[:, H:2 * H] * c + g[:, :H] * g[:, 3 * H:]
            h = g[:, 2 * H:3 * H] * np.tanh(c)
            gates[t], cells[t], hs[t] = g, c, h
        self.x, self.gates, self.cells, self.hs = x, gates, cells, hs
        top[0].data[...] = hs

    def backward_cpu(self, top, propagate_down, bottom):
        T, N = self.hs.shape[:2]
        H = self.H
        wx, wh = (blob.data.astype(np.float64) for blob in self.blobs[:2])
        dh_next, dc_next = np.zeros((N, H)), np.zeros((N, H))
        dz = np.zeros((T, N, 4 * H))
        dy = top[0].diff.reshape(T, N, H).astype(np.float64)
        for t in range(T - 1, -1, -1):
            g, c = self.gates[t], self.cells[t]
            c_prev = self.cells[t - 1] if t > 0 else np.zeros((N, H))
            i, f, o, gg = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
            dh = dy[t] + dh_next
            tc = np.tanh(c)
            dc = dc_next + dh * o * (1.0 - tc * tc)
            d = np.concatenate([dc * gg * i * (1 - i),
                                (dc * c_prev * f * (1 - f)) if t > 0 else np.zeros((N, H)),
                                dh * tc * o * (1 - o), dc * i * (1 - gg * gg)], axis=1)
            if self.clip > 0:
                d = np.clip(d, -self.clip, self.clip)
            dz[t] = d
            dc_next = dc * f if t > 0 else np.zeros((N, H))
            dh_next = d @ wh if t > 0 else np.zeros((N, H))
        flat = dz.reshape(T * N, 4 * H)
        for blob, grad in zip(self.blobs, (flat.T @ self.x.reshape(T * N, self.I),
                                           sum((dz[t].T @ self.hs[t - 1] for t in range(1, T)),
                                               np.zeros((4 * H, H))),
                                           flat.sum(axis=0))):
            blob.diff[...] += grad
        if propagate_down[0]:
            bottom[0].diff[...] = (flat @ wx).reshape(bottom[0].shape)
