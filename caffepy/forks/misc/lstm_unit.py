"""The ``LstmUnit`` of ApolloCaffe's line (BestSonny/apollocaffe, also CV-IP/3DObject-detection and
Charleen777/caffecode) and its three-bottom variant in CharlesShang/caffe: one LSTM step with its
own gate weights (src/caffe/layers/lstm_unit_layer.cpp in each). BVLC's ``LSTMUnit`` (no weights,
gate pre-activations as a bottom) is another layer. Also SDS-RCNN's ConvLSTMUnit (that LSTMUnit
step on 5-D blobs).
"""
import numpy as np

from ...errors import ShapeError
from ...fillers import get_filler
from ...layers.base import Layer, fork_param, register_layer

GATES = ("input_weight_filler", "input_gate_weight_filler", "forget_gate_weight_filler",
         "output_gate_weight_filler")


def fork_tanh(v):
    """The forks' tanh: (e^2v - 1) / (e^2v + 1), and exactly +-1 where |v| >= 5."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(2 * v)
        return np.where(np.abs(v) < 5, (e - 1) / (e + 1), np.sign(v))


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


@register_layer("LstmUnit")
class LstmUnitLayer(Layer):
    """One LSTM step with four C x K weight matrices (blobs 0-3: cell input, input gate, forget
    gate, output gate; each 1 x C x 1 x K, no bias). With h the K-wide input row:

        u = tanh(W_u h), i = sigm(W_i h), f = sigm(W_f h), o = sigm(W_o h)
        c' = f * c + i * u;    h' = o * tanh(c')   (o * c' unless tanh_hidden)

    tie_output_forget uses f = sigm(-W_o h) (W_f unused). tanh is the forks' own, which is
    exactly +-1 past |5|. Backward as the forks write it (the derivatives through the saved
    activations, 1 - y^2 and y (1 - y)); parameter diffs accumulate.

    Two bottoms (ApolloCaffe): x (N x K), c (N x C) -> tops h', c' (N x C).
    Three bottoms (CharlesShang/caffe): x (N x K1), h (N x C), c (N x C) with h = [x, h] (K = K1 +
    C), tanh on the cell always, tops N x C x 1 x 1; its third top (the fork checks for three)
    is left untouched.

    prototxt: ``lstm_unit_param { num_cells (required) input_weight_filler
    input_gate_weight_filler forget_gate_weight_filler output_gate_weight_filler
    tie_output_forget: false tanh_hidden: false weight_filler }``: ApolloCaffe requires the four
    gate fillers, CharlesShang/caffe fills all four from weight_filler; here a gate filler falls
    back to weight_filler. tie_output_forget and tanh_hidden are read only in the two-bottom form.
    caffepy writes bottom diffs (ApolloCaffe's gemm adds into bottom[0]'s diff, relying on its
    net zeroing diffs first).
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    exact_num_top_blobs = None
    min_top_blobs = 2
    max_top_blobs = 3

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "lstm_unit_param")
        if p is None or not p.HasField("num_cells"):
            raise self.error("lstm_unit_param.num_cells is required")
        self.three = len(bottom) == 3
        if len(top) == 3 and not self.three:
            raise self.error("the two-bottom LstmUnit has 2 tops (h, c)")
        self.cells = int(p.num_cells)
        self.tie = bool(p.tie_output_forget) and not self.three
        self.tanh_hidden = bool(p.tanh_hidden) or self.three
        if bottom[-1].num_axes < 2 or bottom[-1].shape[1] != self.cells:
            raise self.error("the cell bottom has %s, num_cells is %d"
                             % (bottom[-1].shape, self.cells), ShapeError)
        k = sum(b.count // b.shape[0] for b in bottom[:-1]) if bottom[0].shape[0] else 0
        if not self.blobs:
            self.blobs = [self.new_blob((1, self.cells, 1, k)) for _ in GATES]
            for blob, field in zip(self.blobs, GATES):
                if p.HasField(field):
                    get_filler(getattr(p, field)).fill(blob)
                elif "weight_filler" in p.DESCRIPTOR.fields_by_name and p.HasField("weight_filler"):
                    get_filler(p.weight_filler).fill(blob)
                else:
                    raise self.error("lstm_unit_param.%s (or weight_filler) is required" % field)
        if len(self.blobs) != 4 or any(b.count != self.cells * k for b in self.blobs):
            raise self.error("four weight blobs of %d x %d expected" % (self.cells, k))
        self.param_propagate_down = [True] * 4

    def reshape(self, bottom, top):
        n = bottom[0].shape[0]
        if any(b.shape[0] != n for b in bottom):
            raise self.error("the bottoms have different nums: %s"
                             % ", ".join(str(b.shape) for b in bottom), ShapeError)
        if bottom[-1].count != n * self.cells or (self.three and bottom[1].count != n * self.cells):
            raise self.error("the state bottoms must be %d x %d" % (n, self.cells), ShapeError)
        k = sum(b.count for b in bottom[:-1]) // max(n, 1)
        if k != self.blobs[0].count // self.cells:
            raise self.error("the input is %d wide, the weights %d"
                             % (k, self.blobs[0].count // self.cells), ShapeError)
        shape = (n, self.cells, 1, 1) if self.three else (n, self.cells)
        top[0].reshape(shape)
        top[1].reshape(shape)

    def _input(self, bottom):
        n = bottom[0].shape[0]
        return np.concatenate([b.data.reshape(n, -1) for b in bottom[:-1]], axis=1)

    def forward_cpu(self, bottom, top):
        h = self._input(bottom)
        w = [b.data.reshape(self.cells, -1) for b in self.blobs]
        pre = [h @ wi.T for wi in w]
        if self.tie:
            pre[2] = -pre[3]
        self.u = fork_tanh(pre[0])
        self.i, self.f, self.o = sigmoid(pre[1]), sigmoid(pre[2]), sigmoid(pre[3])
        c = bottom[-1].data.reshape(self.u.shape)
        cell = self.f * c + self.i * self.u
        self.tc = fork_tanh(cell) if self.tanh_hidden else cell
        top[1].data[...] = cell.reshape(top[1].shape)
        top[0].data[...] = (self.o * self.tc).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        h = self._input(bottom)
        w = [b.data.reshape(self.cells, -1) for b in self.blobs]
        c = bottom[-1].data.reshape(self.u.shape)
        dh = top[0].diff.reshape(self.u.shape)
        dcell = top[1].diff.reshape(self.u.shape) + dh * self.o * (
            1 - self.tc * self.tc if self.tanh_hidden else 1)
        grads = [dcell * self.i * (1 - self.u * self.u),
                 dcell * self.u * self.i * (1 - self.i),
                 dcell * c * self.f * (1 - self.f),
                 dh * self.tc * self.o * (1 - self.o)]
        targets = [0, 1, 2, 3]
        if self.tie:
            grads[2], targets[2] = -grads[2], 3
        dx = np.zeros_like(h)
        for g, t in zip(grads, targets):
            if self.param_propagate_down[t]:
                self.blobs[t].diff[...] += (g.T @ h).reshape(self.blobs[t].shape)
            dx += g @ w[t]
        if propagate_down[-1]:
            bottom[-1].diff[...] = (dcell * self.f).reshape(bottom[-1].shape)
        start = 0
        for idx, b in enumerate(bottom[:-1]):
            width = b.count // b.shape[0] if b.shape[0] else 0
            if propagate_down[idx]:
                b.diff[...] = dx[:, start:start + width].reshape(b.shape)
            start += width


@register_layer("ConvLSTMUnit")
class ConvLSTMUnitLayer(Layer):
    """SDS-RCNN's ConvLSTMUnit (garrickbrazil/SDS-RCNN, external/caffe/src/caffe/layers/
    conv_lstm_unit_layer.cpp; also garrickbrazil/AR-Ped, Ricardozzf/sdsrcnn, adamtwig/segpred):
    Caffe's LSTMUnit step on 5-D blobs. Per instance n, with its gate pre-activations X_n split
    into four C x H x W blocks (i, f, o, g in that order) and the sequence flag cont_n:

        i = sigm(X_i), f = cont_n sigm(X_f) (0 where cont_n = 0), o = sigm(X_o), g = tanh(X_g)
        c = f c_prev + i g;   h = o tanh(c)

    Backward as the fork (Caffe's LSTMUnit): dc = dL/dc + dL/dh o (1 - tanh(c)^2);
    dc_prev = dc f; dX_i = dc g i (1 - i), dX_f = dc c_prev f (1 - f), dX_o = dL/dh tanh(c)
    o (1 - o), dX_g = dc i (1 - g^2) (the exact gradient for cont in {0, 1}). No gradient to
    cont. Bottoms: c_prev 1 x N x C x H x W, X 1 x N x 4C x H x W, cont 1 x N. Tops: c, h
    (c_prev's shape).
    """
    exact_num_bottom_blobs = 3
    exact_num_top_blobs = 2

    def reshape(self, bottom, top):
        c, x, cont = bottom
        n = c.shape[1] if c.num_axes > 1 else -1
        ok = (c.num_axes == 5 and x.num_axes == 5 and cont.num_axes == 2
              and all(b.shape[0] == 1 and b.shape[1] == n for b in bottom)
              and x.shape[2] == 4 * c.shape[2] and x.shape[3:] == c.shape[3:])
        if not ok:
            raise self.error("bottoms must be c_prev 1 x N x C x H x W, X 1 x N x 4C x H x W and "
                             "cont 1 x N; got %s" % ", ".join(str(b.shape) for b in bottom),
                             ShapeError)
        top[0].reshape(c.shape)
        top[1].reshape(c.shape)

    def _gates(self, bottom):
        n = bottom[0].shape[1]
        x = bottom[1].data.reshape(n, 4, -1)
        cont = bottom[2].data.reshape(n, 1)
        i, o = sigmoid(x[:, 0]), sigmoid(x[:, 2])
        f = np.where(cont == 0, 0, cont * sigmoid(x[:, 1]))
        g = 2 * sigmoid(2 * x[:, 3]) - 1
        return i, f, o, g, bottom[0].data.reshape(n, -1)

    def forward_cpu(self, bottom, top):
        i, f, o, g, c_prev = self._gates(bottom)
        c = f * c_prev + i * g
        top[0].data[...] = c.reshape(top[0].shape)
        top[1].data[...] = (o * (2 * sigmoid(2 * c) - 1)).reshape(top[1].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[2]:
            raise self.error("cannot backpropagate to the sequence indicators")
        i, f, o, g, c_prev = self._gates(bottom)
        n = i.shape[0]
        tc = 2 * sigmoid(2 * top[0].data.reshape(n, -1)) - 1
        dh = top[1].diff.reshape(n, -1)
        dc = top[0].diff.reshape(n, -1) + dh * o * (1 - tc * tc)
        if propagate_down[0]:
            bottom[0].diff[...] = (dc * f).reshape(bottom[0].shape)
        if propagate_down[1]:
            dx = np.stack([dc * g * i * (1 - i), dc * c_prev * f * (1 - f),
                           dh * tc * o * (1 - o), dc * i * (1 - g * g)], axis=1)
            bottom[1].diff[...] = dx.reshape(bottom[1].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index != 2
