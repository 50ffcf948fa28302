"""The DenseCRF layers: Krähenbühl and Koltun's mean-field inference in a fully connected CRF with
Gaussian edge potentials (NIPS 2011). DeepLab v2's (aharley/segaware
``caffe/src/caffe/layers/densecrf_layer.cpp``, ``util/densecrf_pairwise.cpp``,
``util/permutohedral.cpp``, ``include/caffe/util/densecrf_util.hpp``; the same files in
hszhao/PSPNet, Chrisding/seal and the other DeepLab v2 descendants) and, as a variant under the
same type name, pathak22/caffe-ccnn's (commit f62faf1, ``src/caffe/layers/densecrf_layer.cpp``
over Krähenbühl's densecrf library in ``src/caffe/util/densecrf/``), whose lattice, Potts
potential and fast_exp are the same code.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer, register_variant
from .permutohedral import Lattice

_POLY = [np.float32(c) for c in (0.0001413161, 0.0013298820, 0.0083013598, 0.0416573475,
                                 0.1666653019, 0.4999999206, 0.9999999995)]
_FLT_MIN = np.float32(np.finfo(np.float32).tiny)


def fast_exp(x):
    """densecrf_util.hpp's scalar ``fast_exp`` on a float32 array: |x| > 20 gives 0; else |x| is
    halved (by 8, 4, 2) below 0.69, e^-|x| taken from a degree-7 polynomial in float32 and squared
    back; e^x is that value for x < 0 and its reciprocal for x >= 0."""
    x = np.asarray(x, dtype=np.float32)
    a = np.abs(x)
    mult = np.zeros(a.shape, dtype=np.int64)
    for bound, div, add in ((0.69 * 8, 8, 3), (0.69 * 4, 4, 2), (0.69, 2, 1)):
        while True:
            big = (a.astype(np.float64) > bound) & (a <= 20)
            if not big.any():
                break
            a[big] /= np.float32(div)
            mult[big] += add
    p = np.zeros_like(a)
    for c in _POLY:                       # 1 - a (c1 - a (c2 - ... a c7)), innermost first
        p = c - a * p
    r = np.float32(1) - a * p
    while True:
        more = mult > 0
        if not more.any():
            break
        r[more] = r[more] * r[more]
        mult[more] -= 1
    with np.errstate(divide="ignore"):
        r = np.where(x < 0, r, np.float32(1) / r)
    return np.where(np.abs(x) > 20, np.float32(0), r).astype(np.float32)


def _exp_normalize(values, scale):
    """ExpAndNormalize: per pixel (rows of a P x M float32 array), softmax of scale * values with
    fast_exp, the sum accumulated channel by channel in float32."""
    v = np.float32(scale) * values
    e = fast_exp(v - v.max(axis=1, keepdims=True))
    total = e[:, 0].copy()
    for j in range(1, e.shape[1]):
        total += e[:, j]
    return e / total[:, None]


class _Potts(object):
    """PottsPotential: ``out += w * norm * K in`` with K the lattice filter over the features and
    norm = 1 / (K 1 + 1e-20) per pixel (the fork's per_pixel_normalization, its default)."""

    def __init__(self, features, w):
        self.lattice = Lattice(features)
        self.w = np.float32(w)
        self.norm = np.float32(1) / (self.lattice.compute(np.ones(len(features), np.float32))
                                     + np.float32(1e-20))

    def apply(self, out, q):
        out += self.w * self.norm[:, None] * self.lattice.compute(q.T).T


@register_layer("DenseCRF")
class DenseCRFLayer(Layer):
    """Mean-field inference of a dense CRF on the network's scores; forward only.

    Per image n: the effective size (H, W) is the whole map when bottom 1's (height, width) of
    image n (``data_dims``, e.g. ImageSegData's third top) are both at least the map's, else those
    dims (padded maps). Over the P = H W pixels of the top-left region, in float32:
      unary U = -x (x: bottom 0, the scores),  Q_0 = softmax(-U),
      t = 1..max_iter:  Q_t = softmax(-U + sum_k w_k n_k (K_k Q_{t-1})),
    K_k the Gaussian filters: one per ``pos_w`` with features (col, row) / pos_xy_std, then one
    per ``bi_w`` with features (col / bi_xy_std, row / bi_xy_std, I_0 / bi_rgb_std,
    I_1 / bi_rgb_std, I_2 / bi_rgb_std), I the three channels of bottom 2 as given (BGR, mean
    subtracted, unscaled); n_k = 1 / (K_k 1 + 1e-20). K is the fork's permutohedral lattice,
    whose arithmetic is CRF-as-RNN's (:mod:`.permutohedral`, the same lattice code of
    Krähenbühl's, SSE build), and softmax uses the fork's polynomial ``fast_exp``
    (:func:`fast_exp`).
    Top: Q_T (``output_probability: true``) or log(max(Q_T, FLT_MIN)), 0 outside the effective
    region. The fork reads the image of bottom 2 at num 0 for every image of the batch (its
    ``im = bottom[2]->cpu_data()`` has no per-image offset); caffepy does the same.
    Backward: none; the fork's Backward_cpu is empty (``//NOT_IMPLEMENTED``), bottom diffs are not
    written, and so here.
    Checked against the fork's permutohedral.cpp, densecrf_pairwise.cpp and fast_exp compiled with
    a driver running this loop (SSE build): probabilities within 3e-6, the same label maps, on
    maps of up to 30 x 37 pixels and 21 classes.

    prototxt: ``dense_crf_param { max_iter: 10 pos_xy_std* pos_w* (as many) bi_xy_std* bi_rgb_std*
    bi_w* (as many) output_probability: true }``. Bottoms: scores (N x M x H x W), data_dims
    (N x ... with height, width first), optionally the image (N x 3 x H x W; needs bi_* set).
    Top: N x M x H x W. (The fork's Reshape reads bottom[2] even when only two bottoms are given,
    so a two-bottom net does not run there; caffepy runs one that sets dense_crf_param with the
    positional kernels only; two bottoms without dense_crf_param build caffe-ccnn's variant.)
    """
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.dense_crf_param
        self.max_iter = int(p.max_iter)
        self.pos = list(zip(p.pos_w, p.pos_xy_std))
        self.bi = list(zip(p.bi_w, p.bi_xy_std, p.bi_rgb_std))
        if len(p.pos_w) != len(p.pos_xy_std):
            raise self.error("pos_w and pos_xy_std must have the same number of values")
        if not len(p.bi_w) == len(p.bi_xy_std) == len(p.bi_rgb_std):
            raise self.error("bi_w, bi_xy_std and bi_rgb_std must have the same number of values")
        self.has_image = len(bottom) == 3
        if self.has_image and not self.bi:
            raise self.error("an image bottom is given but no bilateral parameters (bi_w ...)")
        self.prob = bool(p.output_probability)

    def reshape(self, bottom, top):
        x, dims = bottom[0], bottom[1]
        if x.num_axes != 4:
            raise self.error("the scores must be N x M x H x W, got %s" % (x.shape,), ShapeError)
        if dims.shape[0] != x.shape[0] or dims.count < 2 * x.shape[0]:
            raise self.error("data_dims %s must hold (height, width) for each of the %d images"
                             % (dims.shape, x.shape[0]), ShapeError)
        if self.has_image:
            want = (x.shape[0], 3) + tuple(x.shape[2:])
            if tuple(bottom[2].shape) != want:
                raise self.needs("the image must be %s (3 channels, the scores' size), got %s"
                                 % (want, bottom[2].shape), [(2, want, None)])
        top[0].reshape(x.shape)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        N, M, PH, PW = x.shape
        dims = bottom[1].data.reshape(N, -1)
        out = top[0].data
        out[...] = 0
        for n in range(N):
            rh, rw = int(dims[n, 0]), int(dims[n, 1])
            H, W = (PH, PW) if (PH <= rh and PW <= rw) else (rh, rw)
            if not (0 < H <= PH and 0 < W <= PW):
                raise self.error("data_dims of image %d are %d x %d; the scores are %d x %d"
                                 % (n, rh, rw, PH, PW))
            q = self._infer(x[n, :, :H, :W], bottom[2].data[0, :, :H, :W] if self.has_image
                            else None)
            q = q.T.reshape(M, H, W)
            out[n, :, :H, :W] = q if self.prob else np.log(np.maximum(q, _FLT_MIN))

    def _infer(self, scores, image):
        M, H, W = scores.shape
        unary = -scores.reshape(M, -1).T.astype(np.float32)        # P x M, pixel-major
        rows, cols = np.mgrid[0:H, 0:W].astype(np.float32)
        xy = np.stack([cols.ravel(), rows.ravel()], axis=1)
        potentials = [_Potts(xy / np.float32(s), w) for w, s in self.pos]
        if image is not None:
            rgb = image.reshape(3, -1).T.astype(np.float32)
            potentials += [_Potts(np.concatenate([xy / np.float32(sxy), rgb / np.float32(srgb)],
                                                 axis=1), w) for w, sxy, srgb in self.bi]
        q = _exp_normalize(unary, -1.0)
        for _ in range(self.max_iter):
            nxt = -unary
            for pot in potentials:
                pot.apply(nxt, q)
            q = _exp_normalize(nxt, 1.0)
        return q

    def backward_cpu(self, top, propagate_down, bottom):
        """Nothing, as the fork's empty Backward_cpu."""


@register_variant("DenseCRF", lambda lp: lp.HasField("densecrf_param") or (
    len(lp.bottom) == 2 and not lp.HasField("dense_crf_param")))
class CCNNDenseCRFLayer(Layer):
    """pathak22/caffe-ccnn's DenseCRF: 10 mean-field iterations of Krähenbühl's DenseCRF2D, then
    the label map. Built when the layer sets ``densecrf_param``, or has two bottoms and no
    ``dense_crf_param`` (DeepLab's layer reads a third bottom even when given two, so a DeepLab
    net has three).

    Per image: U = -x (bottom 0, the scores), one Gaussian term with features (col / x_gauss,
    row / y_gauss) and weight wt_gauss, one bilateral term with (col / x_bilateral,
    row / y_bilateral, R / r_bilateral, G / g_bilateral, B / b_bilateral) and weight
    wt_bilateral, the colours being bottom 1's channels 2, 1, 0 (Caffe's BGR to RGB) converted to
    unsigned char as the fork's cast does on x86 (the integer part, modulo 256). The mean field is
    DeepLab's (:class:`DenseCRFLayer`: same lattice, normalisation, fast_exp softmax), with
    max_iter 10. Top: the first most probable label of each pixel.

    prototxt: ``densecrf_param { x_gauss: 3 y_gauss: 3 wt_gauss: 3 x_bilateral: 60
    y_bilateral: 60 r_bilateral: 20 g_bilateral: 20 b_bilateral: 20 wt_bilateral: 10 }``.
    Bottoms: scores (N x M x H x W), image (N x 3 x H x W; the fork's one-channel case reads past
    its buffer and is refused here). Top: N x 1 x H x W. No backward (the fork has none).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.densecrf_param
        self.gauss = (p.x_gauss, p.y_gauss, p.wt_gauss)
        self.bilateral = (p.x_bilateral, p.y_bilateral, p.r_bilateral, p.g_bilateral,
                          p.b_bilateral, p.wt_bilateral)

    def reshape(self, bottom, top):
        x, im = bottom
        if x.num_axes != 4 or im.num_axes != 4:
            raise self.error("scores and image must be 4-D, got %s and %s" % (x.shape, im.shape),
                             ShapeError)
        want = (x.shape[0], 3) + tuple(x.shape[2:])
        if tuple(im.shape) != want:
            raise self.needs("the image must be %s (3 channels, the scores' num and size), got %s"
                             % (want, im.shape), [(1, want, None)])
        top[0].reshape((x.shape[0], 1) + tuple(x.shape[2:]))

    def forward_cpu(self, bottom, top):
        x, im = bottom[0].data, bottom[1].data
        N, M, H, W = x.shape
        rows, cols = np.mgrid[0:H, 0:W].astype(np.float32)
        sx, sy, w = (np.float32(v) for v in self.gauss)
        gauss = np.stack([cols.ravel() / sx, rows.ravel() / sy], axis=1)
        bx, by, br, bg, bb, bw = (np.float32(v) for v in self.bilateral)
        for n in range(N):
            rgb = (np.trunc(im[n, ::-1]).astype(np.int64) & 0xFF).reshape(3, -1).T
            feat = np.concatenate([np.stack([cols.ravel() / bx, rows.ravel() / by], axis=1),
                                   rgb.astype(np.float32) / np.array([br, bg, bb])], axis=1)
            potentials = [_Potts(gauss, w), _Potts(feat.astype(np.float32), bw)]
            unary = -x[n].reshape(M, -1).T.astype(np.float32)
            q = _exp_normalize(unary, -1.0)
            for _ in range(10):
                nxt = -unary
                for pot in potentials:
                    pot.apply(nxt, q)
                q = _exp_normalize(nxt, 1.0)
            top[0].data[n, 0] = np.argmax(q, axis=1).reshape(H, W)

    def backward_cpu(self, top, propagate_down, bottom):
        """Nothing: the fork's layer has no backward."""
