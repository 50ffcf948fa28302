"""Resampling and channel-rearranging layers from the forks: Interp (PSPNet / DeepLab) and
BilinearInterpolation (ctensmeyer/caffe: the same resize to a second bottom's size), Upsample
(YOLO forks: nearest neighbour), ShuffleChannel (ShuffleNet), Axpy (SENet forks), Reorg (YOLOv2),
Tiling (VPGNet: channel groups laid out as t x t cells).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


def _interp_matrix(n_out, n_in, dtype):
    """Rows: the align-corners bilinear weights of each output position over the n_in inputs."""
    A = np.zeros((n_out, n_in), dtype=np.float64)
    r = (n_in - 1) / float(n_out - 1) if n_out > 1 else 0.0
    src = r * np.arange(n_out)
    lo = np.minimum(src.astype(np.int64), n_in - 1)
    hi = np.where(lo < n_in - 1, lo + 1, lo)
    lam = src - lo
    np.add.at(A, (np.arange(n_out), lo), 1 - lam)
    np.add.at(A, (np.arange(n_out), hi), lam)
    return A.astype(dtype)


@register_layer("Interp")
class InterpLayer(Layer):
    """Bilinear resize with aligned corners (PSPNet's / DeepLab's Interp).

    The input is first cropped by ``-pad_beg`` / ``-pad_end`` pixels (pads must be <= 0), giving
    Hi x Wi; then output position y samples input ``y (Hi - 1) / (Ho - 1)`` (same for x).
    Output size (first match): only shrink_factor s: ``(Hi - 1) / s + 1``; only zoom_factor z:
    ``Hi + (Hi - 1)(z - 1)``; height and width: as given; both s and z: shrink then zoom;
    ``use_blob_size`` or a second bottom: bottom[1]'s H x W.

    prototxt: ``interp_param { height: 0, width: 0, zoom_factor: 1, shrink_factor: 1,
    pad_beg: 0, pad_end: 0, use_blob_size: false }``. Bottoms: x (N x C x H x W)
    [, reference blob]. Top: N x C x Ho x Wo.
    """
    min_bottom_blobs = 1
    max_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.interp_param
        self.pad_beg, self.pad_end = int(p.pad_beg), int(p.pad_end)
        if self.pad_beg > 0 or self.pad_end > 0:
            raise self.error("interp_param pad_beg / pad_end must be <= 0 (cropping only)")

    def _out_size(self, bottom, hi, wi):
        p = self.layer_param.interp_param
        has = p.HasField
        if has("shrink_factor") and not has("zoom_factor"):
            s = p.shrink_factor
            if s < 1:
                raise self.error("shrink_factor must be >= 1, got %d" % s)
            return (hi - 1) // s + 1, (wi - 1) // s + 1
        if has("zoom_factor") and not has("shrink_factor"):
            z = p.zoom_factor
            if z < 1:
                raise self.error("zoom_factor must be >= 1, got %d" % z)
            return hi + (hi - 1) * (z - 1), wi + (wi - 1) * (z - 1)
        if has("height") and has("width"):
            return p.height, p.width
        if has("shrink_factor") and has("zoom_factor"):
            s, z = p.shrink_factor, p.zoom_factor
            ho, wo = (hi - 1) // s + 1, (wi - 1) // s + 1
            return ho + (ho - 1) * (z - 1), wo + (wo - 1) * (z - 1)
        if p.use_blob_size or len(bottom) == 2:
            if len(bottom) != 2:
                raise self.error("use_blob_size needs a second bottom")
            return bottom[1].shape[2], bottom[1].shape[3]
        raise self.error("interp_param needs shrink_factor, zoom_factor, height and width, or "
                         "use_blob_size with a second bottom")

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            e = self.error("bottom[0] must be N x C x H x W, got %s" % (bottom[0].shape,),
                           ShapeError)
            e.axes_needed, e.needs_map = 4, True        # caffepy.zoo.learn_shapes
            raise e
        N, C, H, W = bottom[0].shape
        self.hi, self.wi = H + self.pad_beg + self.pad_end, W + self.pad_beg + self.pad_end
        ho, wo = self._out_size(bottom, self.hi, self.wi)
        if min(self.hi, self.wi, ho, wo) <= 0:
            raise self.error("sizes must be positive (input after crop %dx%d, output %dx%d)"
                             % (self.hi, self.wi, ho, wo))
        self.Ah = _interp_matrix(ho, self.hi, self.dtype)
        self.Aw = _interp_matrix(wo, self.wi, self.dtype)
        top[0].reshape(N, C, ho, wo)

    def _crop(self, a):
        b = -self.pad_beg
        return a[:, :, b:b + self.hi, b:b + self.wi]

    def forward_cpu(self, bottom, top):
        x = self._crop(bottom[0].data)
        top[0].data[...] = np.matmul(np.matmul(self.Ah, x), self.Aw.T)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        bottom[0].diff[...] = 0
        self._crop(bottom[0].diff)[...] = np.matmul(np.matmul(self.Ah.T, top[0].diff), self.Aw)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("BilinearInterpolation")
class BilinearInterpolationLayer(InterpLayer):
    """Bilinear resize of bottom 0 to bottom 1's H x W with aligned corners, as Interp's: output
    row y samples input row y (Hi - 1) / (Ho - 1) between its two neighbours (same for columns);
    dL/dx spreads dL/dy back with the same weights (ctensmeyer/caffe's bilinear_layer.cpp / .cu,
    used by ctensmeyer/binarization_2017; where an output size is 1 the fork divides by zero,
    here row / column 0 is taken). No parameters. Bottoms: x (N x C x H x W), a blob whose axes
    2 and 3 give the size (no gradient). Top: N x C x Ho x Wo.
    """
    type = "BilinearInterpolation"
    min_bottom_blobs = max_bottom_blobs = None
    exact_num_bottom_blobs = 2

    def layer_setup(self, bottom, top):
        self.pad_beg = self.pad_end = 0

    def _out_size(self, bottom, hi, wi):
        if bottom[1].num_axes < 4:
            raise self.error("bottom[1] gives the output size on axes 2 and 3; its shape is %s"
                             % (bottom[1].shape,), ShapeError)
        return bottom[1].shape[2], bottom[1].shape[3]


@register_layer("Upsample")
class UpsampleLayer(Layer):
    """Nearest-neighbour upsampling by an integer factor (YOLOv3 forks).

        y[n, c, h, w] = x[n, c, h // scale, w // scale];  dx = sum of dy over each block

    prototxt: ``upsample_param { scale: 1 }``. Bottom: N x C x H x W.
    Top: N x C x (H scale) x (W scale).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.s = int(self.layer_param.upsample_param.scale)
        if self.s < 1:
            raise self.error("upsample_param.scale must be >= 1, got %d" % self.s)

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be N x C x H x W, got %s" % (bottom[0].shape,))
        N, C, H, W = bottom[0].shape
        top[0].reshape(N, C, H * self.s, W * self.s)

    def forward_cpu(self, bottom, top):
        s = self.s
        x = bottom[0].data
        top[0].data.reshape(x.shape[0], x.shape[1], x.shape[2], s, x.shape[3], s)[...] = \
            x[:, :, :, None, :, None]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            N, C, H, W = bottom[0].shape
            bottom[0].diff[...] = top[0].diff.reshape(N, C, H, self.s, W, self.s).sum(axis=(3, 5))


@register_layer("ShuffleChannel")
class ShuffleChannelLayer(Layer):
    """Channel shuffle (ShuffleNet): view C as (group, C / group), transpose, flatten.

        y[:, j * group + i] = x[:, i * (C / group) + j]

    prototxt: ``shuffle_channel_param { group: 1 }``. Bottom / top: N x C x ... (C divisible by
    group).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.g = int(self.layer_param.shuffle_channel_param.group)

    def reshape(self, bottom, top):
        C = bottom[0].shape[1]
        if self.g < 1 or C % self.g:
            raise self.error("channels (%d) must be divisible by group (%d)" % (C, self.g))
        top[0].reshape(bottom[0].shape)

    @staticmethod
    def _shuffle(a, g):
        N, C = a.shape[:2]
        return a.reshape(N, g, C // g, -1).transpose(0, 2, 1, 3).reshape(a.shape)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = self._shuffle(bottom[0].data, self.g)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            C = bottom[0].shape[1]
            bottom[0].diff[...] = self._shuffle(top[0].diff, C // self.g)


@register_layer("Axpy")
class AxpyLayer(Layer):
    """y = a * x + b with a per-channel scale (SENet forks).

    No prototxt fields. Bottoms: a (N x C [x 1 x 1]), x (N x C x H x W), b (like x).
    Top: like x. da = sum_hw(dy * x), dx = a dy, db = dy.
    """
    exact_num_bottom_blobs = 3
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        a, x, b = bottom
        self.check_shape("bottom[2]", x.shape, b.shape)
        if a.shape[:2] != x.shape[:2] or a.count != x.shape[0] * x.shape[1]:
            raise self.error("bottom[0] (a) must be N x C x 1 x 1 for x of shape %s, got %s"
                             % (x.shape, a.shape))
        top[0].reshape(x.shape)

    def _a(self, bottom):
        x = bottom[1]
        return bottom[0].data.reshape(x.shape[:2] + (1,) * (x.num_axes - 2))

    def forward_cpu(self, bottom, top):
        top[0].data[...] = self._a(bottom) * bottom[1].data + bottom[2].data

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff
        if propagate_down[0]:
            axes = tuple(range(2, dy.ndim))
            bottom[0].diff[...] = (dy * bottom[1].data).sum(axis=axes).reshape(bottom[0].shape)
        if propagate_down[1]:
            bottom[1].diff[...] = self._a(bottom) * dy
        if propagate_down[2]:
            bottom[2].diff[...] = dy


@register_layer("Reorg")
class ReorgLayer(Layer):
    """Space-to-depth as darknet's reorg (YOLOv2 passthrough), a fixed permutation.

    With stride s, input N x C x H x W and K = C / s^2 (reverse: false), the top
    (N x C s^2 x H/s x W/s) read in memory order as N x C x H x W holds
        top[n, (dy s + dx) K + k, h, w] = x read as N x K x Hs x Ws at [n, k, h s + dy, w s + dx]
    reverse: true applies the inverse permutation (top N x C/s^2 x H s x W s).
    When C is not a multiple of s^2 (reverse: false; darknet's permutation is undefined there),
    it is the YOLOv5 ports' Focus (Wulingtian/yolov5_caffe's reorg_kernel, its GPU code; its CPU
    code divides by C / s^2 = 0): channel-major space-to-depth,
        top[n, (c s + dy) s + dx, h, w] = x[n, c, h s + dy, w s + dx].

    prototxt: ``reorg_param { stride (required), reverse: false }``. Bottom: N x C x H x W.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.reorg_param
        if not p.HasField("stride") or p.stride < 1:
            raise self.error("reorg_param.stride is required and must be >= 1")
        self.s, self.reverse = int(p.stride), bool(p.reverse)
        if top[0] is bottom[0]:
            raise self.error("does not allow in-place computation")

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be N x C x H x W, got %s" % (bottom[0].shape,))
        N, C, H, W = bottom[0].shape
        s = self.s
        self.focus = not self.reverse and C % (s * s) != 0
        if (C % (s * s) and self.reverse) or (not self.reverse and (H % s or W % s)):
            raise self.error("shape %s is not divisible by stride %d" % (bottom[0].shape, s),
                             ShapeError)
        if self.reverse:
            top[0].reshape(N, C // (s * s), H * s, W * s)
        else:
            top[0].reshape(N, C * s * s, H // s, W // s)

    def _gather(self, a, shape):
        """The reverse=false permutation of ``a`` (memory layout N x C x H x W given by shape)."""
        N, C, H, W = shape
        s = self.s
        return a.reshape(N, C // (s * s), H, s, W, s).transpose(0, 3, 5, 1, 2, 4)

    def _scatter(self, a, shape):
        N, C, H, W = shape
        s = self.s
        return a.reshape(N, s, s, C // (s * s), H, W).transpose(0, 3, 4, 1, 5, 2)

    def forward_cpu(self, bottom, top):
        shape = bottom[0].shape
        if self.focus:
            N, C, H, W = shape
            s = self.s
            top[0].data[...] = bottom[0].data.reshape(N, C, H // s, s, W // s, s).transpose(
                0, 1, 3, 5, 2, 4).reshape(top[0].shape)
            return
        f = self._scatter if self.reverse else self._gather
        top[0].data[...] = f(bottom[0].data, shape).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            shape = bottom[0].shape
            if self.focus:
                N, C, H, W = shape
                s = self.s
                bottom[0].diff[...] = top[0].diff.reshape(N, C, s, s, H // s, W // s).transpose(
                    0, 1, 4, 2, 5, 3).reshape(shape)
                return
            f = self._gather if self.reverse else self._scatter
            bottom[0].diff[...] = f(top[0].diff, shape).reshape(shape)


@register_layer("Tiling")
class TilingLayer(Layer):
    """VPGNet's Tiling (SeokjuLee/VPGNet): each group of t * t channels becomes one channel t times
    taller and wider, the group's channel ty * t + tx filling offset (ty, tx) of every t x t cell.

        y[n, c, h * t + ty, w * t + tx] = x[n, c * t * t + ty * t + tx, h, w]

    Backward scatters the gradient back (a permutation). prototxt: ``tiling_param { tile_dim: t }``
    (t > 0). Bottom: N x C x H x W with C a multiple of t * t; top: N x C / t^2 x H t x W t.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.t = int(self.layer_param.tiling_param.tile_dim)
        if self.t <= 0:
            raise self.error("tiling_param.tile_dim must be specified and positive, got %d" % self.t)

    def reshape(self, bottom, top):
        if bottom[0].data.ndim != 4:
            raise self.error("bottom must be N x C x H x W, got shape %s"
                             % (tuple(bottom[0].shape),), ShapeError)
        N, C, H, W = bottom[0].shape
        t = self.t
        if C % (t * t):
            raise self.error("the number of input channels (%d) must be a multiple of tile_dim^2 "
                             "(%d)" % (C, t * t), ShapeError)
        top[0].reshape(N, C // (t * t), H * t, W * t)

    def forward_cpu(self, bottom, top):
        N, C, H, W = bottom[0].shape
        t = self.t
        x = bottom[0].data.reshape(N, C // (t * t), t, t, H, W)
        top[0].data[...] = x.transpose(0, 1, 4, 2, 5, 3).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            N, C, H, W = bottom[0].shape
            t = self.t
            dy = top[0].diff.reshape(N, C // (t * t), H, t, W, t)
            bottom[0].diff[...] = dy.transpose(0, 1, 3, 5, 2, 4).reshape(bottom[0].shape)
