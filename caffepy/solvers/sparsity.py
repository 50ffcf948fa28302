"""Structured Sparsity Learning: per-parameter L1/L2, group lasso, frozen zero connections.

What wenwei202/caffe computes (branch scnn: src/caffe/solvers/sgd_solver.cpp, net.cpp, blob.cpp,
layers/base_conv_layer.cpp, layers/inner_product_layer.cpp, util/math_functions.cpp and .cu) with
the fields that it and its descendants (IntelLabs/SkimCaffe, Swas99/caffe; chenxuhao/caffe-escoin
has regularization_type only) declare:

* ``param { regularization_type: "L1" }`` (ParamSpec): this parameter's regularization, in place of
  the solver's ``regularization_type`` (empty: the solver's). L1 or L2, with the usual
  ``local_decay = weight_decay * decay_mult``.
* group lasso, on the parameter seen as a matrix ``W`` of ``R = shape[0]`` rows (filters, output
  units) and ``C = count / R`` columns, its rows split into ``G`` groups (the layer's
  ``convolution_param.group``; 1 for a layer without convolution_param; rows per group ``R / G``):

  - breadth (``ParamSpec.breadth_decay_mult`` times ``SolverParameter.breadth_decay``, ``lb``):
    one group per row, ``n_r = ||W[r, :]||_2``;
  - kernel shape (``ParamSpec.kernel_shape_decay_mult`` times
    ``SolverParameter.kernel_shape_decay``, ``lk``): one group per column within each filter
    group, ``n_gc = ||W[rows of g, c]||_2``;

  - blocks (each ``block_group_lasso { xdimen ydimen block_decay_mult }`` of the ParamSpec times
    ``SolverParameter.block_group_decay``, ``lq``): one group per block of ``ydimen`` rows by
    ``xdimen`` columns (both must divide ``R`` and ``C``), ``n_b = ||W[block]||_2``;

  ``diff += lk * W / n_gc``, ``diff += lb * W / n_r``, then per block spec ``diff += lq * W / n_b``
  (0 where the norm is 0), after the L1/L2 term; the regularization term is
  ``lk * sum n_gc + lb * sum n_r + sum lq * sum n_b``. The fork computes breadth and kernel shape
  only in GPU mode (its CPU mode stops with "Deprecated in CPU mode"); caffepy computes that
  arithmetic in every mode.
* ``connectivity_mode`` (LayerParameter) of a Convolution / Deconvolution / InnerProduct layer,
  applied when trained weights are copied into the layer from a binary model (the fork's
  ``WeightAlign`` in ``CopyTrainedLayersFrom``; not for .h5 weights, as there): the weights
  with ``|w| < 1e-4`` become 0, then a mask is fixed: DISCONNECTED_ELTWISE keeps the nonzero
  weights, DISCONNECTED_GRPWISE zeroes, within each filter group, the rows that are all zero and
  the columns that are all zero. ``Net.update`` multiplies the diff by the mask before
  ``data -= diff``, so disconnected weights stay 0 through training. The forward pass reads the
  weights as they are (zero where disconnected): it computes what an unmasked layer computes.
  CONNECTED (the default) and other layer types: no mask.
* the fork's ``Net::Update`` then sets every learnable value with ``|w| < 1e-4`` to 0 after each
  update (blob.cpp ``Zerout``, ZEROUT_THRESHOLD of common.hpp). caffepy does it for a net that
  sets any of the fields above (BVLC Caffe does not), and logs the fork's "Total regularization
  terms" line at display iterations.

A shared parameter takes a field from any sharing layer that sets it; two different values is
an error, as in the fork's net.cpp (two block_group_lasso lists likewise).

IntelLabs/SkimCaffe (intel_scnn) and Swas99/caffe, a copy of it, compute these fields otherwise:
their SGDSolver::ApplyUpdate no longer calls GroupLassoRegularize (breadth, kernel shape and block
decay change nothing there), and instead of the zerout of every param they zero ``|w| <=
prune_threshold`` (a SolverParameter field of theirs, default 1e-4) after each update of an
L1-regularized param only. caffepy follows wenwei202/caffe. Their further regularization types
(L1_DNS, ISTA, L1_Winograd, ...) are refused: their names are not L1/L2.
"""
import numpy as np

from ..errors import NetError, SolverError
from ..log import fmt, info

ZEROUT_THRESHOLD = 1e-4
_CONNECTED, _ELTWISE, _GRPWISE = 0, 1, 2


class ParamRule(object):
    """The SSL settings of one learnable parameter (the owner's, merged with its sharers')."""
    __slots__ = ("regularization_type", "breadth", "kernel_shape", "groups", "blocks", "has")

    def __init__(self):
        self.regularization_type, self.breadth, self.kernel_shape, self.groups = "", 0.0, 0.0, 1
        self.blocks = []          # (ydimen rows, xdimen columns, block_decay_mult)
        self.has = set()


def _param_entries(net):
    """(layer index, layer, blob index, ParamSpec or None, learnable id) of every parameter blob,
    in the order Net._append_params recorded ``param_owners``."""
    n, owners = 0, 0
    for li, layer in enumerate(net.layers):
        lp = layer.layer_param
        for k in range(len(layer.blobs)):
            owner = net.param_owners[n]
            n += 1
            if owner < 0:
                owner, owners = owners, owners + 1
            yield li, layer, k, (lp.param[k] if k < len(lp.param) else None), owner


def _groups(lp):
    return lp.convolution_param.group if lp.HasField("convolution_param") else 1


def _local_type(spec, where):
    values = list(spec.regularization_type)
    if len(values) > 1:
        raise SolverError("%s: regularization_type is given %d times (one of L1, L2)"
                          % (where, len(values)))
    if values and values[0] not in ("", "L1", "L2"):
        raise SolverError("%s: unknown regularization_type '%s' (L1 or L2)" % (where, values[0]))
    return values[0] if values else None


def net_rules(net):
    """One :class:`ParamRule` per learnable param of ``net``, and whether any SSL field is set."""
    rules = [ParamRule() for _ in net.learnable_params]
    active = False
    for li, layer, k, spec, pid in _param_entries(net):
        lp = layer.layer_param
        rule = rules[pid]
        if k == 0 and lp.connectivity_mode != _CONNECTED:
            active = True
        where = "layer '%s' param %d" % (lp.name, k)
        if net.param_layer_indices[pid] == (li, k):      # the owner's layer (net.cpp param_groups_)
            rule.groups = _groups(lp)
        if spec is None:
            continue
        if len(spec.block_group_lasso):
            active = True
            if rule.blocks:
                raise SolverError("%s: duplicate block_group_lasso among shared params ('%s')"
                                  % (where, spec.name))
            rule.blocks = [(b.ydimen, b.xdimen, b.block_decay_mult) for b in spec.block_group_lasso]
        given = [("regularization_type", _local_type(spec, where)),
                 ("breadth", spec.breadth_decay_mult if spec.HasField("breadth_decay_mult") else None),
                 ("kernel_shape", spec.kernel_shape_decay_mult
                  if spec.HasField("kernel_shape_decay_mult") else None)]
        for name, value in given:
            if value is None:
                continue
            active = True
            if name in rule.has and getattr(rule, name) != value:
                raise SolverError("%s: shared param '%s' has mismatched %s (%s vs %s)"
                                  % (where, spec.name, _FIELD[name], value, getattr(rule, name)))
            rule.has.add(name)
            setattr(rule, name, value)
    return rules, active


_FIELD = {"regularization_type": "regularization_type", "breadth": "breadth_decay_mult",
          "kernel_shape": "kernel_shape_decay_mult"}


class Sparsity(object):
    """The SSL part of a solver's update: built once per solver; ``None`` when nothing is set."""

    def __init__(self, solver, rules):
        self.solver, self.rules = solver, rules
        self.total = 0.0

    @classmethod
    def for_solver(cls, solver):
        rules, active = net_rules(solver.net)
        p = solver.param
        if not (active or p.breadth_decay or p.kernel_shape_decay or p.block_group_decay):
            return None
        for pid, (blob, rule) in enumerate(zip(solver.net.learnable_params, rules)):
            name = solver.net.param_display_names[pid]
            if rule.kernel_shape and blob.shape and blob.shape[0] % rule.groups:
                raise SolverError("param %s: %d rows do not split into %d groups for group lasso"
                                  % (name, blob.shape[0], rule.groups))
            rows = blob.shape[0] if blob.shape else 1
            cols = blob.count // rows if rows else 0
            for ydimen, xdimen, mult in rule.blocks:
                if mult and p.block_group_decay and (
                        not ydimen or not xdimen or rows % ydimen or cols % xdimen):
                    raise SolverError("param %s: a %dx%d matrix does not split into blocks of "
                                      "ydimen %d x xdimen %d (block_group_lasso)"
                                      % (name, rows, cols, ydimen, xdimen))
        return cls(solver, rules)

    def regularize(self, pid):
        """L1/L2 with the param's own type, then group lasso; adds the terms to ``self.total``."""
        solver = self.solver
        p = solver.net.learnable_params[pid]
        dt = p.dtype.type
        rule = self.rules[pid]
        rtype = rule.regularization_type or solver.param.regularization_type
        local_decay = dt(solver.param.weight_decay) * dt(solver.net.params_weight_decay[pid])
        term = 0.0
        w = p.data
        if local_decay:
            if rtype == "L2":
                p.diff[...] += local_decay * w
                term = float(local_decay) / 2.0 * float(np.dot(w.ravel(), w.ravel()))
            else:
                p.diff[...] += local_decay * np.sign(w)
                term = float(local_decay) * float(np.abs(w).sum())
        lk = dt(solver.param.kernel_shape_decay) * dt(rule.kernel_shape)
        lb = dt(solver.param.breadth_decay) * dt(rule.breadth)
        if (lk or lb) and w.ndim:
            mat = w.reshape(w.shape[0], -1)
            diff = p.diff.reshape(mat.shape)
            if lk:
                norms = kernel_shape_norms(mat, rule.groups)
                term += float(lk) * float(norms[::max(1, mat.shape[0] // rule.groups)].sum())
                diff += lk * divide_checkzero(mat, norms)
            if lb:
                norms = breadth_norms(mat)
                term += float(lb) * float(norms[:, 0].sum())
                diff += lb * divide_checkzero(mat, norms)
        for ydimen, xdimen, mult in rule.blocks if w.ndim else ():
            lq = dt(mult) * dt(solver.param.block_group_decay)
            if lq:
                mat = w.reshape(w.shape[0], -1)
                norms = block_norms(mat, ydimen, xdimen)
                term += float(lq) * float(norms.sum()) / (xdimen * ydimen)
                p.diff.reshape(mat.shape)[...] += lq * divide_checkzero(mat, norms)
        self.total += term

    def after_update(self):
        """The fork's Net::Update tail: values under the threshold become 0; the display line."""
        solver = self.solver
        for p in solver.net.learnable_params:
            zerout(p.data)
        p = solver.param
        if p.display and solver.iter % p.display == 0:
            info("solver.cpp:260", "    Total regularization terms: %s loss+regular. : %s"
                 % (fmt(self.total), fmt(self.total + solver.smoothed_loss)))
        self.total = 0.0


def breadth_norms(mat):
    """Each row's L2 norm, repeated along the row (the fork's row_group_lasso_kernel)."""
    sq = np.square(mat, dtype=mat.dtype).sum(axis=1, keepdims=True)
    return np.broadcast_to(np.sqrt(sq), mat.shape)


def kernel_shape_norms(mat, groups):
    """Each column's L2 norm within each group of rows, repeated down the column
    (the fork's col_group_lasso_kernel on each filter group)."""
    rows = mat.shape[0] // groups
    sq = np.square(mat, dtype=mat.dtype).reshape(groups, rows, -1).sum(axis=1, keepdims=True)
    return np.broadcast_to(np.sqrt(sq), (groups, rows, mat.shape[1])).reshape(mat.shape)


def block_norms(mat, ydimen, xdimen):
    """Each ydimen x xdimen block's L2 norm, repeated over the block (caffe_cpu_block_group_lasso)."""
    r, c = mat.shape
    blocks = mat.reshape(r // ydimen, ydimen, c // xdimen, xdimen)
    sq = np.square(blocks, dtype=mat.dtype).sum(axis=(1, 3), keepdims=True)
    return np.broadcast_to(np.sqrt(sq), blocks.shape).reshape(mat.shape)


def divide_checkzero(a, b):
    """a / b, 0 where b is 0 (the fork's caffe_gpu_div_checkzero)."""
    out = np.zeros_like(a)
    np.divide(a, b, out=out, where=b != 0)
    return out


def zerout(data, threshold=ZEROUT_THRESHOLD):
    """Values strictly between -threshold and threshold become 0 (blob.cpp Zerout)."""
    t = data.dtype.type(threshold)
    data[(data < t) & (data > -t)] = 0


def connectivity_mask(data, mode, groups=1):
    """The fork's Blob::Disconnect on weights ``data`` (already through :func:`zerout`)."""
    if mode == _ELTWISE:
        t = data.dtype.type(ZEROUT_THRESHOLD)
        return ((data >= t) | (data <= -t)).astype(data.dtype)
    mat = data.reshape(groups, data.shape[0] // groups, -1) != 0
    rows = mat.any(axis=2, keepdims=True)
    cols = mat.any(axis=1, keepdims=True)
    return (rows & cols).astype(data.dtype).reshape(data.shape)


def disconnect(net, li):
    """After trained weights were copied into layer ``li``: its connectivity_mode's zerout and
    mask (``net.connectivity[learnable id]``, read by ``Net.update``)."""
    from ..layers.conv_base import _ConvolutionBase
    from ..layers.inner_product import InnerProductLayer
    layer = net.layers[li]
    lp = layer.layer_param
    mode = lp.connectivity_mode
    if mode == _CONNECTED or not layer.blobs or \
            not isinstance(layer, (_ConvolutionBase, InnerProductLayer)):
        return
    groups_from_conv = isinstance(layer, _ConvolutionBase)
    groups = _groups(lp) if groups_from_conv else 1
    blob = layer.blobs[0]
    if mode == _GRPWISE and blob.shape[0] % groups:
        raise NetError("layer '%s': %d filters do not split into %d groups for "
                          "connectivity_mode DISCONNECTED_GRPWISE" % (lp.name, blob.shape[0], groups))
    pid = next(pid for i, _, k, _, pid in _param_entries(net) if i == li and k == 0)
    zerout(blob.data)
    where = "base_conv_layer.cpp:177" if groups_from_conv else "inner_product_layer.cpp:17"
    info(where, "%s of %s are frozen" % (
        "all zero weights" if mode == _ELTWISE else "weights lying in all-zero groups", lp.name))
    if not hasattr(net, "connectivity"):
        net.connectivity = {}
    net.connectivity[pid] = connectivity_mask(blob.data, mode, groups)
