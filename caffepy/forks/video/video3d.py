"""Video layers of facebook/C3D: Convolution3D, Pooling3D, Deconvolution3D and the voxel-wise
softmax (loss) over N x C x L x H x W blobs.

C3D v1.1 files use ``convolution3d_param`` / ``pooling3d_param``; C3D v1.0 files are V1 files
(``layers { type: CONVOLUTION3D ... }``) whose 3-D fields sit in ``convolution_param`` /
``pooling_param`` (``kernel_depth``, ``temporal_stride``, ``temporal_pad``): both are read here.
TSN's BN-Inception nets need no layer of their own (their ``BN`` is PSPNet's, in
``normalization.py``); the VideoData readers are in ``data.py``.
"""
import numpy as np

from ... import fillers
from ...errors import ShapeError
from ...math import cpu as cm
from ...math.sizes import pooled_size
from ...layers.base import Layer, LossLayer, register_layer


def _first(v, default):
    """A scalar field, or the first entry of BVLC's repeated one (``default`` when empty)."""
    if hasattr(v, "__len__"):
        return v[0] if len(v) else default
    return v


def _param(lp, new, old):
    return getattr(lp, new) if lp.HasField(new) or not lp.HasField(old) else getattr(lp, old)


def _c3d_setup(layer, bottom, transposed):
    """Convolution3D's and Deconvolution3D's layer_setup: kernel, pad and stride (depth first)
    and channels on ``layer``, the weight (O, C, kd, k, k), or (C, O, kd, k, k) when
    ``transposed``, and the bias (1, 1, 1, 1, O) filled when new. Returns the param."""
    p = _param(layer.layer_param, "convolution3d_param", "convolution_param")
    ks, pad, stride = _first(p.kernel_size, 0), _first(p.pad, 0), _first(p.stride, 1)
    if not p.num_output or not ks or not p.kernel_depth:
        raise layer.error("num_output, kernel_size and kernel_depth are required")
    if bottom[0].num_axes != 5:
        raise layer.error("bottom must be N x C x L x H x W, got %s" % (bottom[0].shape,),
                          ShapeError)
    layer.kernel = (int(p.kernel_depth), int(ks), int(ks))
    layer.pad = (int(p.temporal_pad), int(pad), int(pad))
    layer.stride = (int(p.temporal_stride), int(stride), int(stride))
    if min(layer.stride) < 1:
        raise layer.error("strides must be >= 1")
    layer.channels, o = bottom[0].shape[1], int(p.num_output)
    shape = ((layer.channels, o) if transposed else (o, layer.channels)) + layer.kernel
    if not layer.blobs:
        layer.blobs = [layer.new_blob(shape)]
        fillers.fill(layer.blobs[0], p.weight_filler)
        if p.bias_term:
            layer.blobs.append(layer.new_blob((1, 1, 1, 1, o)))
            fillers.fill(layer.blobs[1], p.bias_filler)
    if layer.blobs[0].count != o * layer.channels * int(np.prod(layer.kernel)):
        raise layer.error("weight has shape %s, expected %s" % (layer.blobs[0].shape, shape),
                          ShapeError)
    layer.param_propagate_down = [True] * len(layer.blobs)
    return p


def _c3d_check_bottom(layer, bottom):
    """Convolution3D's and Deconvolution3D's reshape check: N x C x L x H x W, C as set up."""
    if bottom[0].num_axes != 5 or bottom[0].shape[1] != layer.channels:
        raise layer.error("bottom %s does not fit %d channels" % (bottom[0].shape,
                                                                  layer.channels), ShapeError)


@register_layer("Convolution3D")
class Convolution3DLayer(Layer):
    """C3D's 3-D convolution (cross-correlation, as Caffe):

        y[n, o, l, h, w] = b[o] + sum_{c, i, j, k} W[o, c, i, j, k]
                           x_pad[n, c, l ts + i, h s + j, w s + k]
    with x zero-padded by temporal_pad in L and pad in H, W. Output L' = (L + 2 tp - kd) / ts + 1,
    H' = (H + 2 p - k) / s + 1 (floor). ``filter_group`` only splits the GEMM in the fork (every
    group reads all input channels), so it does not change the result.

    prototxt: ``convolution3d_param { num_output bias_term: true pad: 0 kernel_size kernel_depth
    stride: 1 temporal_stride: 1 temporal_pad: 0 filter_group: 1 weight_filler bias_filler }``
    (or the same fields in ``convolution_param``, C3D v1.0). Bottom (N, C, L, H, W); top
    (N, O, L', H', W'). Params: weight (O, C, kd, k, k), bias (1, 1, 1, 1, O).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.p = _c3d_setup(self, bottom, transposed=False)

    def reshape(self, bottom, top):
        _c3d_check_bottom(self, bottom)
        out = cm.conv_out_shape(bottom[0].shape[2:], self.kernel, self.pad, self.stride, (1, 1, 1))
        if min(out) < 1:
            raise self.error("the kernel does not fit the padded input %s" % (bottom[0].shape,),
                             ShapeError)
        self.out = tuple(out)
        top[0].reshape((bottom[0].shape[0], self.blobs[0].shape[0]) + self.out)

    def _w(self):
        return self.blobs[0].data.reshape(self.blobs[0].shape[0], -1)

    def forward_cpu(self, bottom, top):
        self.col = cm.im2col(bottom[0].data, self.kernel, self.pad, self.stride, (1, 1, 1))
        y = np.matmul(self._w(), self.col)
        if len(self.blobs) > 1:
            y += self.blobs[1].data.reshape(-1, 1)
        top[0].data.reshape(y.shape)[...] = y

    def backward_cpu(self, top, propagate_down, bottom):
        n, o = top[0].shape[:2]
        dy = top[0].diff.reshape(n, o, -1)
        if self.param_propagate_down[0]:
            self.blobs[0].diff.reshape(o, -1)[...] += np.einsum("nop,nkp->ok", dy, self.col)
        if len(self.blobs) > 1 and self.param_propagate_down[1]:
            self.blobs[1].diff.reshape(-1)[...] += dy.sum(axis=(0, 2))
        if propagate_down[0]:
            dcol = np.matmul(self._w().T, dy)
            bottom[0].diff[...] = cm.col2im(dcol, bottom[0].shape, self.kernel, self.pad,
                                            self.stride, (1, 1, 1))


@register_layer("Pooling3D")
class Pooling3DLayer(Layer):
    """C3D's 3-D pooling. Output sizes round up: L' = ceil((L - kd) / ts) + 1,
    H' = ceil((H + 2 pad - k) / s) + 1 (same for W); windows are cut at the input's end.
    MAX (pad must be 0): y = max over the window; dx routes dy to the first maximum.
    AVE: window [l ts, l ts + kd) x [h s - pad, h s - pad + k) x ..., the divisor counts the
    window clipped to the padded input (Caffe's rule), the sum runs over the real input only.

    prototxt: ``pooling3d_param { pool: MAX kernel_size kernel_depth stride: 1 temporal_stride: 1
    pad: 0 }`` (or those fields in ``pooling_param``, C3D v1.0). Bottom (N, C, L, H, W);
    top (N, C, L', H', W').
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = _param(self.layer_param, "pooling3d_param", "pooling_param")
        pb = self._caffe_pb2.PoolingParameter
        ks, stride, pad = p.kernel_size, p.stride, p.pad
        if not ks or not p.kernel_depth:
            raise self.error("kernel_size and kernel_depth are required")
        if p.pool not in (pb.MAX, pb.AVE):
            raise self.error("Pooling3D supports MAX and AVE only")
        self.max = p.pool == pb.MAX
        if pad and self.max:
            raise self.error("padding is implemented only for AVE pooling (as C3D)")
        self.kernel = (int(p.kernel_depth), int(ks), int(ks))
        self.stride = (int(p.temporal_stride), int(stride), int(stride))
        self.pad = (0, int(pad), int(pad))
        if min(self.stride) < 1:
            raise self.error("strides must be >= 1")

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 5:
            raise self.error("bottom must be N x C x L x H x W, got %s" % (bottom[0].shape,),
                             ShapeError)
        size = bottom[0].shape[2:]
        # C3D's pooling3d_layer.cpp: ceil, no last-window check (a kernel past the padded input
        # by less than the stride gives one output; its windows are clipped to the input)
        self.out = tuple(pooled_size(n, k, s, p, clip=False)
                         for n, k, s, p in zip(size, self.kernel, self.stride, self.pad))
        if min(self.out) < 1:
            raise self.error("the kernel does not fit the input %s" % (bottom[0].shape,),
                             ShapeError)
        top[0].reshape(tuple(bottom[0].shape[:2]) + self.out)

    def _padded(self, x, value):
        """x padded by ``pad`` in front and enough behind for every full window."""
        after = [(o - 1) * s + k - n - p for o, s, k, n, p in
                 zip(self.out, self.stride, self.kernel, x.shape[2:], self.pad)]
        widths = [(0, 0), (0, 0)] + [(p, max(a, 0)) for p, a in zip(self.pad, after)]
        return np.pad(x, widths, constant_values=value)

    def _windows(self, xp):
        v = np.lib.stride_tricks.sliding_window_view(xp, self.kernel, axis=(2, 3, 4))
        v = v[:, :, ::self.stride[0], ::self.stride[1], ::self.stride[2]]
        return v[:, :, :self.out[0], :self.out[1], :self.out[2]]

    def _divisor(self, size):
        d = np.ones(self.out)
        for axis, (o, s, k, n, p) in enumerate(zip(self.out, self.stride, self.kernel, size,
                                                   self.pad)):
            start = np.arange(o) * s - p
            cnt = np.minimum(start + k, n + p) - start
            shape = [1, 1, 1]
            shape[axis] = o
            d = d * cnt.reshape(shape)
        return d

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        if self.max:
            win = self._windows(self._padded(x, -np.inf))
            flat = win.reshape(win.shape[:5] + (-1,))
            self.arg = flat.argmax(axis=-1)
            top[0].data[...] = np.take_along_axis(flat, self.arg[..., None], -1)[..., 0]
        else:
            win = self._windows(self._padded(x, 0))
            top[0].data[...] = win.sum(axis=(5, 6, 7)) / self._divisor(x.shape[2:])

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        x = bottom[0].data
        gp = np.zeros(self._padded(x, 0).shape, dtype=self.dtype)
        dy = top[0].diff
        kd, kh, kw = self.kernel
        if self.max:
            li, hi, wi = np.unravel_index(self.arg, self.kernel)
        else:
            g = dy / self._divisor(x.shape[2:])
        grid = np.meshgrid(*[np.arange(o) * s for o, s in zip(self.out, self.stride)],
                           indexing="ij")
        N, C = x.shape[:2]
        nn, cc = np.meshgrid(np.arange(N), np.arange(C), indexing="ij")
        nn, cc = nn[:, :, None, None, None], cc[:, :, None, None, None]
        if self.max:
            np.add.at(gp, (nn, cc, grid[0] + li, grid[1] + hi, grid[2] + wi), dy)
        else:
            for i in range(kd):
                for j in range(kh):
                    for k in range(kw):
                        np.add.at(gp, (nn, cc, grid[0] + i, grid[1] + j, grid[2] + k), g)
        L, H, W = x.shape[2:]
        p = self.pad
        bottom[0].diff[...] = gp[:, :, p[0]:p[0] + L, p[1]:p[1] + H, p[2]:p[2] + W]


@register_layer("Deconvolution3D")
class Deconvolution3DLayer(Layer):
    """C3D v1.0's 3-D deconvolution (the transpose of Convolution3D; V1 ``DECONVOLUTION3D``):

        y = col2vol(W^T x) + b,   L' = (L - 1) ts - 2 tp + kd,  H' = (H - 1) s - 2 p + k (same W')
    i.e. each input voxel x[n, c, l, h, w] adds x W[c, o, i, j, k] at output
    (l ts - tp + i, h s - p + j, w s - p + k) (cropped to the output). Backward: dx = W vol2col(dy),
    dW = x vol2col(dy)^T, db = sum dy.

    prototxt: ``convolution_param { num_output bias_term: true pad: 0 kernel_size kernel_depth
    stride: 1 temporal_stride: 1 temporal_pad: 0 weight_filler bias_filler }`` (or
    ``convolution3d_param``). Bottom (N, C, L, H, W); top (N, O, L', H', W').
    Params: weight (C, O, kd, k, k), bias (1, 1, 1, 1, O).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.num_output = int(_c3d_setup(self, bottom, transposed=True).num_output)

    def reshape(self, bottom, top):
        _c3d_check_bottom(self, bottom)
        out = tuple((n - 1) * s - 2 * p + k for n, s, p, k in
                    zip(bottom[0].shape[2:], self.stride, self.pad, self.kernel))
        if min(out) < 1:
            raise self.error("the output of %s would be empty" % (bottom[0].shape,), ShapeError)
        self.out_shape = (bottom[0].shape[0], self.num_output) + out
        top[0].reshape(self.out_shape)

    def _w(self):
        return self.blobs[0].data.reshape(self.channels, -1)

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        x = bottom[0].data.reshape(n, self.channels, -1)
        col = np.matmul(self._w().T, x)
        top[0].data[...] = cm.col2im(col, self.out_shape, self.kernel, self.pad, self.stride,
                                     (1, 1, 1))
        if len(self.blobs) > 1:
            top[0].data[...] += self.blobs[1].data.reshape(1, -1, 1, 1, 1)

    def backward_cpu(self, top, propagate_down, bottom):
        n = bottom[0].shape[0]
        dcol = cm.im2col(top[0].diff, self.kernel, self.pad, self.stride, (1, 1, 1))
        x = bottom[0].data.reshape(n, self.channels, -1)
        if self.param_propagate_down[0]:
            self.blobs[0].diff.reshape(self.channels, -1)[...] += np.einsum("ncp,nkp->ck", x, dcol)
        if len(self.blobs) > 1 and self.param_propagate_down[1]:
            self.blobs[1].diff.reshape(-1)[...] += top[0].diff.sum(axis=(0, 2, 3, 4))
        if propagate_down[0]:
            bottom[0].diff[...] = np.matmul(self._w(), dcol).reshape(bottom[0].shape)


@register_layer("VoxelWiseSoftmax")
class VoxelWiseSoftmaxLayer(Layer):
    """C3D v1.0's VOXEL_SOFTMAX: a softmax over the channels of every voxel.

        y[n, c, l, h, w] = exp(x[n, c, l, h, w]) / sum_k exp(x[n, k, l, h, w])
    Backward: dx = y (dy - sum_k dy_k y_k). Bottom / top (N, C, L, H, W). No fields.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if bottom[0].num_axes < 2:
            raise self.error("bottom must have a channel axis", ShapeError)
        top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        e = np.exp(x - x.max(axis=1, keepdims=True))
        top[0].data[...] = e / e.sum(axis=1, keepdims=True)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            y, dy = top[0].data, top[0].diff
            bottom[0].diff[...] = y * (dy - (dy * y).sum(axis=1, keepdims=True))


@register_layer("VoxelWiseSoftmaxWithLoss")
class VoxelWiseSoftmaxWithLossLayer(LossLayer):
    """C3D v1.0's VOXEL_SOFTMAX_LOSS: the softmax loss of every voxel.

    p = softmax over the channels; with V = N L H W (all voxels),
        L = -sum_{voxels with label < C} log(max(p[label], FLT_MIN)) / V
        dx = (p - onehot(label)) / V   (voxels with label >= C keep p / V, as the fork)
    Bottoms: scores (N, C, L, H, W), labels (N, 1, L, H, W). Top: the loss ().
    """

    def reshape(self, bottom, top):
        x, t = bottom[0].shape, bottom[1].shape
        if len(x) != 5 or len(t) != 5 or t[1] != 1 or x[0] != t[0] or x[2:] != t[2:]:
            raise self.error("scores %s and labels %s must be N x C x L x H x W and N x 1 x L x "
                             "H x W" % (x, t), ShapeError)
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        e = np.exp(x - x.max(axis=1, keepdims=True))
        self.prob = e / e.sum(axis=1, keepdims=True)
        lab = bottom[1].data[:, 0].astype(np.int64)
        C = x.shape[1]
        self.valid = (lab < C) & (lab >= 0)
        self.lab = np.where(self.valid, lab, 0)
        p = np.take_along_axis(self.prob, self.lab[:, None], axis=1)[:, 0]
        tiny = np.finfo(np.float32).tiny
        self.voxels = self.lab.size
        top[0].data[...] = -np.log(np.maximum(p, tiny))[self.valid].sum() / self.voxels

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            g = self.prob.copy()
            np.put_along_axis(g, self.lab[:, None],
                              np.take_along_axis(g, self.lab[:, None], axis=1)
                              - self.valid[:, None], axis=1)
            bottom[0].diff[...] = g * (float(top[0].diff) / self.voxels)
