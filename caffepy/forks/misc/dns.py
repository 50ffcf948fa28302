"""Dynamic Network Surgery (yiwenguo/Dynamic-Network-Surgery; alex-tolstov/sparseconv carries
the same layers): ``CConvolution`` and ``CInnerProduct``, a Convolution / InnerProduct whose
weights and bias are multiplied by 0/1 masks that training prunes and splices
(src/caffe/layers/compress_conv_layer.cpp, compress_inner_product_layer.cpp).

Parameter blobs: ``[W, b, T_W, T_b]`` (masks of the weight's and the bias's shapes, filled by
``weight_mask_filler`` / ``bias_mask_filler``); without a bias ``[W, T_W]``, T_W then filled by
``bias_mask_filler`` (as the fork does). The masks are ordinary parameter blobs (saved, loaded,
shared with the test net); no gradient is written to them.

Forward: ``y = conv(x, W * T_W) + b * T_b`` (InnerProduct alike). In the TRAIN phase, before
that, at iteration ``it`` (the solver's, 0 for a net run outside a solver):

* once, at the first TRAIN forward with ``it == 0`` (while ``std == 0``): over the ``n``
  non-zero parameters of W and b together, ``mu = sum |w| / n`` and
  ``std = sqrt(sum w^2 / n - mu^2)`` (the spread of ``|w|``) -- CConvolution takes the masked
  values ``T w`` (and sums ``T w^2``), CInnerProduct the unmasked ones;
* with ``r`` uniform in [0, 1): if ``(1 + gamma it)^(-power) > r`` and ``it < iter_stop``, with
  ``t = max(mu + c_rate std, 0)``: an entry with mask 1 and ``|w| <= 0.9 t`` gets mask 0, an
  entry with mask 0 and ``|w| > 1.1 t`` gets mask 1 (W and b alike).

Backward: ``dx = conv^T(dy, W * T_W)``; the parameter gradients are those of the masked
parameters, applied to the unmasked ones (pruned weights keep learning, so that they may be
spliced back): ``dW = dW * T_W + d(W * T_W)``, ``db = db * T_b + d(b * T_b)`` -- the fork
multiplies the diff already accumulated by the mask, then adds the gradient with respect to the
masked parameter (for CConvolution once per bottom).

prototxt: the ``convolution_param`` / ``inner_product_param`` of the base layer, plus
``cconvolution_param { gamma: 0.001 power: 1 c_rate: 3 iter_stop: 10000 weight_mask_filler
bias_mask_filler }`` / ``cinner_product_param { gamma: 0.001 power: 1 c_rate: 3 iter_stop: 8000
weight_mask_filler bias_mask_filler }`` (the fork's defaults; caffepy's schema merges another
fork's CInnerProductParameter, whose c_rate defaults to 1, so an unset c_rate reads 3 here).
The mask fillers default to constant 0, as in the fork.
"""
import numpy as np

from ...blob import Blob, ShapeBlob
from ...layers.base import _shapes_only, fork_param, register_layer
from ...layers.conv import ConvolutionLayer
from ...layers.inner_product import InnerProductLayer

_DEFAULT_ITER_STOP = {"cconvolution_param": 10000.0, "cinner_product_param": 8000.0}


class _Surgery(object):
    """The masks, their update and the masked forward / backward shared by both layers."""
    param_field = None
    masked_statistics = True   # CConvolution: mu / std of T W; CInnerProduct: of W

    def set_iter(self, iteration, max_iter):
        self.iteration = int(iteration)

    def _read_surgery(self):
        p = self.surgery_param()
        if p is None:
            raise self.error("this schema has no %s" % self.param_field)
        self.gamma, self.power = float(p.gamma), float(p.power)
        self.c_rate = float(p.c_rate) if p.HasField("c_rate") else 3.0
        self.iter_stop = float(p.iter_stop) if p.HasField("iter_stop") else \
            _DEFAULT_ITER_STOP[self.param_field]
        self.mask_fillers = (p.weight_mask_filler, p.bias_mask_filler)
        self.mu = self.std = 0.0
        self.iteration = getattr(self, "iteration", 0)

    def init_param_blobs(self, shapes, weight_filler, bias_filler=None):
        self._read_surgery()
        self.n_main = len(shapes)
        full = list(shapes) + [shapes[0]] + ([shapes[1]] if len(shapes) > 1 else [])
        given = len(self.blobs)
        if given == len(shapes):               # weights without masks: masks filled in setup
            self.check_param_blobs(shapes)
            self._masks_pending = True
            return
        if given:
            self.check_param_blobs(full)
            return
        super().init_param_blobs(full, weight_filler, bias_filler)
        self._masks_pending = True

    def _fill_declared_params(self):
        if not self.__dict__.pop("_masks_pending", False):
            return super()._fill_declared_params()
        from ...fillers import get_filler
        main, declared = self.blobs[:self.n_main], self.blobs[self.n_main:]
        self.blobs = main
        super()._fill_declared_params()
        shapes = [b.shape for b in declared] or [b.shape for b in self.blobs]
        if _shapes_only[0]:
            self.blobs += declared or [ShapeBlob(s, dtype=self.dtype) for s in shapes]
            return
        # with a bias: T_W by weight_mask_filler, T_b by bias_mask_filler; without: bias_mask_filler
        fillers = self.mask_fillers if self.n_main == 2 else self.mask_fillers[1:]
        for shape, fp in zip(shapes, fillers):
            blob = self.new_blob(shape)
            get_filler(fp).fill(blob)
            self.blobs.append(blob)
        self.param_propagate_down = [True] * len(self.blobs)

    # -- mask update (TRAIN) -------------------------------------------------------------------
    def _update_masks(self):
        params = self.blobs[:self.n_main]
        masks = self.blobs[self.n_main:]
        if self.std == 0 and self.iteration == 0:
            total, square, count = 0.0, 0.0, 0
            for p, m in zip(params, masks):
                w = p.data.astype(np.float64)
                t = m.data.astype(np.float64) if self.masked_statistics else 1.0
                total += float(np.abs(t * w).sum())
                square += float((t * w * w).sum())
                count += int(np.count_nonzero(t * w))
            with np.errstate(divide="ignore", invalid="ignore"):
                self.mu = float((self.mu + total) / np.float64(count))
                var = (self.std + square - count * self.mu * self.mu) / np.float64(count)
                self.std = float(np.sqrt(var))
        r = self.rng().random()
        if (1 + self.gamma * self.iteration) ** (-self.power) > r and \
                self.iteration < self.iter_stop:
            t = max(self.mu + self.c_rate * self.std, 0.0)
            for p, m in zip(params, masks):
                a, mask = np.abs(p.data), m.data
                off = (mask == 1) & (a <= 0.9 * t)
                on = (mask == 0) & (a > 1.1 * t)
                mask[off] = 0
                mask[on] = 1

    # -- masked forward / backward -------------------------------------------------------------
    def _masked(self):
        eff = getattr(self, "_effective", None)
        if eff is None or [b.shape for b in eff] != [b.shape for b in self.blobs[:self.n_main]]:
            eff = self._effective = [Blob(b.shape, dtype=self.dtype)
                                     for b in self.blobs[:self.n_main]]
        for e, p, m in zip(eff, self.blobs, self.blobs[self.n_main:]):
            np.multiply(p.data, m.data, out=e.data)
        return eff

    def _with_blobs(self, blobs, fn, *args):
        saved = self.blobs
        self.blobs = blobs
        try:
            return fn(*args)
        finally:
            self.blobs = saved

    def forward_cpu(self, bottom, top):
        if self.phase == self._caffe_pb2.TRAIN:
            self._update_masks()
        self._with_blobs(self._masked(), super().forward_cpu, bottom, top)

    def _fold_diffs(self, eff):
        for k, (e, p, m) in enumerate(zip(eff, self.blobs, self.blobs[self.n_main:])):
            if self.param_propagate_down[k]:
                p.diff *= m.data
                p.diff += e.diff
            e.diff[...] = 0

    def backward_cpu(self, top, propagate_down, bottom):
        eff = self._masked()
        for e in eff:
            e.diff[...] = 0
        self._with_blobs(eff, super().backward_cpu, top, propagate_down, bottom)
        self._fold_diffs(eff)


@register_layer("CConvolution")
class CConvolutionLayer(_Surgery, ConvolutionLayer):
    """Dynamic Network Surgery's masked Convolution (module doc): ``convolution_param`` as
    Convolution, ``cconvolution_param { gamma power c_rate iter_stop weight_mask_filler
    bias_mask_filler }``. Blobs: bottom (N, C, *S) -> top (N, num_output, *O); params W, b,
    T_W, T_b."""
    param_field = "cconvolution_param"
    plain_weights = False

    def surgery_param(self):
        """The masks' settings (ConvolutionLayer reads self.layer_param.convolution_param)."""
        return fork_param(self.layer_param, "cconvolution_param")

    def backward_cpu(self, top, propagate_down, bottom):
        # the fork re-masks the accumulated diff before each bottom's term
        eff = self._masked()
        for e in eff:
            e.diff[...] = 0
        cols = self._cols
        try:
            for i in range(len(bottom)):
                self._cols = {0: cols[i]} if i in cols else {}
                self._with_blobs(eff, ConvolutionLayer.backward_cpu, self, top[i:i + 1],
                                 propagate_down[i:i + 1], bottom[i:i + 1])
                self._fold_diffs(eff)
        finally:
            self._cols = cols


@register_layer("CInnerProduct")
class CInnerProductLayer(_Surgery, InnerProductLayer):
    """Dynamic Network Surgery's masked InnerProduct (module doc): ``inner_product_param`` as
    InnerProduct, ``cinner_product_param { gamma power c_rate iter_stop weight_mask_filler
    bias_mask_filler }``. Blobs: bottom (*B, *F) -> top (*B, num_output); params W, b, T_W,
    T_b."""
    param_field = "cinner_product_param"
    masked_statistics = False

    def surgery_param(self):
        """The masks' settings (InnerProductLayer reads self.layer_param.inner_product_param)."""
        return fork_param(self.layer_param, "cinner_product_param")
