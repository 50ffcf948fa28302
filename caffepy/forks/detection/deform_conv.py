"""makefile/frcnn's ``DeformableConvolution`` (src/caffe/DeformConv: deformable_conv_layer.cpp /
.cu and deformable_im2col.cu, Deformable ConvNets' first operator). The fork has GPU code only;
this class computes what its kernels do, including where its backward launches cover less than
the whole column buffer (below). dengshuo/D-M-F-ConvNets' layer of the same name (its V1 type
DEFORMABLECONVOLUTION upgrades to this type) is another port, whose forward reads the image height
from the channel axis and its width from the batch axis; its nets build with this class, which
computes the deformable convolution that port intends.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer
from ...layers.conv_base import _ConvolutionBase
from ...math import bilinear


def _sample(img, h, w):
    """The im2col kernel's bilinear read of img (C', H, W) at (h, w) in [0, H) x [0, W)."""
    return bilinear.sample(img, h, w)


def _clamped(a, size):
    lo = int(a)
    if lo >= size - 1:
        return size - 1, size - 1, float(size - 1)
    return lo, lo + 1, a


def _grad_weight(ah, aw, h, w, H, W):
    """get_gradient_weight: pixel (h, w)'s bilinear weight for the sample at (ah, aw)."""
    if ah < 0 or ah > H or aw < 0 or aw > W:
        return 0.0
    hl, hh, ah = _clamped(max(ah, 0.0), H)
    wl, wh, aw = _clamped(max(aw, 0.0), W)
    fh = (h + 1 - ah) if h == hl else (ah + 1 - h) if h == hh else None
    fw = (w + 1 - aw) if w == wl else (aw + 1 - w) if w == wh else None
    return 0.0 if fh is None or fw is None else fh * fw


def _coord_weight(ah, aw, H, W, img, direction):
    """get_coordinate_weight: d sample / d h (direction 0) or d w (1) on img (H, W)."""
    if ah < 0 or ah > H or aw < 0 or aw > W:
        return 0.0
    hl, hh, ah = _clamped(ah, H)
    wl, wh, aw = _clamped(aw, W)
    if direction == 0:
        return ((wl + 1 - aw) * (img[hh, wl] - img[hl, wl])
                + (aw - wl) * (img[hh, wh] - img[hl, wh]))
    return ((hl + 1 - ah) * (img[hl, wh] - img[hl, wl])
            + (ah - hl) * (img[hh, wh] - img[hh, wl]))


@register_layer("DeformableConvolution")
class DeformableConvolutionLayer(Layer):
    """2-d convolution whose taps read the input at learned offsets (makefile/frcnn).

    Bottoms: x (N x C x H x W), offsets (N x 2 kh kw D x H x W, D = ``deformable_group``; the fork
    checks the offsets' H, W against x's). Output size as Convolution's, (H + 2p - (d (k - 1) +
    1)) / s + 1. Per image, tap (i, j) of output (y, x) for input channel c (group g = c / (C /
    D)) reads offset (oh, ow) = the values at flat positions ((2 (i kw + j)) Ho + y) Wo + x and
    ((2 (i kw + j) + 1) Ho + y) Wo + x of g's block of 2 kh kw Ho Wo in the image's offsets (the
    kernel indexes the offsets by the output size), and samples x[c] at (h, w) = (y s - p + i d +
    oh, x s - p + j d + ow): 0 unless 0 <= h < H and 0 <= w < W, bilinear otherwise (the last
    row / column taken alone). Then top = W * columns (``group`` as Convolution) + bias.

    Backward as the fork's kernels: bias += sum dy, weight += dy columns^T (both exact). With
    propagate_down[0] (which alone drives both bottoms' gradients), columns' gradient G = W^T dy;
    offsets: d sample / d (h, w) times G summed over the group's channels, for the first 2 kh kh
    D Ho Wo offset entries (kh twice, as the launch; it refuses kernel_h > kernel_w, where those
    writes leave the image's block); features: only the first C kh kw entries of G (the col2im
    launch count, not C kh kw Ho Wo) scatter their bilinear weights, and image n's go to flat
    offset n * (offset count per image) of the feature diff, not n * C H W (refused when that
    leaves the blob). With a 1 x 1 output and one image this is the exact gradient.

    prototxt: ``deformable_convolution_param { num_output bias_term: true kernel_size / kernel_h
    kernel_w, stride / stride_h stride_w (1), pad / pad_h pad_w (0), dilation (1), group: 1,
    deformable_group: 4, weight_filler, bias_filler }`` (axis must be 1; engine and
    force_nd_im2col are accepted and ignored). Params: weight (num_output, C / group, kh, kw),
    bias (num_output).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.deformable_convolution_param
        if bottom[0].num_axes != 4 or p.axis != 1:
            raise self.error("takes N x C x H x W with axis 1, got %s (axis %d)"
                             % (bottom[0].shape, p.axis), ShapeError)
        self.kernel = _ConvolutionBase._spatial_field(self, p, "kernel_size", 2, None)
        self.stride = _ConvolutionBase._spatial_field(self, p, "stride", 2, 1)
        self.pad = _ConvolutionBase._spatial_field(self, p, "pad", 2, 0)
        dil = [int(d) for d in p.dilation] or [1]
        self.dilation = tuple(dil * 2 if len(dil) == 1 else dil)
        self.C, self.O = bottom[0].shape[1], int(p.num_output)
        self.group, self.dg = int(p.group), int(p.deformable_group)
        if self.O <= 0 or self.group <= 0 or self.dg <= 0 or self.C % self.group \
                or self.O % self.group or self.C % self.dg:
            raise self.error("num_output (%d) > 0, channels (%d) divisible by group (%d) and "
                             "deformable_group (%d), num_output by group"
                             % (self.O, self.C, self.group, self.dg))
        kh, kw = self.kernel
        shapes = [(self.O, self.C // self.group, kh, kw)] + ([(self.O,)] if p.bias_term else [])
        self.bias_term = bool(p.bias_term)
        self.init_param_blobs(shapes, p.weight_filler, p.bias_filler if p.bias_term else None)
        self.param_propagate_down = [True] * len(shapes)

    def reshape(self, bottom, top):
        x, off = bottom
        kh, kw = self.kernel
        if x.shape[1] != self.C:
            raise self.error("bottom has %d channels, the layer was set up for %d"
                             % (x.shape[1], self.C), ShapeError)
        if off.num_axes != 4 or off.shape[0] != x.shape[0] \
                or off.shape[1] != 2 * kh * kw * self.dg or off.shape[2:] != x.shape[2:]:
            raise self.error("offsets must be N x 2 kh kw deformable_group (%d) x H x W like the "
                             "data %s, got %s" % (2 * kh * kw * self.dg, x.shape, off.shape),
                             ShapeError)
        H, W = x.shape[2:]
        self.out = tuple((n + 2 * p - (d * (k - 1) + 1)) // s + 1 for n, p, d, k, s in
                         zip((H, W), self.pad, self.dilation, self.kernel, self.stride))
        if min(self.out) <= 0 or self.dg * 2 * kh * kw * self.out[0] * self.out[1] > off.count_range(1):
            raise self.error("output %s: the offsets (%d values per image) must hold 2 kh kw "
                             "deformable_group values per output position"
                             % (self.out, off.count_range(1)), ShapeError)
        top[0].reshape((x.shape[0], self.O) + self.out)

    def _positions(self, off_n):
        """(C kh kw, Ho, Wo) sample rows h and columns w of one image, per input channel."""
        kh, kw = self.kernel
        Ho, Wo = self.out
        blk = 2 * kh * kw * Ho * Wo
        y = np.arange(Ho)[:, None] * self.stride[0] - self.pad[0]
        x = np.arange(Wo)[None, :] * self.stride[1] - self.pad[1]
        hs = np.zeros((self.C, kh * kw, Ho, Wo))
        ws = np.zeros_like(hs)
        per = self.C // self.dg
        for g in range(self.dg):
            o = off_n[g * blk:(g + 1) * blk].reshape(2 * kh * kw, Ho, Wo)
            for k in range(kh * kw):
                i, j = divmod(k, kw)
                hs[g * per:(g + 1) * per, k] = y + i * self.dilation[0] + o[2 * k]
                ws[g * per:(g + 1) * per, k] = x + j * self.dilation[1] + o[2 * k + 1]
        return hs.reshape(-1, Ho, Wo), ws.reshape(-1, Ho, Wo)

    def _columns(self, img, hs, ws):
        _, H, W = img.shape
        kk = self.kernel[0] * self.kernel[1]
        col = np.zeros(hs.shape)
        for r in range(hs.shape[0]):
            c = r // kk
            for (a, b), h in np.ndenumerate(hs[r]):
                w = ws[r, a, b]
                if 0 <= h < H and 0 <= w < W:
                    col[r, a, b] = _sample(img[c:c + 1], h, w)[0]
        return col.reshape(hs.shape[0], -1)

    def forward_cpu(self, bottom, top):
        x, off = bottom[0].data, bottom[1].data
        N = x.shape[0]
        g, O = self.group, self.O
        wt = self.blobs[0].data.reshape(g, O // g, -1)
        self._cols = []
        for n in range(N):
            hs, ws = self._positions(off[n].reshape(-1))
            col = self._columns(x[n], hs, ws).reshape(g, -1, hs.shape[1] * hs.shape[2])
            self._cols.append((hs, ws, col))
            out = np.einsum("gok,gkp->gop", wt, col).reshape(O, *self.out)
            if self.bias_term:
                out = out + self.blobs[1].data[:, None, None]
            top[0].data[n] = out

    def backward_cpu(self, top, propagate_down, bottom):
        x, off = bottom[0].data, bottom[1].data
        N, C, H, W = x.shape
        g, O = self.group, self.O
        kh, kw = self.kernel
        kk = kh * kw
        Ho, Wo = self.out
        dy = top[0].diff.reshape(N, g, O // g, Ho * Wo)
        if self.bias_term and self.param_propagate_down[1]:
            self.blobs[1].diff[...] += dy.reshape(N, O, -1).sum(axis=(0, 2))
        if self.param_propagate_down[0]:
            for n in range(N):
                self.blobs[0].diff[...] += np.einsum(
                    "gop,gkp->gok", dy[n], self._cols[n][2]).reshape(self.blobs[0].shape)
        if not propagate_down[0]:
            return
        if kh > kw:
            raise self.error("kernel_h %d > kernel_w %d: the fork's offset gradient launch "
                             "writes past the image's offsets" % (kh, kw))
        wt = self.blobs[0].data.reshape(g, O // g, -1)
        per_img = off[0].size
        dx = np.zeros(x.size)
        doff = np.zeros((N, per_img))
        per = C // self.dg
        for n in range(N):
            hs, ws, _ = self._cols[n]
            G = np.einsum("gok,gop->gkp", wt, dy[n]).reshape(C * kk, Ho * Wo)
            # offsets: entries up to 2 kh kh D Ho Wo of the image's block
            limit = 2 * kh * kh * self.dg * Ho * Wo
            for idx in range(min(limit, 2 * kk * self.dg * Ho * Wo)):
                q, pos = divmod(idx, Ho * Wo)
                grp, oc = divmod(q, 2 * kk)
                k, direction = divmod(oc, 2)
                a, b = divmod(pos, Wo)
                val = 0.0
                for c in range(grp * per, (grp + 1) * per):
                    h, w = hs[c * kk + k, a, b], ws[c * kk + k, a, b]
                    if h < 0 or w < 0 or h >= H or w >= W:
                        h = w = -1.0
                    val += _coord_weight(h, w, H, W, x[n, c], direction) * G[c * kk + k, pos]
                doff[n, idx] = val
            # features: the first C kh kw column entries only
            base = n * per_img
            flatG = G.reshape(-1)
            for idx in range(min(C * kk, flatG.size)):
                r, pos = divmod(idx, Ho * Wo)
                c, k = divmod(r, kk)
                a, b = divmod(pos, Wo)
                h, w = hs[r, a, b], ws[r, a, b]
                ch, cw = int(h), int(w)
                for yy in range(ch - 2, ch + 3):
                    for xx in range(cw - 2, cw + 3):
                        if 0 <= yy < H and 0 <= xx < W and abs(h - yy) < 1 and abs(w - xx) < 1:
                            at = base + (c * H + yy) * W + xx
                            if at >= dx.size:
                                raise self.error("the fork writes image %d's feature gradient "
                                                 "at offset %d, past the bottom's %d values"
                                                 % (n, base, dx.size))
                            dx[at] += _grad_weight(h, w, yy, xx, H, W) * flatG[idx]
        bottom[0].diff[...] = dx.reshape(x.shape)
        bottom[1].diff[...] = doff.reshape(off.shape)
