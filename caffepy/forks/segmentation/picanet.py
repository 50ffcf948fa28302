"""PiCANet (nian-liu/PiCANet, pixel-wise contextual attention for saliency detection): its Caffe's
``AttPooling`` (att_pooling_layer.cu; the .cpp's CPU functions are NOT_IMPLEMENTED), the same
layer under its earlier name ``PwAttend`` (the repository's MNIST examples still use it, with a
``pw_attend_param`` of AttPoolingParameter's fields; no public tree defines that class), and
``ReNetLSTM`` (renet_lstm_layer.cpp: ReNet's bidirectional LSTM sweeps over a feature map).
"""
import numpy as np

from ...errors import ShapeError
from ...fillers import get_filler
from ...layers.base import Layer, fork_param, register_layer
from ...math import cpu


def _sigmoid(x):
    return 0.5 * np.tanh(0.5 * x) + 0.5


@register_layer("AttPooling")
class AttPoolingLayer(Layer):
    """Attention-weighted pooling of feature map F (N x C x H0 x W0) by attention maps A
    (N x k^2 x H1 x W1), over the k x k windows of F (im2col with pad, stride, dilation):

        LOCAL:  Y[n, c, p] = sum_j col(F)[n, c, j, p] A[n, j, p]   (windows at p: H1 x W1 of them)
        GLOBAL: Y[n, c, p] = sum_j col(F)[n, c, j] A[n, j, p]      (one window: the whole map)

    dA[n, j, p] = sum_c dY col(F) (as the window each uses); dF = col2im of dY A. GLOBAL needs
    stride 1, a square map and settings giving one window (kernel_size defaults to the map's
    width, with dilation 1); LOCAL needs kernel_size and the windows to match A's H1 x W1.
    prototxt: ``att_pooling_param { att_mode: LOCAL (GLOBAL) kernel_size pad: 0 stride: 1
    dilation: 1 }``. Top: N x C x H1 x W1.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1
    param_field = "att_pooling_param"

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, self.param_field)
        self.p = p
        self.global_ = p.att_mode == p.GLOBAL
        self.pad, self.stride, self.dilation = int(p.pad), int(p.stride), int(p.dilation)

    def reshape(self, bottom, top):
        f, a = bottom
        if f.num_axes != 4 or a.num_axes != 4:
            raise self.error("bottoms must be N x C x H x W, got %s and %s" % (f.shape, a.shape),
                             ShapeError)
        if f.shape[0] != a.shape[0]:
            raise self.error("the two bottoms must have the same batch size (%s, %s)"
                             % (f.shape, a.shape), ShapeError)
        h0, w0 = f.shape[2:]
        if self.global_:
            if self.stride != 1 or h0 != w0:
                raise self.error("global attention needs stride 1 and a square map, got stride "
                                 "%d, %d x %d" % (self.stride, h0, w0), ShapeError)
            if self.p.HasField("kernel_size"):
                k = int(self.p.kernel_size)
            elif self.dilation != 1:
                raise self.error("global attention without kernel_size needs dilation 1")
            else:
                k = w0
        else:
            if not self.p.HasField("kernel_size"):
                raise self.error("local attention needs kernel_size")
            k = int(self.p.kernel_size)
        self.k = k
        out = cpu.conv_out_shape((h0, w0), (k, k), (self.pad,) * 2, (self.stride,) * 2,
                                 (self.dilation,) * 2)
        want = (1, 1) if self.global_ else tuple(a.shape[2:])
        if out != want:
            raise self.error("%d x %d windows of the %d x %d map (kernel %d, pad %d, stride %d, "
                             "dilation %d); attention %s needs %s"
                             % (out + (h0, w0, k, self.pad, self.stride, self.dilation, a.shape,
                                       want)), ShapeError)
        if a.shape[1] != k * k:
            raise self.error("attention has %d channels, kernel %d needs %d"
                             % (a.shape[1], k, k * k), ShapeError)
        top[0].reshape(f.shape[0], f.shape[1], a.shape[2], a.shape[3])

    def _geometry(self):
        return (self.k, self.k), (self.pad,) * 2, (self.stride,) * 2, (self.dilation,) * 2

    def _cols(self, f):
        n, c = f.shape[:2]
        return cpu.im2col(f, *self._geometry()).reshape(n, c, self.k * self.k, -1)

    def forward_cpu(self, bottom, top):
        f, a = bottom[0].data, bottom[1].data
        n, kk = a.shape[:2]
        cols, att = self._cols(f), a.reshape(n, kk, -1)
        eq = "ncj,njp->ncp" if self.global_ else "ncjp,njp->ncp"
        cols = cols[..., 0] if self.global_ else cols
        top[0].data[...] = np.einsum(eq, cols, att).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        f, a = bottom[0].data, bottom[1].data
        n, kk = a.shape[:2]
        c = f.shape[1]
        dy, att = top[0].diff.reshape(n, c, -1), a.reshape(n, kk, -1)
        if propagate_down[1]:
            cols = self._cols(f)
            da = (np.einsum("ncj,ncp->njp", cols[..., 0], dy) if self.global_
                  else np.einsum("ncjp,ncp->njp", cols, dy))
            bottom[1].diff[...] = da.reshape(a.shape)
        if propagate_down[0]:
            dcols = (np.einsum("ncp,njp->ncj", dy, att)[..., None] if self.global_
                     else np.einsum("ncp,njp->ncjp", dy, att))
            cpu.col2im(dcols.reshape(n, c * kk, -1), f.shape, *self._geometry(),
                       out=bottom[0].diff)


@register_layer("PwAttend")
class PwAttendLayer(AttPoolingLayer):
    """AttPooling under the name PiCANet's MNIST examples use (lenet_pwatt_train_test,
    lenet_deploy), its fields in ``pw_attend_param`` (AttPoolingParameter)."""
    type = "PwAttend"
    param_field = "pw_attend_param"


@register_layer("ReNetLSTM")
class ReNetLSTMLayer(Layer):
    """ReNet's sweep ("ReNet: A Recurrent Neural Network Based Alternative to Convolutional
    Networks"): two LSTMs run along every row (X_DIR) or column (Y_DIR) of non-overlapping
    patch_height x patch_width patches, one forward and one backward; at each patch

        z = [x_t, h_{t-1}]  (x_t: the patch's C ph pw values, channel-major; h_{-1} = s_{-1} = 0)
        i = sigmoid(W_i z + W_ic s_{t-1} + b_i)   c~ = tanh(W_c z + b_c)
        f = sigmoid(W_f z + W_fc s_{t-1} + b_f)   s_t = c~ i + f s_{t-1}
        o = sigmoid(W_o z + W_oc s_t + b_o)       h_t = o tanh(s_t)

    (the W_*c s terms only with ``peephole``). Top: N x 2 num_output x H / ph x W / pw, channels
    [forward sweep's h, backward sweep's h] at each patch. Backward through both sweeps (exact).
    prototxt: ``renet_lstm_param { direction: X_DIR (Y_DIR) num_output patch_width: 1
    patch_height: 1 general_weight_filler general_bias_filler (b_c) forget_gate_bias_filler
    input_gate_bias_filler output_gate_bias_filler peephole: true }``. Blobs, 11 per sweep:
    W_i, W_c, W_o, W_f (num_output, C ph pw + num_output); W_ic, W_oc, W_fc (num_output,
    num_output; filled only with peephole, as the fork); b_i, b_c, b_o, b_f (num_output,).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1
    PER_DIR = 11

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "renet_lstm_param")
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be N x C x H x W, got %s" % (bottom[0].shape,),
                             ShapeError)
        self.peephole, self.x_dir = bool(p.peephole), p.direction == p.X_DIR
        self.out, self.ph, self.pw = int(p.num_output), int(p.patch_height), int(p.patch_width)
        if self.out <= 0 or self.ph <= 0 or self.pw <= 0:
            raise self.error("num_output, patch_height and patch_width must be positive")
        self.channels = bottom[0].shape[1]
        self.pdim = self.channels * self.ph * self.pw
        o = self.out
        shapes = ([(o, self.pdim + o)] * 4 + [(o, o)] * 3 + [(o,)] * 4) * 2
        if self.blobs:
            self.check_param_blobs(shapes)
        else:
            self.blobs = [self.new_blob(s) for s in shapes]
            weights = get_filler(p.general_weight_filler)
            fills = [p.input_gate_bias_filler, p.general_bias_filler, p.output_gate_bias_filler,
                     p.forget_gate_bias_filler]
            for d in range(2):
                own = self.blobs[d * self.PER_DIR:(d + 1) * self.PER_DIR]
                for b in own[:7 if self.peephole else 4]:
                    weights.fill(b)
                for b, fp in zip(own[7:], fills):
                    get_filler(fp).fill(b)
        self.param_propagate_down = [True] * len(self.blobs)

    def reshape(self, bottom, top):
        b = bottom[0]
        if b.num_axes != 4 or b.shape[1] != self.channels:
            raise self.error("bottom must be N x %d x H x W, got %s" % (self.channels, b.shape),
                             ShapeError)
        if b.shape[2] % self.ph or b.shape[3] % self.pw:
            raise self.error("bottom %s: H and W must be multiples of the %d x %d patch"
                             % (b.shape, self.ph, self.pw), ShapeError)
        self.ny, self.nx = b.shape[2] // self.ph, b.shape[3] // self.pw
        top[0].reshape(b.shape[0], 2 * self.out, self.ny, self.nx)

    # (steps, lines, N, ...) <-> the blobs: X_DIR steps along x, one line per patch row
    def _patches(self, x):
        n = x.shape[0]
        v = x.reshape(n, self.channels, self.ny, self.ph, self.nx, self.pw)
        v = v.transpose(4, 2, 0, 1, 3, 5) if self.x_dir else v.transpose(2, 4, 0, 1, 3, 5)
        return v.reshape(v.shape[:3] + (self.pdim,))

    def _unpatches(self, d, shape):
        n = shape[0]
        v = d.reshape(d.shape[:3] + (self.channels, self.ph, self.pw))
        v = v.transpose(2, 3, 1, 4, 0, 5) if self.x_dir else v.transpose(2, 3, 0, 4, 1, 5)
        return v.reshape(n, self.channels, shape[2], shape[3])

    def _to_top(self, h):
        """(steps, lines, N, O) -> (N, O, ny, nx)."""
        return h.transpose(2, 3, 1, 0) if self.x_dir else h.transpose(2, 3, 0, 1)

    def _params(self, d):
        return [b.data for b in self.blobs[d * self.PER_DIR:(d + 1) * self.PER_DIR]]

    def _sweep(self, xs, d):
        """One sweep's forward; returns the per-step states for backward."""
        wi, wc, wo, wf, wic, woc, wfc, bi, bc, bo, bf = self._params(d)
        steps = range(len(xs)) if d == 0 else range(len(xs) - 1, -1, -1)
        shape = xs.shape[1:3] + (self.out,)
        h, s = np.zeros(shape, xs.dtype), np.zeros(shape, xs.dtype)
        rec = {}
        for t in steps:
            z = np.concatenate([xs[t], h], axis=-1)
            ai, af = z @ wi.T + bi, z @ wf.T + bf
            if self.peephole:
                ai, af = ai + s @ wic.T, af + s @ wfc.T
            i, f, c = _sigmoid(ai), _sigmoid(af), np.tanh(z @ wc.T + bc)
            s_prev, s = s, c * i + f * s
            ao = z @ wo.T + bo + (s @ woc.T if self.peephole else 0)
            o = _sigmoid(ao)
            h = o * np.tanh(s)
            rec[t] = (z, s_prev, s, i, f, c, o, h)
        return rec, list(steps)

    def forward_cpu(self, bottom, top):
        xs = self._patches(bottom[0].data)
        out = top[0].data
        for d in range(2):
            rec, _ = self._sweep(xs, d)
            hs = np.stack([rec[t][7] for t in range(len(xs))])
            out[:, d * self.out:(d + 1) * self.out] = self._to_top(hs)

    def backward_cpu(self, top, propagate_down, bottom):
        xs = self._patches(bottom[0].data)
        dxs = np.zeros_like(xs)
        o_ = self.out
        for d in range(2):
            rec, steps = self._sweep(xs, d)
            dtop = top[0].diff[:, d * o_:(d + 1) * o_]
            dh_all = dtop.transpose(3, 2, 0, 1) if self.x_dir else dtop.transpose(2, 3, 0, 1)
            wi, wc, wo, wf, wic, woc, wfc = self._params(d)[:7]
            grads = [np.zeros_like(w) for w in self._params(d)]
            dh_next = np.zeros(xs.shape[1:3] + (o_,), xs.dtype)
            ds_next = np.zeros_like(dh_next)
            dai_next = daf_next = f_next = None
            for t in reversed(steps):
                z, s_prev, s, i, f, c, o, h = rec[t]
                dh = dh_all[t] + dh_next
                ts = np.tanh(s)
                dao = dh * ts * o * (1 - o)
                ds = dh * o * (1 - ts * ts)
                if f_next is not None:
                    ds = ds + ds_next * f_next
                if self.peephole:
                    ds = ds + dao @ woc
                    if dai_next is not None:
                        ds = ds + dai_next @ wic + daf_next @ wfc
                dai = ds * c * i * (1 - i)
                dac = ds * i * (1 - c * c)
                daf = ds * s_prev * f * (1 - f)
                dz = dai @ wi + dac @ wc + dao @ wo + daf @ wf
                dxs[t] += dz[..., :self.pdim]
                dh_next = dz[..., self.pdim:]
                for g, da in zip(grads[:4], (dai, dac, dao, daf)):
                    g += np.einsum("rno,rnk->ok", da, z)
                if self.peephole:
                    grads[4] += np.einsum("rno,rnk->ok", dai, s_prev)
                    grads[5] += np.einsum("rno,rnk->ok", dao, s)
                    grads[6] += np.einsum("rno,rnk->ok", daf, s_prev)
                for g, da in zip(grads[7:], (dai, dac, dao, daf)):
                    g += da.sum(axis=(0, 1))
                ds_next, f_next, dai_next, daf_next = ds, f, dai, daf
            for k, g in enumerate(grads):
                if self.param_propagate_down[d * self.PER_DIR + k]:
                    self.blobs[d * self.PER_DIR + k].diff += g
        if propagate_down[0]:
            bottom[0].diff[...] = self._unpatches(dxs, bottom[0].shape)
