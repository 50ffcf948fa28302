"""Angular-margin layers of the face-recognition forks: happynear/caffe-windows' experiment branch
(LabelSpecificMargin, LabelSpecificAffine, LabelSpecificRescale, LabelSpecificHardMargin, Arccos,
Noise). LabelSpecificAdd, CosinAddm, Flip and the feature Normalize are
in ``amsoftmax.py``, xialuxi/arcface-caffe's CombinedMargin / AdaCos in ``arcface.py``,
FocalLoss and Accuracy's min_is_better in ``focal.py``.

Every layer takes scores (M, D) (cosines, or angles for LabelSpecificAffine) and the labels (M)
and changes the label column only; the others pass through.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, NeuronLayer, register_layer
from .losses import _labels
from ...layers.normalization import _freeze_param_specs

_EPS = 1e-4


def _rows(layer, bottom):
    x = bottom[0].data.reshape(bottom[0].shape[0], -1)
    return x, _labels(layer, bottom[1], x.shape[0], x.shape[1]), np.arange(x.shape[0])


def _pass_diff(top, bottom):
    """(dy, dx) as (M, D) views with dx = dy (a no-op in place): the label column's backward
    starts from it."""
    dy = top[0].diff.reshape(bottom[0].shape[0], -1)
    dx = bottom[0].diff.reshape(dy.shape)
    if dx is not dy:
        dx[...] = dy
    return dy, dx


def _state_blob(layer, values):
    """A parameter blob holding the layer's state (the fork's), never learned."""
    if not layer.blobs:
        layer.blobs = [layer.new_blob((len(values),))]
        layer.blobs[0].data[...] = values
    elif layer.blobs[0].count != len(values):
        raise layer.error("expected a state blob of %d values, got %s"
                          % (len(values), layer.blobs[0].shape))
    _freeze_param_specs(layer, [0])
    layer.param_propagate_down = [False]


class _LabelColumn(Layer):
    min_bottom_blobs = 2
    min_top_blobs = 1
    max_top_blobs = 2
    top1_size = 1

    def reshape(self, bottom, top):
        if bottom[0].num_axes < 2 or bottom[1].count != bottom[0].shape[0]:
            raise self.error("scores %s and labels %s: one label per row"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        if top[0] is not bottom[0]:
            top[0].reshape(bottom[0].shape)
        if len(top) > 1:
            top[1].reshape((self.top1_size,))

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("LabelSpecificMargin")
class LabelSpecificMarginLayer(_LabelColumn):
    """happynear's additive angular margin in degrees (ArcFace on cosines), TRAIN only.

    With c = clip(x[i, label_i], -1 + 1e-4, 1 - 1e-4) and the margin m (degrees):
        HARD: y = c cos(m) - sqrt(1 - c^2) sin(m) = cos(theta + m);
              dx = dy clip(cos(m) + c sin(m) / sqrt(1 - c^2), 0, 2)
        SOFT: theta = arccos(x), set to pi - 1e-4 when m theta > pi - 1e-4; y = cos(m theta)
              (m a multiplier); dx = dy clip(m sin(m theta) / sqrt(1 - c^2), 0, 2)
    other columns and the TEST phase: y = x, dx = dy; ``pass_bp``: dx = dy. The margin (the state
    blob, value 0) is margin_base, annealed in TRAIN when margin_base is set:
    m = margin_base + (1 + gamma iteration)^power - 1, iteration += 1, then min(m, margin_max) when
    margin_max is set; a third bottom gives m instead. ``auto_tune`` (needs the second top) keeps
    moving averages (0.99 / 0.01; the first values at iteration 1) of the mean label angle a_p and
    the mean other angle a_n (degrees) in blob values 1, 2 and sets m = (a_n - a_p) / 2; its top
    is [m, a_p, a_n] (TEST: the batch means). These are the fork's GPU rules (what its models were
    trained with; its CPU path lacks the clips, SOFT and auto_tune).

    prototxt: ``label_specific_margin_param { type: HARD margin_base: 0 margin_max: 10 power: 1
    gamma: 1 iteration: 0 auto_tune: false pass_bp: false }`` (margin_on_test, reset_margin: read,
    no effect, as the fork). Bottoms: cosines (M, D), labels (M) [, margin (1)]. Tops: (M, D)
    [, margin (1), or (3) with auto_tune]. Param: the state blob (1) or (3), lr_mult 0.
    """
    max_bottom_blobs = 3

    def layer_setup(self, bottom, top):
        p = self.layer_param.label_specific_margin_param
        self.auto_tune = p.auto_tune and len(bottom) < 3
        self.top1_size = 3 if self.auto_tune and len(top) > 1 else 1
        self.iteration = int(p.iteration)
        _state_blob(self, [p.margin_base] + [0.0] * (2 if p.auto_tune else 0))
        self.train = self.phase == self._caffe_pb2.TRAIN

    def forward_cpu(self, bottom, top):
        p = self.layer_param.label_specific_margin_param
        state = self.blobs[0].data
        if self.train and p.HasField("margin_base"):
            state[0] = p.margin_base + (1.0 + p.gamma * self.iteration) ** p.power - 1.0
            self.iteration += 1
        if self.train and p.HasField("margin_max"):
            state[0] = min(state[0], p.margin_max)
        x, lab, rows = _rows(self, bottom)
        if self.auto_tune and len(top) > 1:
            ang = np.degrees(np.arccos(np.clip(x, -1, 1)))
            pos = ang[rows, lab].mean()
            neg = (ang.sum() - ang[rows, lab].sum()) / (x.shape[0] * (x.shape[1] - 1))
            if not self.train:
                top[1].data[...] = [state[0], pos, neg]
            else:
                if self.iteration == 1:
                    state[1:3] = pos, neg
                else:
                    state[1:3] = 0.99 * state[1:3] + 0.01 * np.array([pos, neg])
                state[0] = (state[2] - state[1]) / 2
                top[1].data[...] = state
        if len(bottom) == 3:
            state[0] = bottom[2].data.reshape(-1)[0]
        if len(top) > 1:
            top[1].data.reshape(-1)[0] = state[0]
        self.margin = float(state[0])
        y = top[0].data.reshape(x.shape)
        if top[0] is not bottom[0]:
            y[...] = x
        if not self.train or self.margin == 0:
            return
        self.c = np.clip(x[rows, lab], -1 + _EPS, 1 - _EPS)
        if p.type == p.SOFT:
            self.theta = np.arccos(x[rows, lab])
            self.theta = np.where(self.margin * self.theta > np.pi - _EPS, np.pi - _EPS,
                                  self.theta)
            y[rows, lab] = np.cos(self.margin * self.theta)
        else:
            m = np.radians(self.margin)
            y[rows, lab] = self.c * np.cos(m) - np.sqrt(1 - self.c ** 2) * np.sin(m)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        p = self.layer_param.label_specific_margin_param
        dy, dx = _pass_diff(top, bottom)
        if not self.train or p.pass_bp or self.margin == 0:
            return
        lab = _labels(self, bottom[1], dy.shape[0], dy.shape[1])
        rows = np.arange(dy.shape[0])
        s = np.sqrt(1 - self.c ** 2)
        if p.type == p.SOFT:
            g = self.margin * np.sin(self.margin * self.theta) / s
        else:
            m = np.radians(self.margin)
            g = np.cos(m) + self.c / s * np.sin(m)
        dx[rows, lab] = dy[rows, lab] * np.clip(g, 0, 2)


@register_layer("LabelSpecificAffine")
class LabelSpecificAffineLayer(_LabelColumn):
    """happynear's margin on angles (after ``Arccos``), TRAIN only: for the label column
        y = min(scale pi^(1 - power) x^power + bias, pi - 1e-4)
        dx = dy scale pi^(1 - power) power x^(power - 1)   (the clip is ignored, as the fork)
    other columns and TEST: y = x, dx = dy (``original_bp``: dx = dy everywhere). Per TRAIN
    forward, from ``iteration`` (then += 1):
        scale = clip(scale_base (1 + scale_gamma it)^scale_power, scale_min, scale_max)
        bias  = clip(bias_base + (1 + bias_gamma it)^bias_power - 1, bias_min, bias_max)
        power = clip(power_base (1 + power_gamma it)^power_power, power_min, power_max)
    The second top is [scale, bias, power] ([1, 0, 1] in TEST). The state blob holds
    [scale_base, bias_base, 0] (``reset`` rewrites a loaded one); ``auto_tune`` (marked "doesn't
    work" in the fork) and a third bottom are refused.

    prototxt: ``label_specific_affine_param { scale_base: 1 scale_gamma: 0 scale_power: 1
    scale_min: 1 scale_max: 1 bias_base: 0 bias_gamma: 0 bias_power: 1 bias_min: 0 bias_max: 0
    power_base: 1 power_gamma: 0 power_power: -1 power_min: 1 power_max: 1 iteration: 0
    original_bp: false }`` (transform_test, scale_factor, protect_low_bound: read, no effect).
    Bottoms: angles (M, D), labels (M). Tops: (M, D) [, (3)]. Param: the state blob (3), lr_mult 0.
    """
    exact_num_bottom_blobs = 2
    top1_size = 3

    def layer_setup(self, bottom, top):
        p = self.layer_param.label_specific_affine_param
        if p.auto_tune:
            raise self.error("label_specific_affine_param.auto_tune is not supported")
        loaded = bool(self.blobs)
        _state_blob(self, [p.scale_base, p.bias_base, 0.0])
        if loaded and p.reset:
            self.blobs[0].data[:2] = p.scale_base, p.bias_base
        self.iteration = int(p.iteration)
        self.train = self.phase == self._caffe_pb2.TRAIN

    def forward_cpu(self, bottom, top):
        p = self.layer_param.label_specific_affine_param
        scale, bias, power = 1.0, 0.0, 1.0
        if self.train:
            it = self.iteration
            scale = min(max(p.scale_base * (1.0 + p.scale_gamma * it) ** p.scale_power,
                            p.scale_min), p.scale_max)
            bias = min(max(p.bias_base + (1.0 + p.bias_gamma * it) ** p.bias_power - 1.0,
                           p.bias_min), p.bias_max)
            power = min(max(p.power_base * (1.0 + p.power_gamma * it) ** p.power_power,
                            p.power_min), p.power_max)
            self.iteration += 1
        self.coef = (scale, bias, power)
        if len(top) > 1:
            top[1].data[...] = self.coef
        x, lab, rows = _rows(self, bottom)
        y = top[0].data.reshape(x.shape)
        y[...] = x
        if self.train:
            v = x[rows, lab] ** power * scale * np.pi ** (1 - power) + bias
            y[rows, lab] = np.minimum(v, np.pi - _EPS)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        dy = top[0].diff.reshape(bottom[0].shape[0], -1)
        dx = bottom[0].diff.reshape(dy.shape)
        dx[...] = dy
        if not self.train or self.layer_param.label_specific_affine_param.original_bp:
            return
        x, lab, rows = _rows(self, bottom)
        scale, _, power = self.coef
        dx[rows, lab] = (dy[rows, lab] * scale * np.pi ** (1 - power) * power
                         * x[rows, lab] ** (power - 1))


@register_layer("LabelSpecificRescale")
class LabelSpecificRescaleLayer(_LabelColumn):
    """happynear's rescaling of the label column (w = positive_weight) and the others
    (v = negative_weight), TRAIN only unless ``rescale_test``:
        y[i, label_i] = w x (+ 1 - w with ``bias_fix``), or sign(x) |x|^w (``power_on_positive``)
        y[i, j] = v x   (j != label_i);   dx the same factors (w |x|^(w - 1) for the power form)
    With ``for_ip`` only rows whose label score is > 0 get the label-column change. When
    positive_weight_base is set (TRAIN): iteration += 1, then
    w = positive_weight_base (1 + gamma iteration)^-power, clipped to positive_weight_min / _max
    where those are set. The second top is w. In place is allowed except with power_on_positive
    (refused, as the fork).

    prototxt: ``label_specific_rescale_param { positive_weight: 1 negative_weight: 1
    rescale_test: false for_ip: false positive_weight_base: 0 gamma: 0 power: 1
    positive_weight_min: 0 positive_weight_max: 0 iteration: 0 bias_fix: false
    power_on_positive: false }`` (positive_lower_bound, negative_upper_bound, do_backward: read, no
    effect, as the fork). Bottoms: scores (M, D), labels (M). Tops: (M, D) [, w (1)].
    """
    exact_num_bottom_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.label_specific_rescale_param
        if p.power_on_positive and top[0] is bottom[0]:
            raise self.error("in-place is not allowed with power_on_positive")
        self.w = p.positive_weight
        self.iteration = int(p.iteration)
        train = self.phase == self._caffe_pb2.TRAIN
        self.anneal = p.HasField("positive_weight_base") and train
        self.active = train or p.rescale_test

    def forward_cpu(self, bottom, top):
        p = self.layer_param.label_specific_rescale_param
        if self.anneal:
            self.iteration += 1
            w = p.positive_weight_base * (1.0 + p.gamma * self.iteration) ** -p.power
            if p.HasField("positive_weight_min"):
                w = max(w, p.positive_weight_min)
            if p.HasField("positive_weight_max"):
                w = min(w, p.positive_weight_max)
            self.w = w
        if len(top) > 1:
            top[1].data[...] = self.w
        x, lab, rows = _rows(self, bottom)
        y = top[0].data.reshape(x.shape)
        if top[0] is not bottom[0]:
            y[...] = x
        if not self.active:
            return
        self.pos = x[rows, lab] > 0 if p.for_ip else np.ones(x.shape[0], bool)
        r, c = rows[self.pos], lab[self.pos]
        self.x_pos = y[r, c].copy()
        if self.w != 1:
            if p.power_on_positive:
                y[r, c] = np.sign(self.x_pos) * np.abs(self.x_pos) ** self.w
            else:
                y[r, c] = self.x_pos * self.w + ((1 - self.w) if p.bias_fix else 0)
        if p.negative_weight != 1:
            keep = y[rows, lab].copy()
            y *= p.negative_weight
            y[rows, lab] = keep

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        p = self.layer_param.label_specific_rescale_param
        dy, dx = _pass_diff(top, bottom)
        if not self.active:
            return
        lab = _labels(self, bottom[1], dy.shape[0], dy.shape[1])
        rows = np.arange(dy.shape[0])
        if self.w != 1:
            r, c = rows[self.pos], lab[self.pos]
            f = (self.w * np.abs(self.x_pos) ** (self.w - 1) if p.power_on_positive
                 else self.w)
            dx[r, c] *= f
        if p.negative_weight != 1:
            keep = dx[rows, lab].copy()
            dx *= p.negative_weight
            dx[rows, lab] = keep


@register_layer("LabelSpecificHardMargin")
class LabelSpecificHardMarginLayer(_LabelColumn):
    """happynear's margin towards the mean of the other scores, TRAIN only (the fork's GPU code;
    its CPU code is NOT_IMPLEMENTED). With w = positive_weight and n_i the mean of row i's other
    D - 1 scores:
        y[i, label_i] = x + (1 - w)(n_i - x) = w x + (1 - w) n_i;   other columns y = x
    The second top is sum_i (1 - w)(n_i - x_i) / (M pi / 180) (the mean margin read as degrees;
    not written in TEST). Backward is the fork's: dx = dy (its exact terms are commented out), so
    the gradient checker applies only where the layer is the identity (TEST).

    prototxt: ``label_specific_hard_margin_param { positive_weight: 0.5 }``.
    Bottoms: scores (M, D), labels (M). Tops: (M, D) [, (1)].
    """
    exact_num_bottom_blobs = 2

    def forward_cpu(self, bottom, top):
        w = self.layer_param.label_specific_hard_margin_param.positive_weight
        x, lab, rows = _rows(self, bottom)
        y = top[0].data.reshape(x.shape)
        y[...] = x
        if self.phase != self._caffe_pb2.TRAIN:
            return
        if x.shape[1] < 2:
            raise self.error("needs at least 2 scores per row", ShapeError)
        xl = x[rows, lab]
        margin = ((x.sum(axis=1) - xl) / (x.shape[1] - 1) - xl) * (1 - w)
        y[rows, lab] = xl + margin
        if len(top) > 1:
            top[1].data[...] = margin.sum() / (x.shape[0] * np.pi / 180)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff


@register_layer("Arccos")
class ArccosLayer(NeuronLayer):
    """happynear's Arccos: y = arccos(x) (NaN outside [-1, 1], as acosf);
    dx = -dy / sqrt(1 - min(x, 0.99)^2) (the fork's bound near x = 1). No parameters."""

    def forward_cpu(self, bottom, top):
        with np.errstate(invalid="ignore"):
            top[0].data[...] = np.arccos(bottom[0].data)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            x = np.minimum(bottom[0].data, 0.99)
            bottom[0].diff[...] = -top[0].diff / np.sqrt(1 - x * x)


@register_layer("Noise")
class NoiseLayer(NeuronLayer):
    """happynear's Noise (feature augmentation), TRAIN only: with r = sqrt(mean(x^2)),
        gaussian_std set: y = x + N(bias, (r gaussian_std)^2)
        else uniform_range set: y = x + U(bias - uniform_range, bias + uniform_range)
        neither: y = x
    TEST: y = x. dx = dy (the fork shares the diff; r is not differentiated).

    prototxt: ``noise_param { gaussian_std: 0 uniform_range: 0 bias: 0 }`` (happynear's fields,
    merged into the NoiseParameter message under the numbers 10750-10752).
    Bottom and top: any shape (in place allowed).
    """

    def forward_cpu(self, bottom, top):
        p = self.layer_param.noise_param
        x = bottom[0].data
        if self.phase != self._caffe_pb2.TRAIN or not (
                p.HasField("gaussian_std") or p.HasField("uniform_range")):
            if top[0] is not bottom[0]:
                top[0].data[...] = x
            return
        if p.HasField("gaussian_std"):
            r = np.sqrt(np.square(x, dtype=np.float64).mean()) if x.size else 0.0
            noise = self.rng().normal(p.bias, r * p.gaussian_std, x.shape)
        else:
            noise = self.rng().uniform(p.bias - p.uniform_range, p.bias + p.uniform_range,
                                       x.shape)
        top[0].data[...] = x + noise

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0] and top[0] is not bottom[0]:
            bottom[0].diff[...] = top[0].diff

