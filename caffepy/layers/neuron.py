"""Element-wise neuron layers: y = f(x), one bottom, one top of the same shape (in-place allowed).

Layers whose gradient needs x keep a copy of it when run in place (top is bottom). Parameterised
exponentials (Exp, Log, Power) live in ``layers/power.py``.

Sigmoid, TanH, BNLL, ELU and Swish (and Exp, Log) compute through the C math library in Caffe's
order of operations when numba is installed (:mod:`caffepy.math._numba_libm`): their float32
values are then BVLC Caffe's CPU values bit for bit; without numba, numpy's functions, within a
unit or two in the last place.
"""
import numpy as np

from ..fillers import get_filler
from ..math import cpu, kernels
from .base import NeuronLayer, register_layer


class ElementwiseLayer(NeuronLayer):
    """Base for y = f(x) with dL/dx = dL/dy * f'(x, y).

    Subclasses define ``f(x)`` and ``df(x, y)``; ``needs_input = False`` when ``df`` reads only y
    (then no copy of x is kept for in-place use).
    """
    needs_input = True

    def f(self, x):
        raise NotImplementedError

    def df(self, x, y):
        raise NotImplementedError

    def c_forward(self, k, x, y):
        """Compute y from x (flat, of one float type) with the kernels ``k`` of Caffe's own
        arithmetic (:mod:`caffepy.math._numba_libm`) and return True; False: ``f`` does."""
        return False

    def c_backward(self, k, x, y, dy, dx):
        """As :meth:`c_forward` for the gradient (flat x, y, dy, dx); False: ``df`` does."""
        return False

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        self._x_copy = x.copy() if (self.needs_input and top[0] is bottom[0]) else None
        flat = kernels.flat_views(x, top[0].data)
        if flat is None or not self.c_forward(kernels.get(), *flat):
            top[0].data[...] = self.f(x)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        x = self._x_copy if top[0] is bottom[0] and self._x_copy is not None else bottom[0].data
        flat = kernels.flat_views(x, top[0].data, top[0].diff, bottom[0].diff)
        if flat is None or not self.c_backward(kernels.get(), *flat):
            bottom[0].diff[...] = top[0].diff * self.df(x, top[0].data)


def _sigmoid(x):
    # Caffe's form: 0.5 * tanh(0.5 x) + 0.5 (no overflow for large |x|)
    return 0.5 * np.tanh(0.5 * x) + 0.5


@register_layer("ReLU")
class ReLULayer(NeuronLayer):
    """Rectified linear unit, leaky when ``negative_slope`` != 0.

    y = max(0, x) + negative_slope * min(0, x);  dL/dx = dL/dy * (1 if x > 0 else negative_slope)

    prototxt: ``relu_param { negative_slope: 0 }`` (engine ignored).
    """

    def layer_setup(self, bottom, top):
        self.negative_slope = self.layer_param.relu_param.negative_slope

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        cpu.relu_into(x, self.negative_slope, top[0].data)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        # In place, bottom data already holds y; sign(y) == sign(x) for slope >= 0.
        x = bottom[0].data
        dy = top[0].diff
        k = cpu.flat_kernel(x, dy, bottom[0].diff)
        if k is not None:
            k.relu_backward(x.reshape(-1), dy.reshape(-1), self.negative_slope,
                            bottom[0].diff.reshape(-1))
        elif self.negative_slope:
            np.copyto(bottom[0].diff, np.where(x > 0, dy, dy * self.negative_slope))
        else:
            np.multiply(dy, x > 0, out=bottom[0].diff)


@register_layer("ReLU6")
class ReLU6Layer(ElementwiseLayer):
    """ReLU capped at 6 (fork layer, MobileNet): y = min(max(x, 0), 6).

    dL/dx = dL/dy where 0 < x < 6, else 0. No parameters.
    """
    needs_input = False

    def f(self, x):
        return np.clip(x, 0, 6)

    def df(self, x, y):
        return (y > 0) & (y < 6)


@register_layer("PReLU")
class PReLULayer(NeuronLayer):
    """Parametric ReLU with a learned slope a_c per channel (axis 1), or one shared slope.

    y = max(0, x) + a_c * min(0, x)
    dL/dx = dL/dy * (1 if x > 0 else a_c);  dL/da_c += sum over n, spatial of dL/dy * x * [x <= 0]

    prototxt: ``prelu_param { filler { type: "constant" value: 0.25 } channel_shared: false }``.
    Bottom: (N, C, ...) with at least 2 axes. Param blob 0: shape (C,), or () when channel_shared.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.prelu_param
        if bottom[0].num_axes < 2:
            raise self.error("bottom must have at least 2 axes, got shape %s" % (bottom[0].shape,))
        self.channel_shared = p.channel_shared
        shape = () if self.channel_shared else (bottom[0].shape[1],)
        if not self.blobs:
            self.blobs = [self.new_blob(shape)]
            if p.HasField("filler"):
                get_filler(p.filler).fill(self.blobs[0])
            else:
                self.blobs[0].data[...] = 0.25
        elif self.blobs[0].count != int(np.prod(shape)):
            raise self.error("slope blob has %d values; expected %d"
                             % (self.blobs[0].count, int(np.prod(shape))))
        self.param_propagate_down = [True]

    def _slope(self, x):
        a = self.blobs[0].data
        if self.channel_shared:
            return a.reshape(())
        return a.reshape((1, -1) + (1,) * (x.ndim - 2))

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        self._x_copy = x.copy() if top[0] is bottom[0] else None
        # Caffe's arithmetic, branch-free (np.maximum(0, x) is std::max(x, 0), zeros' signs too;
        # see caffepy.math.cpu.relu_into); both terms are made before the top is written
        a = self._slope(x)
        with np.errstate(invalid="ignore", over="ignore"):
            np.add(np.maximum(x.dtype.type(0), x), a * np.minimum(x.dtype.type(0), x),
                   out=top[0].data)

    def backward_cpu(self, top, propagate_down, bottom):
        x = self._x_copy if (top[0] is bottom[0] and self._x_copy is not None) else bottom[0].data
        dy = top[0].diff
        if self.param_propagate_down and self.param_propagate_down[0]:
            g = dy * np.minimum(x.dtype.type(0), x)      # Caffe's dy * x * (x <= 0)
            if self.channel_shared:
                self.blobs[0].diff[...] += g.sum()
            else:
                axes = (0,) + tuple(range(2, x.ndim))
                self.blobs[0].diff[...] += g.sum(axis=axes)
        if propagate_down[0]:
            # Caffe's dy * ((x > 0) + a * (x <= 0)), branch-free
            with np.errstate(invalid="ignore", over="ignore"):
                a = self._slope(x).astype(x.dtype, copy=False)
                np.multiply(dy, (x > 0).astype(x.dtype) + a * (x <= 0).astype(x.dtype),
                            out=bottom[0].diff)


@register_layer("Sigmoid")
class SigmoidLayer(ElementwiseLayer):
    """y = 1 / (1 + exp(-x));  dL/dx = dL/dy * y * (1 - y).  No parameters (engine ignored)."""
    needs_input = False

    def f(self, x):
        return _sigmoid(x)

    def df(self, x, y):
        return y * (1 - y)

    def c_forward(self, k, x, y):
        k.sigmoid_c(x, y)
        return True

    def c_backward(self, k, x, y, dy, dx):
        k.sigmoid_c_backward(y, dy, dx)
        return True


@register_layer("TanH")
class TanHLayer(ElementwiseLayer):
    """y = tanh(x);  dL/dx = dL/dy * (1 - y^2).  No parameters (engine ignored)."""
    needs_input = False

    def f(self, x):
        return np.tanh(x)

    def df(self, x, y):
        return 1 - y * y          # Caffe's: dy * (1 - y * y), each step in the blob's type

    def c_forward(self, k, x, y):
        k.tanh_c(x, y)
        return True


@register_layer("AbsVal")
class AbsValLayer(ElementwiseLayer):
    """y = |x|;  dL/dx = dL/dy * sign(x) (0 at x = 0).  No parameters."""

    def f(self, x):
        return np.abs(x)

    def df(self, x, y):
        return np.sign(x)


@register_layer("BNLL")
class BNLLLayer(ElementwiseLayer):
    """Binomial normal log likelihood (softplus): y = log(1 + exp(x)), computed stably as
    max(x, 0) + log(1 + exp(-|x|));  dL/dx = dL/dy * sigmoid(x).  No parameters."""

    #: Caffe's kBNLL_THRESHOLD: the backward's exp(min(x, 50)).
    THRESHOLD = 50.0

    def f(self, x):
        return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))

    def df(self, x, y):
        return _sigmoid(x)

    def c_forward(self, k, x, y):
        k.bnll_c(x, y)
        return True

    def c_backward(self, k, x, y, dy, dx):
        k.bnll_c_backward(x, dy, x.dtype.type(self.THRESHOLD), dx)
        return True


@register_layer("ELU")
class ELULayer(ElementwiseLayer):
    """Exponential linear unit: y = x if x > 0 else alpha * (exp(x) - 1).

    dL/dx = dL/dy * (1 if x > 0 else y + alpha).  prototxt: ``elu_param { alpha: 1 }``.
    """

    def layer_setup(self, bottom, top):
        self.alpha = self.layer_param.elu_param.alpha

    def f(self, x):
        return np.where(x > 0, x, self.alpha * np.expm1(np.minimum(x, 0)))

    def df(self, x, y):
        return np.where(x > 0, 1, y + self.alpha)

    def c_forward(self, k, x, y):
        t = x.dtype.type
        k.elu_c(x, t(self.alpha), t(0), t(1), y)
        return True


@register_layer("Swish")
class SwishLayer(ElementwiseLayer):
    """Swish: y = x * sigmoid(beta * x).

    dL/dx = dL/dy * (beta * y + sigmoid(beta x) * (1 - beta * y)).
    prototxt: ``swish_param { beta: 1 }``.
    """

    def layer_setup(self, bottom, top):
        self.beta = self.layer_param.swish_param.beta

    def f(self, x):
        self._sigmoid_out = None
        return x * _sigmoid(self.beta * x)

    def df(self, x, y):
        s = _sigmoid(self.beta * x)
        return self.beta * y + s * (1 - self.beta * y)

    def c_forward(self, k, x, y):
        """Caffe's: s = sigmoid(beta * x) (a Sigmoid layer on x scaled in the blob's type), kept
        for the backward; y = x * s."""
        s = np.multiply(x, x.dtype.type(self.beta))
        k.sigmoid_c(s, s)
        np.multiply(x, s, out=y)
        self._sigmoid_out = s
        return True

    def c_backward(self, k, x, y, dy, dx):
        s = getattr(self, "_sigmoid_out", None)
        if s is None or s.shape != y.shape or s.dtype != y.dtype:
            return False
        k.swish_c_backward(y, s, dy, y.dtype.type(self.beta), dx)
        return True


@register_layer("Clip")
class ClipLayer(ElementwiseLayer):
    """y = min(max(x, min), max);  dL/dx = dL/dy where min <= x <= max, else 0.

    prototxt: ``clip_param { min: <required> max: <required> }``.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.clip_param
        if not (p.HasField("min") and p.HasField("max")):
            raise self.error("clip_param needs both min and max")
        if p.min > p.max:
            raise self.error("clip_param min %g > max %g" % (p.min, p.max))
        self.lo, self.hi = p.min, p.max

    def f(self, x):
        return np.clip(x, self.lo, self.hi)

    def df(self, x, y):
        return (x >= self.lo) & (x <= self.hi)


@register_layer("Threshold")
class ThresholdLayer(NeuronLayer):
    """y = 1 if x > threshold else 0.  No backward (as in Caffe).

    prototxt: ``threshold_param { threshold: 0 }``.
    """

    def layer_setup(self, bottom, top):
        self.threshold = self.layer_param.threshold_param.threshold

    def forward_cpu(self, bottom, top):
        top[0].data[...] = bottom[0].data > self.threshold


@register_layer("Dropout")
class DropoutLayer(NeuronLayer):
    """Dropout: in TRAIN each element is kept with probability 1 - p (p = dropout_ratio).

    scale_train true (default): TRAIN y = x * m / (1 - p), TEST y = x.
    scale_train false:          TRAIN y = x * m,           TEST y = x * (1 - p).
    m ~ Bernoulli(1 - p) from the seeded generator; dL/dx uses the same mask and scale.

    prototxt: ``dropout_param { dropout_ratio: 0.5 scale_train: true }`` (scale_train is a fork
    field). Bottom and top: any shape. p is in [0, 1) in TRAIN; a TEST net may give p = 1 (Caffe
    checks the ratio with DCHECK only, so its release build runs such a net, whose TEST pass
    does not drop), but a TRAIN net may not (every value dropped, scaled by 1 / 0: Caffe's
    release build trains on NaN).
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.dropout_param
        self.ratio = p.dropout_ratio
        self.train = self.phase == self._caffe_pb2.TRAIN
        if not (0 <= self.ratio < 1 or (self.ratio == 1 and not self.train)):
            raise self.error("dropout_ratio must be in [0, 1)%s, got %g" % (
                "" if self.train else " (1 in a TEST net)", self.ratio))
        self.scale_train = p.scale_train
        self.mask = None

    def _scale(self):
        if self.train:
            return 1.0 / (1.0 - self.ratio) if self.scale_train else 1.0
        return 1.0 if self.scale_train else 1.0 - self.ratio

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        if self.train:
            self.mask = self.rng().random(x.shape) >= self.ratio
            top[0].data[...] = x * self.mask * self._scale()
        else:
            top[0].data[...] = x * self._scale()

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        if self.train:
            bottom[0].diff[...] = top[0].diff * self.mask * self._scale()
        else:
            bottom[0].diff[...] = top[0].diff * self._scale()
