"""Combining and reducing layers: Eltwise, Reduction, ArgMax."""
import numpy as np

from ..errors import ShapeError
from ..math import cpu
from ..proto import caffe_pb2
from .base import Layer, register_layer

_ELT = caffe_pb2.EltwiseParameter
_RED = caffe_pb2.ReductionParameter


def select(cond, a, b=None):
    """``np.where(cond, a, b)`` for float arrays of one shape and dtype (``b`` None: +0), the
    same bits, without branches: each element's bits are picked with an all-ones / all-zeros
    mask made from ``cond``. numpy's ``where`` branches per element, about 4 ns an element on a
    mask of mixed values (Eltwise MAX's), against about 1 for these whole-array passes."""
    if a.dtype.kind != "f" or (b is not None and (b.dtype != a.dtype or b.shape != a.shape)):
        return np.where(cond, a, a.dtype.type(0) if b is None else b)
    u = np.dtype("u%d" % a.dtype.itemsize)
    m = np.negative(cond.astype(u))             # all ones where cond, else zeros
    if b is None:
        return (a.view(u) & m).view(a.dtype)
    bits = b.view(u)
    return (bits ^ ((a.view(u) ^ bits) & m)).view(a.dtype)


@register_layer("Eltwise")
class EltwiseLayer(Layer):
    """Element-wise combination of k bottoms of the same shape (BVLC needs k >= 2; one bottom is
    accepted, as in lmb-freiburg/flownet2, whose files scale an image with a 1-bottom SUM).

    PROD: y = prod_i x_i;  dL/dx_i = dL/dy * prod_{j != i} x_j  (stable_prod_grad true), or
          dL/dy * y / x_i (stable_prod_grad false).
    SUM:  y = sum_i c_i x_i (coeff c_i, default 1);  dL/dx_i = c_i dL/dy.
    MAX:  y = max_i x_i;  dL/dx_i = dL/dy where x_i was the arg max. Ties as in Caffe: between
          x_0 and x_1 the later wins, after that the earlier one stays.

    prototxt: ``eltwise_param { operation: SUM coeff: ... stable_prod_grad: true }`` with coeff
    given 0 times or once per bottom (not with PROD). Top: the bottoms' shape.
    """
    min_bottom_blobs = 1
    exact_num_top_blobs = 1
    fused_relu = None     # SUM only: a ReLU's negative slope fused in by caffepy.infer.plan

    def layer_setup(self, bottom, top):
        p = self.layer_param.eltwise_param
        self.op = p.operation
        if len(p.coeff) not in (0, len(bottom)):
            raise self.error("takes one coeff per bottom (%d bottoms, %d coeff)"
                             % (len(bottom), len(p.coeff)))
        if self.op == _ELT.PROD and len(p.coeff):
            raise self.error("coeff is only allowed for operation SUM")
        if type(self) is EltwiseLayer and self.op not in (_ELT.PROD, _ELT.SUM, _ELT.MAX):
            self._refuse_op()       # a fork's operation: its shape, not its values, in summary
        self.coeffs = list(p.coeff) if len(p.coeff) else [1.0] * len(bottom)
        self.stable_prod_grad = p.stable_prod_grad

    def _refuse_op(self, always=False):
        from ..proto.harvest_policy import is_structure_only
        if always or not is_structure_only():
            raise self.error("operation %s is not computed by caffepy's Eltwise"
                             % _ELT.EltwiseOp.Name(self.op))

    def reshape(self, bottom, top):
        for i, b in enumerate(bottom[1:], 1):
            if b.shape != bottom[0].shape:
                raise self.shape_mismatch("bottom[%d] has shape %s; bottom[0] has %s (must be "
                                          "equal)" % (i, b.shape, bottom[0].shape), i, 0, bottom)
        if top[0] is not bottom[0]:
            top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        xs = [b.data for b in bottom]
        if self.op == _ELT.PROD:
            y = xs[0] * xs[1]
            for x in xs[2:]:
                y *= x
        elif self.op == _ELT.SUM:
            if not any(top[0] is b for b in bottom[1:]):     # sum straight into the top
                y, rest = top[0].data, list(zip(self.coeffs[1:], xs[1:]))
                if self.coeffs[0] != 1:
                    np.multiply(xs[0], self.coeffs[0], out=y)
                elif rest and rest[0][0] == 1:      # x0 + x1 in one pass (ResNet's shortcuts)
                    cpu.add_into(xs[0], rest.pop(0)[1], y)
                elif top[0] is not bottom[0]:
                    cpu.copy_into(xs[0], y)
                for c, x in rest:
                    if c == 1:
                        cpu.add_into(y, x, y)
                    else:
                        y += c * x
                cpu.relu_inplace(y, self.fused_relu)
                return
            y = self.coeffs[0] * xs[0]
            for c, x in zip(self.coeffs[1:], xs[1:]):
                y += c * x
            cpu.relu_inplace(y, self.fused_relu)
        elif self.op == _ELT.MAX:
            # Caffe's: a > b ? a (mask 0) : b (mask 1), then each later bottom where it is above
            first = xs[0] > xs[1]
            self.mask = (~first).astype(np.int32)
            y = select(first, xs[0], xs[1])
            for i, x in enumerate(xs[2:], 2):
                better = x > y
                self.mask += (i - self.mask) * better
                y = select(better, x, y)
        else:
            self._refuse_op(always=True)
        top[0].data[...] = y

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff
        for i, (b, down) in enumerate(zip(bottom, propagate_down)):
            if not down:
                continue
            if self.op == _ELT.PROD:
                if self.stable_prod_grad:
                    others = [o.data for j, o in enumerate(bottom) if j != i]
                    g = others[0].copy()
                    for o in others[1:]:
                        g *= o
                else:
                    g = top[0].data / b.data
                b.diff[...] = dy * g
            elif self.op == _ELT.SUM:
                if self.coeffs[i] != 1:
                    np.multiply(dy, self.coeffs[i], out=b.diff)
                elif b.diff is not dy:
                    cpu.copy_into(dy, b.diff)
            else:                    # Caffe's: gradient = 0, += dy where this bottom won
                t = dy.dtype.type
                b.diff[...] = select(self.mask == i, t(0) + dy)


@register_layer("Reduction")
class ReductionLayer(Layer):
    """Reduces all axes from ``axis`` on, one value per leading index, scaled by ``coeff``.

    SUM: c * sum x;  ASUM: c * sum |x|;  SUMSQ: c * sum x^2;  MEAN: c * sum x / n  (n = reduced
    count). dL/dx = dL/dy * c * (1, sign(x), 2x, 1/n) broadcast over the reduced axes.
    prototxt: ``reduction_param { operation: SUM axis: 0 coeff: 1 }``.
    Bottom: any shape; top: bottom.shape[:axis] (a scalar for axis 0).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.reduction_param
        self.op, self.coeff = p.operation, p.coeff
        if self.op not in (_RED.SUM, _RED.ASUM, _RED.SUMSQ, _RED.MEAN):
            raise self.error("unknown reduction operation %d" % self.op)

    def reshape(self, bottom, top):
        n = bottom[0].num_axes
        axis = self.layer_param.reduction_param.axis
        if not -n <= axis < max(n, 1):
            raise self.error("axis %d out of range for a %d-axis bottom" % (axis, n), ShapeError)
        self.axis = axis + n if axis < 0 else axis
        self.outer = bottom[0].count_range(0, self.axis)
        self.dim = bottom[0].count_range(self.axis)
        top[0].reshape(bottom[0].shape[:self.axis])

    def _coeff(self, t):
        """Caffe's coeff_ in the blob's type ``t``: coeff, divided by the reduced count for MEAN
        (one float division)."""
        c = t(self.coeff)
        return c / t(self.dim) if self.op == _RED.MEAN and self.dim else c

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(self.outer, self.dim)
        if self.op == _RED.ASUM:
            x = np.abs(x)
        elif self.op == _RED.SUMSQ:
            x = x * x
        y = x.sum(axis=1)
        c = self._coeff(x.dtype.type)
        if c != 1:                                   # Caffe's caffe_scal when coeff_ != 1
            y = y * c
        top[0].data[...] = y.reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        """Caffe's order: bottom_coeff = dy * coeff_ (the blob's type); SUM / MEAN set it, ASUM
        sign(x) * it (sign 0 at 0), SUMSQ (2 bottom_coeff) * x."""
        if not propagate_down[0]:
            return
        x = bottom[0].data.reshape(self.outer, self.dim)
        t = x.dtype.type
        bc = top[0].diff.reshape(self.outer, 1).astype(x.dtype) * self._coeff(t)
        if self.op in (_RED.SUM, _RED.MEAN):
            g = np.broadcast_to(bc, x.shape)
        elif self.op == _RED.ASUM:
            g = cpu.caffe_sign(x) * bc
        else:
            g = (t(2) * bc) * x
        bottom[0].diff[...] = g.reshape(bottom[0].shape)


@register_layer("ArgMax")
class ArgMaxLayer(Layer):
    """Indices (and optionally values) of the top_k largest entries; no backward.

    Without ``axis``: per item n over its flattened count(1) values; top (N, 1, top_k) holds the
    indices, or (N, 2, top_k) with ``out_max_val`` (indices, then values). With ``axis``: along that
    axis, top shape = bottom shape with shape[axis] = top_k, holding indices, or the values when
    out_max_val. Order: larger value first; equal values: larger index first (Caffe's sort).
    prototxt: ``argmax_param { out_max_val: false top_k: 1 axis: <unset> }``.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.argmax_param
        self.top_k, self.out_max_val = p.top_k, p.out_max_val
        self.has_axis = p.HasField("axis")
        if self.top_k < 1:
            raise self.error("top_k must be >= 1, got %d" % self.top_k)

    def reshape(self, bottom, top):
        b = bottom[0]
        if self.has_axis:
            axis = self.layer_param.argmax_param.axis
            if not -b.num_axes <= axis < b.num_axes:
                raise self.error("axis %d out of range for bottom shape %s" % (axis, b.shape),
                                 ShapeError)
            self.axis = axis + b.num_axes if axis < 0 else axis
            dim = b.shape[self.axis]
            shape = list(b.shape)
            shape[self.axis] = self.top_k
        else:
            dim = b.count_range(1)
            shape = [1] * max(3, b.num_axes)
            shape[0], shape[2] = b.shape[0], self.top_k
            if self.out_max_val:
                shape[1] = 2
        if self.top_k > dim:
            raise self.error("top_k %d exceeds the %d values to search" % (self.top_k, dim),
                             ShapeError)
        top[0].reshape(shape)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        if self.has_axis:
            x = np.moveaxis(x, self.axis, -1)
        else:
            x = x.reshape(x.shape[0], -1)
        dim = x.shape[-1]
        # reversed + stable descending sort = larger index first among equal values
        order = np.argsort(-x[..., ::-1], axis=-1, kind="stable")[..., :self.top_k]
        idx = dim - 1 - order
        vals = np.take_along_axis(x, idx, axis=-1)
        if self.has_axis:
            out = vals if self.out_max_val else idx
            top[0].data[...] = np.moveaxis(out, -1, self.axis)
        else:
            out = np.stack([idx, vals], axis=1) if self.out_max_val else idx[:, None, :]
            top[0].data[...] = out.reshape(top[0].shape)
