"""Cambricon/caffe's UnPooling: unpooling with a fixed position, a divided or a replicated
value per window (src/caffe/layers/unpooling_layer.cpp)."""
import math

import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


def _c_div2(v):
    """C's int division by 2 (toward zero)."""
    return int(v / 2)


@register_layer("UnPooling")
class UnPoolingLayer(Layer):
    """Unpooling of Cambricon/caffe (src/caffe/layers/unpooling_layer.cpp; Betterthinking/caffe
    registers the type too). For x N x C x H x W, kernel k, stride s and pad p per axis, the top
    is N x C x UH x UW with UH = (H - 1) s - 2 p + k; bottom cell (h, w) owns the window
    rows [h s - p, h s - p + k) (columns likewise):

        FIXED: y at the window's middle cell (C's (start + end - 1) / 2, clipped to the map)
               is x[h, w] (a later cell overwrites an earlier one); dL/dx[h, w] = dL/dy there
               when (h, w) is the cell that wrote it, else 0
        DIV:   every window cell u inside the map gets x / A / m(u), A the window's area cut at
               UH + p (UW + p), m(u) the number of windows covering u; backward the same sums
        REP:   every window cell u gets x / m(u); backward likewise

    With two bottoms k and s come from the second bottom's size (k = s = ceil(H1 / H), s = 1
    where that equals H1; p = floor(((H - 1) s + k - H1) / 2)), per axis. prototxt:
    ``unpooling_param { unpool: FIXED (DIV, REP) out_kernel_size (or out_kernel_h and
    out_kernel_w) out_stride: 1 (or out_stride_h / out_stride_w) out_pad: 0 (or out_pad_h /
    out_pad_w) }``; the fork checks the kernel fields even when a second bottom sets them. In
    caffepy's schema these fields sit in DeconvNet's UnpoolingParameter (FIXED / DIV / REP beside
    its MAX / AVE / TILE; a binary value 0, 1, 2 reads as MAX, AVE, TILE and is taken as
    FIXED, DIV, REP here). Bottoms: x [, a blob of the target size]. Top: y.
    """
    min_bottom_blobs = 1
    max_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.unpooling_param
        has = p.HasField
        if has("out_kernel_size") == (has("out_kernel_h") and has("out_kernel_w")):
            raise self.error("unpooling_param needs out_kernel_size or out_kernel_h and "
                             "out_kernel_w, not both")
        for name in ("out_pad", "out_stride"):
            if not ((not has(name) and has(name + "_h") and has(name + "_w"))
                    or (not has(name + "_h") and not has(name + "_w"))):
                raise self.error("unpooling_param: %s, or %s_h and %s_w" % (name, name, name))
        M = type(p)
        methods = {M.MAX: "FIXED", M.FIXED: "FIXED", M.AVE: "DIV", M.DIV: "DIV",
                   M.TILE: "REP", M.REP: "REP"}
        if p.unpool not in methods:
            raise self.error("unpooling_param.unpool must be FIXED, DIV or REP")
        self.method = methods[p.unpool]

    def _geometry(self, bottom):
        p = self.layer_param.unpooling_param
        h, w = bottom[0].shape[2:]
        if len(bottom) == 1:
            k = ((p.out_kernel_size,) * 2 if p.HasField("out_kernel_size")
                 else (p.out_kernel_h, p.out_kernel_w))
            s = ((p.out_stride_h, p.out_stride_w) if p.HasField("out_stride_h")
                 else (p.out_stride,) * 2)
            pad = ((p.out_pad_h, p.out_pad_w) if p.HasField("out_pad_h") else (p.out_pad,) * 2)
            if min(k) <= 0:
                raise self.error("out kernel dimensions cannot be zero")
            return tuple(int(v) for v in k), tuple(int(v) for v in s), tuple(int(v) for v in pad)
        if bottom[1].num_axes != 4:
            raise self.error("bottom[1] must be N x C x H x W, got shape %s"
                             % (bottom[1].shape,), ShapeError)
        k, s, pad = [], [], []
        for small, big in ((h, bottom[1].shape[2]), (w, bottom[1].shape[3])):
            ki = int(math.ceil(float(big) / small))
            si = 1 if ki == big else ki
            k.append(ki)
            s.append(si)
            pad.append(int(math.floor(float((small - 1) * si + ki - big) / 2)))
        return tuple(k), tuple(s), tuple(pad)

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes != 4:
            raise self.error("bottom must be N x C x H x W, got shape %s" % (x.shape,),
                             ShapeError)
        self.k, self.s, self.pad = self._geometry(bottom)
        if self.pad != (0, 0) and (self.pad[0] >= self.k[0] or self.pad[1] >= self.k[1]):
            raise self.error("the pad %s must be smaller than the kernel %s"
                             % (self.pad, self.k))
        n, c, h, w = x.shape
        self.out = tuple((d - 1) * s - 2 * p + k
                         for d, s, p, k in zip((h, w), self.s, self.pad, self.k))
        if min(self.out) <= 0:
            raise self.error("the unpooled size %s is empty" % (self.out,), ShapeError)
        top[0].reshape((n, c) + self.out)
        self.in_hw = (h, w)
        self._plan()

    def _windows(self):
        """Per bottom cell: (h, w, rows, cols, area) with the window clipped to the map."""
        (kh, kw), (sh, sw), (ph, pw), (uh, uw) = self.k, self.s, self.pad, self.out
        h, w = self.in_hw
        for i in range(h):
            hs = i * sh - ph
            he = min(hs + kh, uh + ph)
            for j in range(w):
                ws = j * sw - pw
                we = min(ws + kw, uw + pw)
                area = (he - hs) * (we - ws)
                yield i, j, slice(max(hs, 0), min(he, uh)), slice(max(ws, 0), min(we, uw)), area

    def _plan(self):
        """The fork's mask: the writer of each cell (FIXED) or the cover count (DIV, REP)."""
        (kh, kw), (sh, sw), (ph, pw), (uh, uw) = self.k, self.s, self.pad, self.out
        h, w = self.in_hw
        if self.method == "FIXED":
            writer = -np.ones((uh, uw), dtype=np.int64)
            for i in range(h):
                hs = i * sh - ph
                mh = min(max(_c_div2(hs + hs + kh - 1), 0), uh - 1)
                for j in range(w):
                    ws = j * sw - pw
                    mw = min(max(_c_div2(ws + ws + kw - 1), 0), uw - 1)
                    writer[mh, mw] = i * w + j
            self.writer = writer
            return
        cover = np.zeros((uh, uw))
        for i in range(h):
            hs = i * sh - ph
            for j in range(w):
                ws = j * sw - pw
                cover[max(hs, 0):min(hs + kh, uh), max(ws, 0):min(ws + kw, uw)] += 1
        self.cover = cover

    def forward_cpu(self, bottom, top):
        n, c, h, w = bottom[0].shape
        x = bottom[0].data.reshape(n, c, h * w)
        y = np.zeros((n, c) + self.out)
        if self.method == "FIXED":
            hit = self.writer >= 0
            y[:, :, hit] = x[:, :, self.writer[hit]]
        else:
            for i, j, rows, cols, area in self._windows():
                v = x[:, :, i * w + j, None, None]
                if self.method == "DIV":
                    v = v / area
                y[:, :, rows, cols] += v / self.cover[rows, cols]
        top[0].data[...] = y

    def backward_cpu(self, top, propagate_down, bottom):
        if len(bottom) == 2 and propagate_down[1]:
            bottom[1].diff[...] = 0
        if not propagate_down[0]:
            return
        n, c, h, w = bottom[0].shape
        dy = top[0].diff
        dx = np.zeros((n, c, h * w))
        if self.method == "FIXED":
            hit = self.writer >= 0
            dx[:, :, self.writer[hit]] = dy[:, :, hit]
        else:
            for i, j, rows, cols, area in self._windows():
                g = (dy[:, :, rows, cols] / self.cover[rows, cols]).sum(axis=(2, 3))
                dx[:, :, i * w + j] = g / area if self.method == "DIV" else g
        bottom[0].diff[...] = dx.reshape(bottom[0].shape)
