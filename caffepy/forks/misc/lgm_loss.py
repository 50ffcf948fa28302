"""WeitaoVan/L-GM-loss's ClassDistance: the large-margin Gaussian-mixture (L-GM) classification
layer (Wan et al., CVPR 2018), as the fork computes it (src/caffe/layers/class_distance_layer.cu;
its Forward_cpu / Backward_cpu only stop with "not implemented", the CUDA kernels are the
reference).

Parameters: means mu (N, K) (``weight_filler``) and variances s, (N,) when ``isotropic`` (the
default) or (N, K) (``bias_filler``). With x_i the i-th row of the bottom flattened to K values:

    L2, isotropic:  d_ij = sum_k (mu_jk - x_ik)^2,            z_ij = -d_ij / (2 S_j),
                    S_j = max(s_j, 0) + 1e-4
    L2, diagonal:   z_ij = -1/2 sum_k (mu_jk - x_ik)^2 / max(s_jk, 1e-8)
    IP:             z_ij = sum_k mu_jk x_ik
In the TRAIN phase with a label bottom y, the label's logit gets the margins alpha and beta:
    z_{i,y_i} <- (1 + alpha) z_{i,y_i} - beta
alpha is ``margin_mul``, beta ``margin_add`` (each a ParamParameter schedule: CONSTANT; STEPUP:
value <- clip(value * gamma); ADDUP: value <- clip(value + gamma), clip to [min, max], at every
forward whose counter ``iter`` is a positive multiple of ``step``; the counter starts at ``iter``
and the starting value is advanced by iter // step steps; unset, beta is 0). The fork's kernel
subtracts its m_add_ Param; its published caffe.proto has no ``margin_add`` (the commit's setup
never fills m_add_), but its example nets, written against an earlier schema, set it as such a
schedule: caffepy's field is 13200 (proto/additions.d/landmark_lgm_margin.json). beta is a
constant shift: it leaves the backward unchanged. ``ignore_zero`` (TRAIN only) leaves zero inputs
out of d_ij.

Backward (the fork's kernels), g = dL/dz, m = 1 + alpha (1 when ``block_mul_grad``) at the label
and 1 elsewhere, c = ``center_coef`` / M at the label and 0 elsewhere:
    with a label bottom (in either phase):
      L2 isotropic: dx_ik = sum_j (mu_jk - x_ik) (m g_ij / S_j - c_ij)
                    dmu_jk += sum_i (x_ik - mu_jk) (m g_ij / S_j - c_ij)
                    ds_j = sum_i d_ij m g_ij / (2 S_j s_j)   (``update_sigma``; else 0)
      L2 diagonal:  dx_ik = sum_j (mu_jk - x_ik) (m g_ij / (max(s_jk, 0) + 1e-8) - c_ij)
                    dmu_jk += sum_i (x_ik - mu_jk) (m g_ij / T_jk - c_ij),  T = max(s, 0) + 1e-4
                    ds_jk = sum_i (x_ik - mu_jk)^2 m g_ij / (2 T_jk^2)   (``update_sigma``)
      IP:           dx_ik = sum_j mu_jk m g_ij + (x_ik - mu_{y_i,k}) center_coef / M
                    dmu_jk += sum_i x_ik m g_ij + [j = y_i] (mu_jk - x_ik) center_coef / M
    the c terms are the gradient of the likelihood regulariser
    center_coef / (2M) sum_i ||x_i - mu_{y_i}||^2, which has no top: it is added whatever g is.
    The variance "gradient" differs from dz/ds by S_j / s_j (T / max(s, 1e-8) diagonal).
    without one:    L2: dx_ik = sum_j (mu_jk - x_ik) g_ij,  dmu_jk += sum_i (x_ik - mu_jk) g_ij
                    (no 1 / S_j: exact only for S_j = 1), ds = 0;  IP: the inner product's.
``ignore_zero`` drops x_ik = 0 from dx_ik and dmu_jk (from ds_j the rows with x_i0 = 0) in either
phase. The variance diff is overwritten (zero unless ``update_sigma``), the means' accumulated.

Refused: ``metric: L1`` (the fork's mean gradient reads the bottom at a mean's index: not a
gradient of its forward), ``ignore_zero`` with a diagonal variance (the fork's forward then reads
s as if isotropic). ``bias_term`` and ``dropout_ratio`` are read by no code of the fork's layer.

prototxt: ``class_distance_param { num_output weight_filler bias_filler margin_mul { policy value
min max gamma step iter } margin_add { ... } metric center_coef block_mul_grad ignore_zero update_sigma isotropic }``.
Bottoms: x (M, ...) [, label (M)]. Top: z (M, N).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer
from ...proto import caffe_pb2

_CD = caffe_pb2.ClassDistanceParameter
_PP = caffe_pb2.ParamParameter


class _Schedule(object):
    """The fork's Param<Dtype> (include/caffe/filler.hpp): a value stepped every ``step`` calls."""

    def __init__(self, p):
        self.p = p
        self.value = float(p.value)
        self.iter = int(p.iter)
        if self.iter and p.step:
            k = self.iter // p.step
            if p.policy == _PP.STEPUP:
                self.value = self._clip(self.value * float(p.gamma) ** k)
            elif p.policy == _PP.ADDUP:
                self.value = self._clip(self.value + float(p.gamma) * k)

    def _clip(self, v):
        return max(float(self.p.min), min(float(self.p.max), v))

    def next(self):
        """The value for this forward, then count it (Param::get_iter)."""
        if self.iter and self.p.step and self.iter % self.p.step == 0:
            if self.p.policy == _PP.STEPUP:
                self.value = self._clip(self.value * float(self.p.gamma))
            elif self.p.policy == _PP.ADDUP:
                self.value = self._clip(self.value + float(self.p.gamma))
        self.iter += 1
        return self.value


@register_layer("ClassDistance")
class ClassDistanceLayer(Layer):
    __doc__ = __doc__
    min_bottom_blobs = 1
    max_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.class_distance_param
        if not p.num_output:
            raise self.error("class_distance_param.num_output is required")
        if p.metric == _CD.L1:
            raise self.error("class_distance_param.metric L1 is not supported (the fork's mean "
                             "gradient is not a gradient of its L1 forward)")
        if p.ignore_zero and not p.isotropic:
            raise self.error("class_distance_param.ignore_zero with isotropic: false is not "
                             "supported (the fork's forward then reads the variances as isotropic)")
        for name in ("margin_mul", "margin_add"):
            sched = getattr(p, name)
            if sched.step <= 0 and sched.policy != _PP.CONSTANT:
                raise self.error("class_distance_param.%s.step must be positive" % name)
        n = int(p.num_output)
        self.k = bottom[0].count_range(1)
        sigma = (n,) if p.isotropic else (n, self.k)
        self.init_param_blobs([(n, self.k), sigma], p.weight_filler, p.bias_filler)
        self.param_propagate_down = [True, True]
        self.margin = _Schedule(p.margin_mul)
        self.margin_add = _Schedule(p.margin_add)

    def reshape(self, bottom, top):
        if bottom[0].count_range(1) != self.k:
            raise self.error("the bottom has %d values per row, the means %d"
                             % (bottom[0].count_range(1), self.k), ShapeError)
        self.m = bottom[0].shape[0]
        if len(bottom) == 2 and bottom[1].count != self.m:
            raise self.error("%d labels for %d rows" % (bottom[1].count, self.m), ShapeError)
        top[0].reshape((self.m, self.blobs[0].shape[0]))

    def _labels(self, blob):
        y = blob.data.reshape(-1).astype(np.int64)
        n = self.blobs[0].shape[0]
        if y.size and (y.min() < 0 or y.max() >= n):
            raise self.error("label %d outside [0, %d)" % (y.max() if y.max() >= n else y.min(), n))
        return y

    def _diff(self, x):
        """x - mu as (M, N, K)."""
        return x[:, None, :] - self.blobs[0].data[None, :, :]

    def forward_cpu(self, bottom, top):
        p = self.layer_param.class_distance_param
        x = bottom[0].data.reshape(self.m, self.k)
        mu, s = self.blobs[0].data, self.blobs[1].data
        train = self.phase == caffe_pb2.TRAIN
        if p.metric == _CD.IP:
            z = x @ mu.T
        else:
            d2 = np.square(self._diff(x))
            if p.ignore_zero and train:
                d2 = d2 * (x != 0)[:, None, :]
            if p.isotropic:
                self.dist = d2.sum(axis=2)
                z = -0.5 * self.dist / (np.maximum(s, 0) + 1e-4)[None, :]
            else:
                z = -0.5 * (d2 / np.maximum(s, 1e-8)[None]).sum(axis=2)
        if len(bottom) == 2 and train:
            y = self._labels(bottom[1])
            alpha, beta = self.margin.next(), self.margin_add.next()
            rows = np.arange(self.m)
            z[rows, y] += z[rows, y] * alpha - beta
        top[0].data[...] = z

    def backward_cpu(self, top, propagate_down, bottom):
        p = self.layer_param.class_distance_param
        x = bottom[0].data.reshape(self.m, self.k)
        mu, s = self.blobs[0].data, self.blobs[1].data
        g = top[0].diff.reshape(self.m, -1)
        n = mu.shape[0]
        mult = np.ones((self.m, n), dtype=g.dtype)
        cc = np.zeros((self.m, n), dtype=g.dtype)
        labelled = len(bottom) == 2
        if labelled:
            y = self._labels(bottom[1])
            rows = np.arange(self.m)
            mult[rows, y] = 1 + (0 if p.block_mul_grad else self.margin.value)
            cc[rows, y] = p.center_coef / self.m
        keep = (x != 0) if p.ignore_zero else np.ones_like(x, dtype=bool)
        s_diff = np.zeros_like(s)
        if p.metric == _CD.IP:
            dx = (mult * g) @ mu + cc.sum(axis=1, keepdims=True) * x - cc @ mu
            dmu = (mult * g).T @ x + cc.sum(axis=0)[:, None] * mu - cc.T @ x
        else:
            diff = self._diff(x)                                      # x - mu, (M, N, K)
            mg = (mult * g)[:, :, None]
            if not labelled:                                          # no variance at all
                coef_x = coef_mu = mg
            elif p.isotropic:
                coef_x = coef_mu = mg / (np.maximum(s, 0) + 1e-4)[None, :, None]
            else:
                coef_x = mg / (np.maximum(s, 0) + 1e-8)[None]
                coef_mu = mg / (np.maximum(s, 0) + 1e-4)[None]
            c3 = cc[:, :, None]
            dx = -(diff * (coef_x - c3)).sum(axis=1) * keep
            dmu = (diff * (coef_mu - c3) * keep[:, None, :]).sum(axis=0)
            if labelled and p.update_sigma:
                big = np.maximum(s, 0) + 1e-4
                if p.isotropic:
                    rows = keep[:, 0]
                    s_diff = (self.dist * mult * g)[rows].sum(axis=0) / (2 * big * s)
                else:
                    s_diff = (np.square(diff) * mg * keep[:, None, :]).sum(axis=0) / (2 * big ** 2)
        if propagate_down[0]:
            bottom[0].diff.reshape(self.m, self.k)[...] = dx
        if self.param_propagate_down[0]:
            self.blobs[0].diff[...] += dmu
        if self.param_propagate_down[1]:
            self.blobs[1].diff[...] = s_diff
