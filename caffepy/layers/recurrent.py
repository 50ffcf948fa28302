"""Recurrent layers: LSTM, RNN (Caffe's RecurrentLayer family) and the LSTMUnit step.

Caffe unrolls LSTM / RNN into an internal net of InnerProduct, Scale, Eltwise and LSTMUnit layers.
caffepy computes the same function directly with a numpy loop over the T time steps, keeping the
parameter blobs in the order and shapes of the unrolled net's learnable params, so .caffemodel
weights load unchanged.

Common blobs: ``x`` (T x N x ...), ``cont`` (T x N; 0 starts a new sequence at that step, 1
continues it), optional ``x_static`` (N x ...), and with ``expose_hidden`` the initial states as
extra bottoms and the final states as extra tops. Without ``expose_hidden`` the final state of one
forward pass is the initial state of the next (Caffe's streaming, truncated-BPTT behaviour); a
``cont`` of 0 at t = 0 discards it.
"""
import numpy as np

from ..errors import ShapeError
from ..fillers import get_filler
from ..math import kernels
from .base import Layer, register_layer


def _sigmoid(x):
    return 0.5 * np.tanh(0.5 * x) + 0.5


class _RecurrentBase(Layer):
    """Shared plumbing: bottoms/tops bookkeeping, parameter blobs, carried hidden state."""
    min_bottom_blobs = 2
    min_top_blobs = 1
    num_states = 1          # h (RNN) or h, c (LSTM)
    gate_mult = 1           # rows of the input transform per hidden unit

    def layer_setup(self, bottom, top):
        rp = self.layer_param.recurrent_param
        self.H = int(rp.num_output)
        if self.H <= 0:
            raise self.error("recurrent_param.num_output must be positive, got %d" % self.H)
        self.expose_hidden = rp.expose_hidden
        n_hidden = self.num_states if self.expose_hidden else 0
        nb = len(bottom) - n_hidden
        if nb not in (2, 3):
            raise self.error("takes bottoms x, cont[, x_static]%s; got %d bottom(s)"
                             % (", and %d initial state(s)" % n_hidden if n_hidden else "",
                                len(bottom)))
        self.static_input = nb == 3
        expected_tops = 1 + n_hidden
        if len(top) != expected_tops:
            raise self.error("takes %d top blob(s) (expose_hidden: %s), got %d"
                             % (expected_tops, self.expose_hidden, len(top)))
        if bottom[0].num_axes < 3:
            e = self.error("bottom[0] (x) must have at least 3 axes (T x N x ...), got shape %s"
                           % (bottom[0].shape,), ShapeError)
            e.axes_needed = 3
            raise e
        self.D = bottom[0].count_range(2)
        self.Ds = bottom[2].count_range(1) if self.static_input else 0
        shapes = self.param_shapes()
        if self.blobs:
            if [tuple(b.shape) for b in self.blobs] != shapes:
                raise self.error("stored parameter shapes %s do not match expected %s"
                                 % ([tuple(b.shape) for b in self.blobs], shapes))
        else:
            for shape, is_bias in zip(shapes, self.param_is_bias()):
                b = self.new_blob(shape)
                get_filler(rp.bias_filler if is_bias else rp.weight_filler).fill(b)
                self.blobs.append(b)
        self._state = None

    def reshape(self, bottom, top):
        x, cont = bottom[0], bottom[1]
        if x.num_axes < 3:
            raise self.error("bottom[0] (x) must have at least 3 axes, got shape %s" % (x.shape,))
        self.T, self.N = x.shape[0], x.shape[1]
        if x.count_range(2) != self.D:
            raise self.error("x has %d inputs per step, the layer was set up with %d"
                             % (x.count_range(2), self.D))
        self.check_shape("bottom[1] (cont)", (self.T, self.N), cont.shape, bottom=1)
        if self.static_input:
            if bottom[2].shape[0] != self.N or bottom[2].count_range(1) != self.Ds:
                fits = [(2, (self.N, self.Ds), None)]
                if bottom[2].count_range(1) == self.Ds:   # or x has the static input's N
                    fits.append((0, (self.T, bottom[2].shape[0]) + x.shape[2:], None))
                raise self.needs("x_static must be N x ... with N = %d and %d inputs, got %s"
                                 % (self.N, self.Ds, bottom[2].shape), fits)
        if self.expose_hidden:
            first = 3 if self.static_input else 2
            for k in range(self.num_states):
                self.check_shape("bottom[%d] (initial state)" % (first + k), (1, self.N, self.H),
                                 bottom[first + k].shape, bottom=first + k)
        top[0].reshape(self.T, self.N, self.output_dim())
        for t in top[1:]:
            t.reshape(1, self.N, self.H)
        if self._state is None or self._state[0].shape != (self.N, self.H):
            self._state = [np.zeros((self.N, self.H), self.dtype) for _ in range(self.num_states)]

    def output_dim(self):
        return self.H

    # -- helpers -------------------------------------------------------------------------------
    def _inputs(self, bottom):
        x = bottom[0].data.reshape(self.T, self.N, self.D)
        cont = bottom[1].data.reshape(self.T, self.N, 1)
        xs = bottom[2].data.reshape(self.N, self.Ds) if self.static_input else None
        if self.expose_hidden:
            first = 3 if self.static_input else 2
            init = [bottom[first + k].data.reshape(self.N, self.H) for k in range(self.num_states)]
        else:
            init = self._state
        return x, cont, xs, init

    def _pd(self, i):
        return i >= len(self.param_propagate_down) or bool(self.param_propagate_down[i])

    def _input_transform(self, x, xs):
        """W_x x_t + b for all t, plus the static term (broadcast over t)."""
        g = x.reshape(-1, self.D) @ self.blobs[0].data.T + self.blobs[1].data
        g = g.reshape(self.T, self.N, -1)
        if self.static_input:
            g = g + xs @ self.blobs[2].data.T
        return g

    def _input_backward(self, dg, x, xs, bottom, propagate_down):
        """Gradients of the input transform given d(pre-activation) dg (T x N x G)."""
        flat = dg.reshape(-1, dg.shape[-1])
        if self._pd(0):
            self.blobs[0].diff[...] += flat.T @ x.reshape(-1, self.D)
        if self._pd(1):
            self.blobs[1].diff[...] += flat.sum(axis=0)
        if propagate_down[0]:
            bottom[0].diff[...] = (flat @ self.blobs[0].data).reshape(bottom[0].shape)
        if self.static_input:
            dsum = dg.sum(axis=0)
            if self._pd(2):
                self.blobs[2].diff[...] += dsum.T @ xs
            if propagate_down[2]:
                bottom[2].diff[...] = (dsum @ self.blobs[2].data).reshape(bottom[2].shape)

    def _state_backward(self, dstates, bottom, propagate_down):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the sequence indicators (cont)")
        if self.expose_hidden:
            first = 3 if self.static_input else 2
            for k, d in enumerate(dstates):
                if propagate_down[first + k]:
                    bottom[first + k].diff[...] = d.reshape(bottom[first + k].shape)

    def _final_state_diffs(self, top):
        if self.expose_hidden:
            return [t.diff.reshape(self.N, self.H).copy() for t in top[1:1 + self.num_states]]
        return [np.zeros((self.N, self.H), self.dtype) for _ in range(self.num_states)]

    def allow_force_backward(self, bottom_index):
        return bottom_index != 1


@register_layer("LSTM")
class LSTMLayer(_RecurrentBase):
    """Long short-term memory over T time steps (Caffe's LSTMLayer).

        h_conted_{t-1} = cont_t * h_{t-1}
        [i' f' o' g'] = W_xc x_t + b_c + W_hc h_conted_{t-1} (+ W_xc_static x_static)
        i, f, o = sigmoid(i', f', o');  g = tanh(g')
        c_t = cont_t * f * c_{t-1} + i * g;   h_t = o * tanh(c_t)

    prototxt: ``recurrent_param { num_output (required), weight_filler, bias_filler
    (constant 0), debug_info: false, expose_hidden: false }``.
    Params (Caffe's unrolled-net order): W_xc (4H x D), b_c (4H), [W_xc_static (4H x Ds)],
    W_hc (4H x H). Bottoms: x (T x N x ...), cont (T x N), [x_static (N x ...)],
    [h_0 (1 x N x H), c_0 (1 x N x H) with expose_hidden]. Tops: h (T x N x H),
    [h_T, c_T (1 x N x H) with expose_hidden].
    """
    num_states = 2
    max_bottom_blobs = 5
    max_top_blobs = 3

    def param_shapes(self):
        G = 4 * self.H
        shapes = [(G, self.D), (G,)]
        if self.static_input:
            shapes.append((G, self.Ds))
        return shapes + [(G, self.H)]

    def param_is_bias(self):
        return [False, True] + ([False] if self.static_input else []) + [False]

    def forward_cpu(self, bottom, top):
        x, cont, xs, (h, c) = self._inputs(bottom)
        H, W_hc = self.H, self.blobs[-1].data
        pre = self._input_transform(x, xs)
        T = self.T
        self._gates = np.empty((T, self.N, 4 * H), self.dtype)
        self._c = np.empty((T + 1, self.N, H), self.dtype)
        self._hc = np.empty((T, self.N, H), self.dtype)
        self._c[0] = c
        hs = top[0].data.reshape(T, self.N, H)
        for t in range(T):
            hc = cont[t] * h
            a = pre[t] + hc @ W_hc.T
            ifo = _sigmoid(a[:, :3 * H])
            g = np.tanh(a[:, 3 * H:])
            c = cont[t] * ifo[:, H:2 * H] * c + ifo[:, :H] * g
            h = ifo[:, 2 * H:] * np.tanh(c)
            self._gates[t, :, :3 * H] = ifo
            self._gates[t, :, 3 * H:] = g
            self._c[t + 1] = c
            self._hc[t] = hc
            hs[t] = h
        if self.expose_hidden:
            top[1].data[...] = h.reshape(top[1].shape)
            top[2].data[...] = c.reshape(top[2].shape)
        else:
            self._state = [h.copy(), c.copy()]
        self._cont = cont.copy()

    def backward_cpu(self, top, propagate_down, bottom):
        x, cont, xs, _ = self._inputs(bottom)
        H, W_hc = self.H, self.blobs[-1].data
        dh_next, dc = self._final_state_diffs(top)
        dtop = top[0].diff.reshape(self.T, self.N, H)
        dpre = np.empty_like(self._gates)
        for t in reversed(range(self.T)):
            gates = self._gates[t]
            i, f, o, g = gates[:, :H], gates[:, H:2 * H], gates[:, 2 * H:3 * H], gates[:, 3 * H:]
            tc = np.tanh(self._c[t + 1])
            dh = dtop[t] + dh_next
            dc = dc + dh * o * (1 - tc * tc)
            c_prev = self._c[t]
            d = dpre[t]
            d[:, :H] = dc * g * i * (1 - i)
            d[:, H:2 * H] = dc * cont[t] * c_prev * f * (1 - f)
            d[:, 2 * H:3 * H] = dh * tc * o * (1 - o)
            d[:, 3 * H:] = dc * i * (1 - g * g)
            if self._pd(len(self.blobs) - 1):
                self.blobs[-1].diff[...] += d.T @ self._hc[t]
            dh_next = cont[t] * (d @ W_hc)
            dc = dc * cont[t] * f
        self._input_backward(dpre, x, xs, bottom, propagate_down)
        self._state_backward([dh_next, dc], bottom, propagate_down)


@register_layer("RNN")
class RNNLayer(_RecurrentBase):
    """Simple (Elman) recurrent net over T time steps (Caffe's RNNLayer).

        h_t = tanh(W_xh x_t + b_h + W_hh (cont_t * h_{t-1}) (+ W_xh_static x_static))
        o_t = tanh(W_ho h_t + b_o)

    prototxt: ``recurrent_param { num_output (required), weight_filler, bias_filler
    (constant 0), debug_info: false, expose_hidden: false }``.
    Params (Caffe's unrolled-net order): W_xh (H x D), b_h (H), [W_xh_static (H x Ds)],
    W_hh (H x H), W_ho (H x H), b_o (H). Bottoms: x (T x N x ...), cont (T x N),
    [x_static (N x ...)], [h_0 (1 x N x H) with expose_hidden]. Tops: o (T x N x H),
    [h_T (1 x N x H) with expose_hidden].
    """
    num_states = 1
    max_bottom_blobs = 4
    max_top_blobs = 2

    def param_shapes(self):
        H = self.H
        shapes = [(H, self.D), (H,)]
        if self.static_input:
            shapes.append((H, self.Ds))
        return shapes + [(H, H), (H, H), (H,)]

    def param_is_bias(self):
        return [False, True] + ([False] if self.static_input else []) + [False, False, True]

    def forward_cpu(self, bottom, top):
        x, cont, xs, (h,) = self._inputs(bottom)
        k = 3 if self.static_input else 2
        W_hh, W_ho, b_o = (b.data for b in self.blobs[k:k + 3])
        pre = self._input_transform(x, xs)
        self._h = np.empty((self.T, self.N, self.H), self.dtype)
        self._hc = np.empty((self.T, self.N, self.H), self.dtype)
        for t in range(self.T):
            self._hc[t] = cont[t] * h
            h = np.tanh(pre[t] + self._hc[t] @ W_hh.T)
            self._h[t] = h
        o = np.tanh(self._h.reshape(-1, self.H) @ W_ho.T + b_o)
        top[0].data[...] = o.reshape(top[0].shape)
        if self.expose_hidden:
            top[1].data[...] = h.reshape(top[1].shape)
        else:
            self._state = [h.copy()]

    def backward_cpu(self, top, propagate_down, bottom):
        x, cont, xs, _ = self._inputs(bottom)
        k = 3 if self.static_input else 2
        W_hh, W_ho = self.blobs[k].data, self.blobs[k + 1].data
        o = top[0].data.reshape(-1, self.H)
        do = top[0].diff.reshape(-1, self.H) * (1 - o * o)
        if self._pd(k + 1):
            self.blobs[k + 1].diff[...] += do.T @ self._h.reshape(-1, self.H)
        if self._pd(k + 2):
            self.blobs[k + 2].diff[...] += do.sum(axis=0)
        dh_out = (do @ W_ho).reshape(self.T, self.N, self.H)
        (dh_next,) = self._final_state_diffs(top)
        dpre = np.empty_like(self._h)
        for t in reversed(range(self.T)):
            h = self._h[t]
            d = (dh_out[t] + dh_next) * (1 - h * h)
            dpre[t] = d
            if self._pd(k):
                self.blobs[k].diff[...] += d.T @ self._hc[t]
            dh_next = cont[t] * (d @ W_hh)
        self._input_backward(dpre, x, xs, bottom, propagate_down)
        self._state_backward([dh_next], bottom, propagate_down)


@register_layer("LSTMUnit")
class LSTMUnitLayer(Layer):
    """One LSTM time step (Caffe's LSTMUnitLayer), used by unrolled LSTM nets.

        [i' f' o' g'] = X (split along axis 2 into 4 blocks of D);  i, f, o = sigmoid; g = tanh
        c_t = cont_t * f * c_{t-1} + i * g;   h_t = o * tanh(c_t)

    No prototxt fields. Bottoms: c_{t-1} (1 x N x D), X (1 x N x 4D), cont (1 x N).
    Tops: c_t (1 x N x D), h_t (1 x N x D). No gradient for cont.
    """
    exact_num_bottom_blobs = 3
    exact_num_top_blobs = 2

    def reshape(self, bottom, top):
        c_prev, X, cont = bottom
        if c_prev.num_axes != 3 or c_prev.shape[0] != 1:
            raise self.error("bottom[0] (c_prev) must be 1 x N x D, got %s" % (c_prev.shape,))
        one, N, D = c_prev.shape
        self.check_shape("bottom[1] (gate input)", (1, N, 4 * D), X.shape)
        self.check_shape("bottom[2] (cont)", (1, N), cont.shape, bottom=2)
        self.D = D
        top[0].reshape(c_prev.shape)
        top[1].reshape(c_prev.shape)

    def _parts(self, bottom):
        D = self.D
        X = bottom[1].data.reshape(-1, 4 * D)
        ifo = _sigmoid(X[:, :3 * D])
        g = np.tanh(X[:, 3 * D:])
        cont = bottom[2].data.reshape(-1, 1)
        return ifo[:, :D], ifo[:, D:2 * D], ifo[:, 2 * D:], g, cont

    def _c_views(self, *blobs_and_parts):
        """(N, D) / (N, 4D) / (N,) float32 views for Caffe's own per-element kernels
        (caffepy.math._numba_libm.lstm_unit_c: its sigmoid and tanh forms, byte for byte), or
        None (numpy: within a few units in the last place)."""
        flat = kernels.flat_views(*[a for a, _ in blobs_and_parts], dtypes=("float32",))
        if flat is None:
            return None
        return [a.reshape(shape) for a, (_, shape) in zip(flat, blobs_and_parts)]

    def forward_cpu(self, bottom, top):
        D = self.D
        v = self._c_views((bottom[0].data, (-1, D)), (bottom[1].data, (-1, 4 * D)),
                          (bottom[2].data, (-1,)), (top[0].data, (-1, D)),
                          (top[1].data, (-1, D)))
        if v is not None:
            kernels.get().lstm_unit_c(*v)
            return
        i, f, o, g, cont = self._parts(bottom)
        c_prev = bottom[0].data.reshape(i.shape)
        c = cont * f * c_prev + i * g
        top[0].data[...] = c.reshape(top[0].shape)
        top[1].data[...] = (o * np.tanh(c)).reshape(top[1].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[2]:
            raise self.error("cannot backpropagate to the sequence indicators (cont)")
        if not (propagate_down[0] or propagate_down[1]):
            return
        D = self.D
        v = self._c_views((bottom[0].data, (-1, D)), (bottom[1].data, (-1, 4 * D)),
                          (bottom[2].data, (-1,)), (top[0].data, (-1, D)),
                          (top[0].diff, (-1, D)), (top[1].diff, (-1, D)),
                          (bottom[0].diff, (-1, D)), (bottom[1].diff, (-1, 4 * D)))
        if v is not None:       # Caffe computes both gradients: the one not asked for is dropped
            for i, down in zip((6, 7), propagate_down):
                if not down:
                    v[i] = np.empty_like(v[i])
            kernels.get().lstm_unit_c_backward(*v)
            return
        i, f, o, g, cont = self._parts(bottom)
        c_prev = bottom[0].data.reshape(i.shape)
        tc = np.tanh(top[0].data.reshape(i.shape))
        dh = top[1].diff.reshape(i.shape)
        dc = top[0].diff.reshape(i.shape) + dh * o * (1 - tc * tc)
        if propagate_down[0]:
            bottom[0].diff[...] = (dc * cont * f).reshape(bottom[0].shape)
        if propagate_down[1]:
            dX = np.empty((i.shape[0], 4 * D), self.dtype)
            dX[:, :D] = dc * g * i * (1 - i)
            dX[:, D:2 * D] = dc * cont * c_prev * f * (1 - f)
            dX[:, 2 * D:3 * D] = dh * tc * o * (1 - o)
            dX[:, 3 * D:] = dc * i * (1 - g * g)
            bottom[1].diff[...] = dX.reshape(bottom[1].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index != 2
