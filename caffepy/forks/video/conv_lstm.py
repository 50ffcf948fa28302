"""ConvLSTM and ConvLSTMReLU: the convolutional LSTM of agethen's Caffe ConvLSTM, as
t2mhanh/caffe_convLSTM_WTA carries it (src/caffe/layers/conv_lstm_layer.cpp,
conv_lstm_unit_layer.cpp, conv_lstm_relu_layer.cpp, conv_lstm_relu_unit_layer.cpp,
include/caffe/layers/conv_lstm_helper.hpp;
the messages are harvested from Ricardozzf/sdsrcnn, garrickbrazil/SDS-RCNN and others too).

The fork unrolls the recurrence into a net of Convolution, Scale, Concat, Eltwise and
ConvLSTMUnit layers; this computes the same function with a loop over the time steps, its
parameter blobs in the unrolled net's order.
"""
import re

import numpy as np

from ...blob import Blob
from ...layers.base import Layer, create_layer, register_layer
from ...proto import caffe_pb2


def _sigmoid(x):
    return 0.5 * np.tanh(0.5 * x) + 0.5


def _conv_layer(lcp, num_output, bias_term, name, phase, dtype):
    """A Convolution over axis 2 made as the fork's ConvLSTMHelper::CopyConv makes it: only the
    repeated kernel_size / pad / stride / dilation, the fillers, group and bias_term carry over
    (kernel_h, pad_h, stride_h ... are not copied; axis is always 2)."""
    lp = caffe_pb2.LayerParameter(name=name, type="Convolution")
    cp = lp.convolution_param
    cp.num_output = num_output
    cp.kernel_size.extend(lcp.kernel_size)
    cp.pad.extend(lcp.pad)
    cp.stride.extend(lcp.stride)
    cp.dilation.extend(lcp.dilation)
    cp.weight_filler.CopyFrom(lcp.weight_filler)
    cp.bias_filler.CopyFrom(lcp.bias_filler)
    cp.bias_term = bias_term
    cp.group = lcp.group
    cp.axis = 2
    layer = create_layer(lp, phase=phase, dtype=dtype)
    layer.keep_columns = False          # one layer serves every time step
    return layer


class _ConvLSTMBase(Layer):
    """A convolutional LSTM over T steps of N streams of C_in x H x W maps (Shi et al. 2015, with
    the fork's peepholes on the previous cell):

        gates_t = W_x * x_t + W_h * (cont_t h_{t-1}) + b
                  + [w_i . c_{t-1}, w_f . c_{t-1}, w_o . c_{t-1}, 0]    (on the channels)
        i, f, o = sigmoid(gates_t[0:C]), cont_t sigmoid(gates_t[C:2C]), sigmoid(gates_t[2C:3C])
        g = act(gates_t[3C:4C]);  c_t = f c_{t-1} + i g;  h_t = o act(c_t)

    ``*`` is a convolution (kernel, pad, stride, dilation, group, fillers of
    ``lstm_conv_param``; it must keep H x W), ``act`` tanh (ConvLSTM) or max(0, .)
    (ConvLSTMReLU, whose ReLU derivatives are taken as 1 where the value is > 0). The peephole
    weights w (a Scale on c_{t-1}: shape c.shape[axis_hadamard : axis_hadamard +
    num_axes_hadamard], H x W by default, initialised to 1) are left out with
    ``lstm_debug_param { disable_hadamard: true }``; with ``ignore_x`` the input term is left out
    (x then only gives T, N and the map size). ``cont`` 0 starts a stream anew: h_{t-1} and f are
    zeroed (the peephole terms still see c_{t-1}).

    prototxt: ``lstm_conv_param`` once (both transforms) or twice (one with ``type: "input"``,
    one with ``type: "hidden"``, equal num_output C); ``lstm_debug_param { disable_hadamard
    axis_hadamard (3) num_axes_hadamard (2) ignore_x expose }``; ``recurrent_param {
    expose_hidden }``. ``expose`` names extra tops among the unrolled blobs ``h_t=k`` / ``c_t=k``.

    Bottoms: x (T, N, C_in, H, W), cont (T, N), and with
    expose_hidden h_0 and c_0 (1, N, C, H, W). Tops: h (T, N, C, H, W), the exposed blobs, and
    with expose_hidden h_T and c_T (1, N, C, H, W). Without expose_hidden a forward starts from the
    previous forward's last state (the fork's RecurrentLayer copies it), from zeros the first time.
    Parameter blobs, the unrolled net's order: W_x (4C, C_in, k, k) [unless ignore_x], W_h (4C,
    C, k, k), b (4C) [bias_term], w_i, w_f, w_o [unless disable_hadamard]. The sequence markers
    get no gradient. A static input (a third bottom) is refused: the fork's RecurrentLayer checks
    that its first axis is N, and its ConvLSTM adds it to gates of shape 1 x N x ..., which
    only agree for N = 1.
    """
    min_bottom_blobs = 2
    min_top_blobs = 1
    relu = False

    # -- setup ---------------------------------------------------------------------------------
    def layer_setup(self, bottom, top):
        lcps = list(self.layer_param.lstm_conv_param)
        if not 1 <= len(lcps) <= 2:
            raise self.error("takes one or two lstm_conv_param (input, hidden), got %d" % len(lcps))
        if len(lcps) == 2 and lcps[0].num_output != lcps[1].num_output:
            raise self.error("the two lstm_conv_param must have the same num_output")
        self.C = int(lcps[0].num_output)
        if self.C < 1:
            raise self.error("lstm_conv_param.num_output must be positive")
        x_cp = lcps[1] if lcps[0].type == "hidden" and len(lcps) == 2 else lcps[0]
        h_cp = lcps[1] if lcps[0].type == "input" and len(lcps) == 2 else lcps[0]
        dp = self.layer_param.lstm_debug_param
        self.ignore_x, self.hadamard = bool(dp.ignore_x), not dp.disable_hadamard
        self.expose_hidden = bool(self.layer_param.recurrent_param.expose_hidden)
        self.expose = []
        for name in dp.expose:
            m = re.fullmatch(r"([hc])_t=(\d+)", name)
            if not m:
                raise self.error("lstm_debug_param.expose '%s': only h_t=k and c_t=k are exposed "
                                 "here" % name)
            self.expose.append((m.group(1), int(m.group(2))))
        n_hidden = 2 if self.expose_hidden else 0
        nb = len(bottom) - n_hidden
        if nb not in (2, 3):
            raise self.error("takes bottoms x, cont[, x_static]%s; got %d"
                             % (", h_0, c_0" if n_hidden else "", len(bottom)))
        self.static = nb == 3
        if self.static:
            raise self.error("a static input is not taken: the fork's RecurrentLayer needs its "
                             "first axis to be N while its ConvLSTM sums it as 1 x N x ...")
        if len(top) != 1 + len(self.expose) + n_hidden:
            raise self.error("takes %d tops (h, %d exposed, %s), got %d"
                             % (1 + len(self.expose) + n_hidden, len(self.expose),
                                "h_T, c_T" if n_hidden else "no final states", len(top)))
        self._check_x_cont(bottom)
        x = bottom[0]
        self.state_shape = (1, x.shape[1], self.C) + tuple(x.shape[3:])
        given, self.blobs = self.blobs, []
        k = 0

        def make(cp, out, bias, name, b):
            nonlocal k
            sub = _conv_layer(cp, out, bias, "%s_%s" % (self.layer_param.name, name),
                              self.phase, self.dtype)
            n = 1 + int(bias)
            if given:
                sub.blobs = given[k:k + n]
            k += n
            sub.setup([b], [Blob((), dtype=self.dtype)])
            return sub
        self.x_conv = None if self.ignore_x else make(x_cp, 4 * self.C, False, "x->transform",
                                                      bottom[0])
        self.s_conv = None
        self.h_conv = make(h_cp, 4 * self.C, bool(h_cp.bias_term), "hidden->transform",
                           Blob(self.state_shape, dtype=self.dtype))
        subs = [s for s in (self.x_conv, self.s_conv, self.h_conv) if s is not None]
        self.blobs = [b for s in subs for b in s.blobs]
        self.axis, self.num_axes = int(dp.axis_hadamard), int(dp.num_axes_hadamard)
        if self.hadamard:
            n = 5 - self.axis if self.num_axes == -1 else self.num_axes
            if not 0 <= self.axis <= 5 - n or n < 0:
                raise self.error("axis_hadamard %d / num_axes_hadamard %d do not fit a 5-axis "
                                 "state" % (self.axis, self.num_axes))
            shape = self.state_shape[self.axis:self.axis + n]
            self.peep_view = (1,) * self.axis + shape + (1,) * (5 - self.axis - n)
            for j in range(3):
                if given:
                    b = given[k + j] if k + j < len(given) else None
                    if b is None or tuple(b.shape) != shape:
                        raise self.error("peephole blob %d must have shape %s" % (k + j, shape))
                else:
                    b = self.new_blob(shape)
                    b.data[...] = 1
                self.blobs.append(b)
            k += 3
        if given and k != len(given):
            raise self.error("expected %d parameter blobs, got %d" % (k, len(given)))
        self.param_propagate_down = [True] * len(self.blobs)
        self._state = None

    def _check_x_cont(self, bottom):
        """x is T x N x C x H x W and cont T x N; the errors name the shapes that would pass
        (x with a channel axis of 1 inserted; cont x's T x N, or x cont's T and N)."""
        x, cont = tuple(bottom[0].shape), tuple(bottom[1].shape)
        if len(x) != 5:
            raise self.needs("bottom[0] (x) must be T x N x C x H x W, got shape %s" % (x,),
                             [(0, x[:2] + (1,) + x[2:], None)] if len(x) == 4 else [])
        if cont != x[:2]:
            fits = [(1, x[:2], None)]
            if len(cont) == 2:
                fits.append((0, cont + x[2:], None))
            raise self.needs("bottom[1] (cont) must be T x N = %s, got %s" % (x[:2], cont), fits)

    def reshape(self, bottom, top):
        self._check_x_cont(bottom)
        x = bottom[0]
        self.T, self.N = x.shape[:2]
        self.state_shape = (1, self.N, self.C) + tuple(x.shape[3:])
        gate_shape = (1, self.N, 4 * self.C) + tuple(x.shape[3:])
        if self.x_conv is not None:
            self.xg = Blob((), dtype=self.dtype)
            self._sub(self.x_conv, 0).reshape([x], [self.xg])
            if tuple(self.xg.shape[2:]) != gate_shape[2:]:
                raise self.error("the input convolution gives %s per step; the LSTM needs %s (pad "
                                 "so that H x W stay)" % (self.xg.shape[2:], gate_shape[2:]),
                                 )
        hg = Blob((), dtype=self.dtype)
        self.h_conv.reshape([Blob(self.state_shape, dtype=self.dtype)], [hg])
        if tuple(hg.shape) != gate_shape:
            raise self.error("the hidden convolution gives %s; the LSTM needs %s (pad so that "
                             "H x W stay)" % (hg.shape, gate_shape))
        if self.expose_hidden:
            first = 3 if self.static else 2
            for j in range(2):
                self.check_shape("bottom[%d] (initial state)" % (first + j), self.state_shape,
                                 bottom[first + j].shape, bottom=first + j)
        top[0].reshape((self.T,) + self.state_shape[1:])
        for t, (_, step) in zip(top[1:], self.expose):
            if not 0 <= step <= self.T:
                raise self.error("expose: step %d is outside 0..%d" % (step, self.T))
            t.reshape(self.state_shape)
        for t in top[1 + len(self.expose):]:
            t.reshape(self.state_shape)
        if self._state is None or self._state[0].shape != self.state_shape:
            self._state = [np.zeros(self.state_shape, self.dtype) for _ in range(2)]

    def _sub(self, sub, first):
        """The sub-layer with this layer's current blobs ``first``.. (a net may swap blobs)."""
        sub.blobs = self.blobs[first:first + len(sub.blobs)]
        sub.param_propagate_down = list(self.param_propagate_down[first:first + len(sub.blobs)])
        return sub

    def _offsets(self):
        k = 0
        out = {}
        for name in ("x_conv", "s_conv", "h_conv"):
            sub = getattr(self, name)
            if sub is not None:
                out[name] = k
                k += len(sub.blobs)
        out["peep"] = k
        return out

    # -- the unit -------------------------------------------------------------------------------
    def _act(self, v):
        return np.maximum(v, 0) if self.relu else np.tanh(v)

    def _dact(self, a):
        """d act / d v from act's value."""
        return (a > 0).astype(a.dtype) if self.relu else 1 - a * a

    # -- forward --------------------------------------------------------------------------------
    def forward_cpu(self, bottom, top):
        off = self._offsets()
        C, T = self.C, self.T
        cont = bottom[1].data.reshape(T, self.N, 1, 1, 1)
        if self.x_conv is not None:
            self._sub(self.x_conv, off["x_conv"]).forward([bottom[0]], [self.xg])
        if self.expose_hidden:
            first = 3 if self.static else 2
            h, c = (bottom[first + j].data.copy() for j in range(2))
        else:
            h, c = (s.copy() for s in self._state)
        hconv = self._sub(self.h_conv, off["h_conv"])
        peep = [b.data.reshape(self.peep_view) for b in self.blobs[off["peep"]:off["peep"] + 3]]
        self.cache = {"h": [h], "c": [c], "hc": [], "gates": []}
        hc_blob, hg_blob = Blob(self.state_shape, dtype=self.dtype), Blob((), dtype=self.dtype)
        for t in range(T):
            hc_blob.data[...] = h * cont[t]
            hconv.forward([hc_blob], [hg_blob])
            g = hg_blob.data.copy()
            if self.x_conv is not None:
                g += self.xg.data[t:t + 1]
            if self.hadamard:
                for j in range(3):
                    g[:, :, j * C:(j + 1) * C] += peep[j] * c
            i = _sigmoid(g[:, :, :C])
            f = cont[t] * _sigmoid(g[:, :, C:2 * C])
            o = _sigmoid(g[:, :, 2 * C:3 * C])
            gg = self._act(g[:, :, 3 * C:])
            c = f * c + i * gg
            ac = self._act(c)
            h = o * ac
            self.cache["hc"].append(hc_blob.data.copy())
            self.cache["gates"].append((i, f, o, gg, ac))
            self.cache["h"].append(h)
            self.cache["c"].append(c)
            top[0].data[t] = h[0]
        for blob, (kind, step) in zip(top[1:], self.expose):
            blob.data[...] = self.cache[kind][step]
        if self.expose_hidden:
            top[-2].data[...] = h
            top[-1].data[...] = c
        else:
            self._state = [h.copy(), c.copy()]

    # -- backward -------------------------------------------------------------------------------
    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the sequence indicators (cont)")
        off = self._offsets()
        C, T = self.C, self.T
        cont = bottom[1].data.reshape(T, self.N, 1, 1, 1)
        dh_steps = [np.zeros(self.state_shape, self.dtype) for _ in range(T + 1)]
        dc_steps = [np.zeros(self.state_shape, self.dtype) for _ in range(T + 1)]
        for t in range(T):
            dh_steps[t + 1] += top[0].diff[t:t + 1]
        for blob, (kind, step) in zip(top[1:], self.expose):
            (dh_steps if kind == "h" else dc_steps)[step] += blob.diff
        if self.expose_hidden:
            dh_steps[T] += top[-2].diff
            dc_steps[T] += top[-1].diff
        hconv = self._sub(self.h_conv, off["h_conv"])
        peep_blobs = self.blobs[off["peep"]:off["peep"] + 3]
        peep = [b.data.reshape(self.peep_view) for b in peep_blobs]
        dgates = np.zeros((T,) + self.state_shape[1:2] + (4 * C,) + self.state_shape[3:],
                          self.dtype)
        hc_blob, hg_blob = Blob(self.state_shape, dtype=self.dtype), Blob((), dtype=self.dtype)
        red = tuple(a for a in range(5) if self.peep_view[a] == 1) if self.hadamard else ()
        for t in range(T - 1, -1, -1):
            i, f, o, gg, ac = self.cache["gates"][t]
            c_prev = self.cache["c"][t]
            dh, dc = dh_steps[t + 1], dc_steps[t + 1]
            dct = dc + dh * o * self._dact(ac)
            dg = np.empty((1, self.N, 4 * C) + self.state_shape[3:], self.dtype)
            dg[:, :, :C] = dct * gg * i * (1 - i)
            dg[:, :, C:2 * C] = dct * c_prev * f * (1 - f)
            dg[:, :, 2 * C:3 * C] = dh * ac * o * (1 - o)
            dg[:, :, 3 * C:] = dct * i * self._dact(gg)
            dc_steps[t] += dct * f
            if self.hadamard:
                for j in range(3):
                    part = dg[:, :, j * C:(j + 1) * C]
                    dc_steps[t] += part * peep[j]
                    if self.param_propagate_down[off["peep"] + j]:
                        peep_blobs[j].diff[...] += np.sum(part * c_prev, axis=red).reshape(
                            peep_blobs[j].shape)
            dgates[t] = dg[0]
            hc_blob.data[...] = self.cache["hc"][t]
            hconv.forward([hc_blob], [hg_blob])      # shapes the sub-layer for this step
            hg_blob.diff[...] = dg
            hconv.backward([hg_blob], [True], [hc_blob])
            dh_steps[t] += hc_blob.diff * cont[t]
        if self.x_conv is not None:
            self.xg.diff[...] = dgates
            self._sub(self.x_conv, off["x_conv"]).backward([self.xg], [propagate_down[0]],
                                                           [bottom[0]])
        elif propagate_down[0]:
            bottom[0].diff[...] = 0
        if self.expose_hidden:
            first = 3 if self.static else 2
            for j, d in enumerate((dh_steps[0], dc_steps[0])):
                if propagate_down[first + j]:
                    bottom[first + j].diff[...] = d

    def allow_force_backward(self, bottom_index):
        return bottom_index != 1


@register_layer("ConvLSTM")
class ConvLSTMLayer(_ConvLSTMBase):
    __doc__ = _ConvLSTMBase.__doc__


@register_layer("ConvLSTMReLU")
class ConvLSTMReLULayer(_ConvLSTMBase):
    __doc__ = _ConvLSTMBase.__doc__
    relu = True
