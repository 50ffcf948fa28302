"""Optical-flow layers of lmb-freiburg/flownet2 (FlowNet 2.0, FlowNetC / FlowNetS): Correlation,
ChannelNorm, FlowWarp, Resample and Downsample (L1Loss: loss.py). The fork has CUDA kernels only for most
of them; the math here follows those kernels.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


@register_layer("Correlation")
class CorrelationLayer(Layer):
    """FlowNetC's correlation of two feature maps (multiplicative).

    Both bottoms are zero-padded by ``pad``; with k = kernel_size, d = max_displacement,
    R = d / stride_2 and G = 2R + 1, top channel t = (p + R) G + (q + R) holds, for displacement
    (dy, dx) = (p stride_2, q stride_2):
        y[n, t, i, j] = sum_{c, a < k, b < k} f1[n, c, y0 + a, x0 + b]
                                              f2[n, c, y0 + dy + a, x0 + dx + b] / (k k C)
    with y0 = i stride_1 + d, x0 = j stride_1 + d (padded coordinates).
    Output H' = ceil((H + 2 pad - 2 (d + (k - 1) / 2)) / stride_1), same for W'.
    Backward: the matching sums for f1 and f2.

    prototxt: ``correlation_param { pad: 0 kernel_size max_displacement stride_1: 1 stride_2: 1
    correlation_type: MULTIPLY }`` (SUBTRACT, do_abs and single_direction are refused).
    Bottoms: f1, f2 (N, C, H, W). Top: (N, G G, H', W').
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1
    pad_axes = (2, 3)           # zero-padded by ``pad``: H and W (Correlation1D: W only)

    def layer_setup(self, bottom, top):
        p = self.layer_param.correlation_param
        if p.correlation_type != p.MULTIPLY or p.do_abs or p.single_direction:
            raise self.error("only multiplicative 2-D correlation is supported (correlation_type "
                             "SUBTRACT, do_abs and single_direction are not)")
        self._geometry(p)
        self.r = self.d // self.s2

    def _geometry(self, p):
        """kernel_size k, max_displacement d, pad, stride_1 s1, stride_2 s2 (checked)."""
        if not p.HasField("kernel_size") or not p.HasField("max_displacement"):
            raise self.error("correlation_param needs kernel_size and max_displacement")
        if p.kernel_size % 2 == 0 or p.stride_1 < 1 or p.stride_2 < 1:
            raise self.error("kernel_size must be odd and strides >= 1")
        self.k, self.d, self.pad = int(p.kernel_size), int(p.max_displacement), int(p.pad)
        self.s1, self.s2 = int(p.stride_1), int(p.stride_2)

    def _bottom_shape(self, bottom):
        if bottom[0].shape != bottom[1].shape or bottom[0].num_axes != 4:
            raise self.error("bottoms must have equal N x C x H x W shapes, got %s and %s"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        return bottom[0].shape

    def reshape(self, bottom, top):
        N, C, H, W = self._bottom_shape(bottom)
        border = self.d + (self.k - 1) // 2
        self.out = tuple(-(-(n + 2 * self.pad - 2 * border) // self.s1) for n in (H, W))
        if min(self.out) < 1:
            raise self.error("the neighbourhood and kernel do not fit a %dx%d input" % (H, W),
                             ShapeError)
        g = 2 * self.r + 1
        top[0].reshape(N, g * g, self.out[0], self.out[1])

    def _terms(self):
        """(channel, rows, cols, displaced rows, displaced cols) slices of the padded inputs."""
        g = 2 * self.r + 1
        oh, ow = self.out
        for t in range(g * g):
            dy, dx = (t // g - self.r) * self.s2, (t % g - self.r) * self.s2
            for a in range(self.k):
                for b in range(self.k):
                    y0, x0 = self.d + a, self.d + b
                    rows = slice(y0, y0 + (oh - 1) * self.s1 + 1, self.s1)
                    cols = slice(x0, x0 + (ow - 1) * self.s1 + 1, self.s1)
                    rows2 = slice(y0 + dy, y0 + dy + (oh - 1) * self.s1 + 1, self.s1)
                    cols2 = slice(x0 + dx, x0 + dx + (ow - 1) * self.s1 + 1, self.s1)
                    yield t, rows, cols, rows2, cols2

    def _padded(self, a):
        return np.pad(a, [(self.pad, self.pad) if ax in self.pad_axes else (0, 0)
                          for ax in range(4)])

    def _unpadded(self, g, shape):
        return g[tuple(slice(self.pad, self.pad + shape[ax]) if ax in self.pad_axes
                       else slice(None) for ax in range(4))]

    def forward_cpu(self, bottom, top):
        f1, f2 = self._padded(bottom[0].data), self._padded(bottom[1].data)
        y = top[0].data
        y[...] = 0
        for t, rows, cols, rows2, cols2 in self._terms():
            y[:, t] += np.einsum("nchw,nchw->nhw", f1[:, :, rows, cols], f2[:, :, rows2, cols2])
        y /= self.k * self.k * bottom[0].shape[1]

    def backward_cpu(self, top, propagate_down, bottom):
        f1, f2 = self._padded(bottom[0].data), self._padded(bottom[1].data)
        g1, g2 = np.zeros_like(f1), np.zeros_like(f2)
        dy = top[0].diff / (self.k * self.k * bottom[0].shape[1])
        for t, rows, cols, rows2, cols2 in self._terms():
            g = dy[:, t][:, None]
            g1[:, :, rows, cols] += g * f2[:, :, rows2, cols2]
            g2[:, :, rows2, cols2] += g * f1[:, :, rows, cols]
        for i, g in enumerate((g1, g2)):
            if propagate_down[i]:
                bottom[i].diff[...] = self._unpadded(g, bottom[0].shape)


@register_layer("ChannelNorm")
class ChannelNormLayer(Layer):
    """FlowNet 2's ChannelNorm: the L2 norm over the channels at each position.

        y[n, 0, h, w] = sqrt(sum_c x[n, c, h, w]^2);   dx = dy x / (y + 1e-9)

    Bottom (N, C, H, W). Top (N, 1, H, W). No prototxt fields.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be N x C x H x W", ShapeError)
        N, C, H, W = bottom[0].shape
        top[0].reshape(N, 1, H, W)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = np.sqrt(np.square(bottom[0].data).sum(axis=1, keepdims=True))

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff * bottom[0].data / (top[0].data + 1e-9)


@register_layer("FlowWarp")
class FlowWarpLayer(Layer):
    """FlowNet 2's FlowWarp: bilinear backward warping of an image by a flow field.

    For each pixel (x, y): (x2, y2) = (x + u, y + v); inside [0, W) x [0, H):
        out = (1-a)(1-b) I[y0, x0] + a(1-b) I[y0, x1] + (1-a) b I[y1, x0] + a b I[y1, x1]
    with x0 = floor(x2), x1 = min(x0 + 1, W - 1), a = x2 - x0 (same for y); outside: 0
    (``fill_value: ZERO``) or NaN (``NOT_A_NUMBER``), with no gradient. Backward: the bilinear
    weights to the image, d out / d x2 and d out / d y2 to the flow (the fork's formulas).

    prototxt: ``flow_warp_param { fill_value: ZERO }``. Bottoms: image (N, C, H, W),
    flow (N, 2, H, W) (u then v). Top: (N, C, H, W).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        img, flow = bottom[0].shape, bottom[1].shape
        if len(img) != 4 or flow != (img[0], 2) + tuple(img[2:]):
            raise self.error("image %s and flow %s: the flow must be N x 2 x H x W of the image"
                             % (img, flow), ShapeError)
        top[0].reshape(img)

    def _geometry(self, flow):
        N, _, H, W = flow.shape
        x2 = np.arange(W)[None, None, :] + flow[:, 0].astype(np.float32)
        y2 = np.arange(H)[None, :, None] + flow[:, 1].astype(np.float32)
        inside = (x2 >= 0) & (y2 >= 0) & (x2 < W) & (y2 < H)
        x0 = np.where(inside, x2, 0).astype(np.int64)
        y0 = np.where(inside, y2, 0).astype(np.int64)
        x1, y1 = np.minimum(x0 + 1, W - 1), np.minimum(y0 + 1, H - 1)
        a, b = np.where(inside, x2 - x0, 0), np.where(inside, y2 - y0, 0)
        return inside, x0, x1, y0, y1, a, b, x2, y2

    @staticmethod
    def _gather(img, yy, xx):
        n = np.arange(img.shape[0])[:, None, None]
        return img[n, :, yy, xx].transpose(0, 3, 1, 2)  # (N, C, H, W)

    def forward_cpu(self, bottom, top):
        img = bottom[0].data
        inside, x0, x1, y0, y1, a, b, _, _ = self._geometry(bottom[1].data)
        a, b = a[:, None], b[:, None]
        g = self._gather
        out = ((1 - a) * (1 - b) * g(img, y0, x0) + a * (1 - b) * g(img, y0, x1)
               + (1 - a) * b * g(img, y1, x0) + a * b * g(img, y1, x1))
        p = self.layer_param.flow_warp_param
        fill = 0.0 if p.fill_value == p.ZERO else np.nan
        top[0].data[...] = np.where(inside[:, None], out, fill)

    def backward_cpu(self, top, propagate_down, bottom):
        img, dy = bottom[0].data, top[0].diff
        inside, x0, x1, y0, y1, a, b, x2, y2 = self._geometry(bottom[1].data)
        m = inside[:, None]
        g = np.where(m, dy, 0)
        if propagate_down[0]:
            gi = np.zeros_like(img)
            n = np.arange(img.shape[0])[:, None, None]
            for yy, xx, w in ((y0, x0, (1 - a) * (1 - b)), (y0, x1, a * (1 - b)),
                              (y1, x0, (1 - a) * b), (y1, x1, a * b)):
                np.add.at(gi.transpose(0, 2, 3, 1), (n, yy, xx),
                          (g * w[:, None]).transpose(0, 2, 3, 1))
            bottom[0].diff[...] = gi
        if propagate_down[1]:
            tl, tr = self._gather(img, y0, x0), self._gather(img, y0, x1)
            bl, br = self._gather(img, y1, x0), self._gather(img, y1, x1)
            gy = (y1 - y2)[:, None]
            gx = (x1 - x2)[:, None]
            du = (g * (gy * (tr - tl) + (1 - gy) * (br - bl))).sum(axis=1)
            dv = (g * (gx * (bl - tl) + (1 - gx) * (br - tr))).sum(axis=1)
            bottom[1].diff[:, 0] = np.where(inside, du, 0)
            bottom[1].diff[:, 1] = np.where(inside, dv, 0)


def _resample_matrix(n_out, n_in, f_main, f_other, kind, antialias):
    """Rows: FlowNet 2's Resample weights of each output index over the inputs (normalised).
    The input coordinate is ``o f_main + f_other / 2 - 0.5`` (the fork mixes the x and y factors
    here; kept)."""
    A = np.zeros((n_out, n_in))
    t = np.arange(n_out) * f_main + f_other / 2.0 - 0.5
    rnd = np.where(t >= 0, np.floor(t + 0.5), np.ceil(t - 0.5)).astype(np.int64)  # C round()
    if kind == "NEAREST":
        A[np.arange(n_out), np.clip(rnd, 0, n_in - 1)] = 1
        return A
    scale = 1.0 / (f_main if antialias else 1.0)
    width = 4 if kind == "CUBIC" else 2
    radius = 2 if f_main < 1 else int(np.ceil(width / scale))
    for o in range(n_out):
        for i in range(max(rnd[o] - radius, 0), min(rnd[o] + radius, n_in - 1) + 1):
            d = abs(scale * (t[o] - i))
            if kind == "CUBIC":
                w = d * d * (1.5 * d - 2.5) + 1 if d <= 1 else (
                    d * (d * (-0.5 * d + 2.5) - 4) + 2 if d < 2 else 0.0)
            else:
                w = max(0.0, 1 - d)
            A[o, i] = scale * w
    return A


@register_layer("Resample")
class ResampleLayer(Layer):
    """FlowNet 2's Resample (image / flow resizing; the fork has a forward only).

    fx = W / W', fy = H / H'; output (x', y') reads input coordinates x = x' fx + fy / 2 - 0.5,
    y = y' fy + fx / 2 - 0.5 (sic). NEAREST: the rounded position. LINEAR / CUBIC: a triangle /
    Keys cubic filter over the inputs within the filter radius, stretched by 1 / f when
    downsampling with ``antialias``, normalised by the sum of the weights used.

    prototxt: ``resample_param { width height type: LINEAR antialias: true }`` (AREA refused).
    Bottoms: x (N, C, H, W) [, a blob giving H' x W']. Top (N, C, H', W').
    """
    min_bottom_blobs = 1
    max_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.resample_param
        names = {1: "NEAREST", 2: "LINEAR", 3: "CUBIC"}
        if p.type not in names:
            raise self.error("resample_param.type must be NEAREST, LINEAR or CUBIC")
        self.kind = names[p.type]

    def reshape(self, bottom, top):
        p = self.layer_param.resample_param
        N, C, H, W = bottom[0].shape
        ho, wo = (bottom[1].shape[2:4] if len(bottom) == 2 else (p.height, p.width))
        if ho < 1 or wo < 1:
            raise self.error("resample_param height and width (or a second bottom) are required")
        fx, fy = W / float(wo), H / float(ho)
        antialias = p.antialias and (fx > 1 or fy > 1)
        self.Ay = _resample_matrix(ho, H, fy, fx, self.kind, antialias)
        self.Ax = _resample_matrix(wo, W, fx, fy, self.kind, antialias)
        for A in (self.Ay, self.Ax):
            s = A.sum(axis=1, keepdims=True)
            np.divide(A, s, out=A, where=s != 0)
        top[0].reshape(N, C, ho, wo)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = self.Ay @ bottom[0].data @ self.Ax.T

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            raise self.error("Resample has no backward (as in FlowNet 2)")
        if len(bottom) > 1 and propagate_down[1]:  # the size reference: no gradient
            bottom[1].diff[...] = 0


def _downsample_matrix(n_out, n_in):
    A = np.zeros((n_out, n_in))
    scale = (n_in - 1) / float(n_out - 1) if n_out > 1 else 1.0
    radius = int(np.ceil(scale))
    for o in range(n_out):
        b = o / float(n_out - 1) * (n_in - 1) if n_out > 1 else 0.0
        c = int(np.floor(b + 0.5))
        for i in range(max(c - radius, 0), min(c + radius, n_in - 1) + 1):
            A[o, i] = max(0.0, 1 - abs(i - b) / scale)
    return A


@register_layer("Downsample")
class DownsampleLayer(Layer):
    """FlowNet 2's Downsample (ground-truth flow to each loss's resolution; forward only).

    Output (x', y') sits at input position x = x' (W - 1) / (W' - 1) (same for y) and averages
    the inputs within ceil(scale) pixels with tent weights max(0, 1 - |i - x| / scale),
    scale = (W - 1) / (W' - 1); NaN inputs are left out of the average, and the output is NaN
    when they hold more than half of the weight. Equal sizes copy.

    prototxt: ``downsample_param { top_height: 0 top_width: 0 }``. Bottoms: x (N, C, H, W)
    [, a blob giving H' x W']. Top (N, C, H', W').
    """
    min_bottom_blobs = 1
    max_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        p = self.layer_param.downsample_param
        N, C, H, W = bottom[0].shape
        ho, wo = (bottom[1].shape[2:4] if len(bottom) == 2 else (p.top_height, p.top_width))
        if ho < 1 or wo < 1:
            raise self.error("downsample_param top_height and top_width (or a second bottom) "
                             "are required")
        self.Ay, self.Ax = _downsample_matrix(ho, H), _downsample_matrix(wo, W)
        top[0].reshape(N, C, ho, wo)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        if x.shape == top[0].shape:
            top[0].data[...] = x
            return
        nan = np.isnan(x)
        value = self.Ay @ np.where(nan, 0, x) @ self.Ax.T
        weight = self.Ay @ (~nan).astype(x.dtype) @ self.Ax.T
        nan_weight = self.Ay @ nan.astype(x.dtype) @ self.Ax.T
        with np.errstate(divide="ignore", invalid="ignore"):
            top[0].data[...] = np.where(nan_weight / weight > 0.5, np.nan, value / weight)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            raise self.error("Downsample cannot do backward (as in FlowNet 2)")
        if len(bottom) > 1 and propagate_down[1]:  # the size reference: no gradient
            bottom[1].diff[...] = 0
