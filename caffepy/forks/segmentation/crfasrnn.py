"""CRF-as-RNN (torrvision/crfasrnn, its caffe torrvision/caffe): ``MultiStageMeanfield``.

Its V1 files (``type: MULTI_STAGE_MEANFIELD``, ``type: CROP``) load through
``caffepy.proto.upgrade`` (``caffepy.proto.v1_crop`` for the coordinate-map crop).
"""
import logging

import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer
from .permutohedral import Lattice

log = logging.getLogger(__name__)

#: Images of up to this many pixels are filtered exactly with dense P x P Gaussian kernels
#: (O(P^2): 2 x 4096^2 float64 = 256 MiB at the limit); larger ones with the fork's
#: permutohedral lattice (O(P), approximate).
MAX_PIXELS = 4096
#: Above MAX_PIXELS the layer computes in float32, as the fork does for a float net (its lattice
#: values are float whatever the Dtype); up to it, in float64.
LATTICE_DTYPE = np.float32


def _gaussian_kernel(feat):
    """K[p, q] = exp(-|f_p - f_q|^2 / 2) for features (P, d)."""
    sq = np.sum(feat * feat, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * feat @ feat.T, 0.0)
    return np.exp(-0.5 * d2)


def _softmax(q):
    """Softmax over the classes of a C x P map."""
    e = np.exp(q - q.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


@register_layer("MultiStageMeanfield")
class MultiStageMeanfieldLayer(Layer):
    """Mean-field inference of a dense CRF unrolled as T iterations (Zheng et al., ICCV 2015).

    Per image, with P = H x W pixels and C classes (Q_{-1} = bottom 1, U = bottom 0):
      prob = softmax_C(Q_{t-1})
      S = n_s * (K_s prob),  K_s[p, q] = exp(-|(x_p - x_q, y_p - y_q)|^2 / (2 theta_gamma^2))
      B = n_b * (K_b prob),  K_b[p, q] = exp(-|pos_p - pos_q|^2 / (2 theta_alpha^2)
                                             - |rgb_p - rgb_q|^2 / (2 theta_beta^2))
      (n = 1 / (K 1 + 1e-20): each filter is normalised, as the fork's lattice norms)
      Q_t = U - W_c (W_s S + W_b B)           t = 0 .. T-1; top = Q_{T-1} (not normalised)
    x is the column, y the row, rgb the first three channels of bottom 2 as given (no scaling).
    Backward (the fork's): dU = sum_t dQ_t; dW_c = sum -dQ_t M_t^T (M_t = W_s S + W_b B);
    dW_s, dW_b likewise; d prob = K_s (n_s * W_s^T dM) + K_b (n_b * W_b^T dM) (K symmetric),
    through the softmax into Q_{t-1} and at t = 0 into bottom 1. The image gets no gradient.

    Filters. The fork filters with a permutohedral lattice (:mod:`.permutohedral`, its
    modified_permutohedral.cpp): K x is approximated by splat / blur / slice, normalised by
    n = 1 / (lattice(1) + 1e-20), and the backward pass runs the transposed lattice filter (blur
    axes in reverse order), which is the exact gradient of that forward. caffepy does the same for
    images of more than ``MAX_PIXELS`` (4096) pixels (one INFO line says so), and below it uses
    the exact dense Gaussian kernels instead: there the two differ by the lattice's approximation
    error (on natural-image-like inputs a few percent of the normalised filter output; see
    tests/forks/segmentation/test_crfasrnn.py), and caffepy's numbers are the exact mean-field
    ones. The spatial lattice is built once per image size (the fork: at setup), the bilateral
    one per image and forward; that path computes in float32 (``LATTICE_DTYPE``) as the fork's
    lattice does, the dense one in float64.

    prototxt: ``multi_stage_meanfield_param { num_iterations (> 1; default 1, so it must be set)
    theta_alpha: 10 theta_beta: 10 theta_gamma: 10 compatibility_mode: POTTS threshold
    spatial_filter_weight: 1 bilateral_filter_weight: 1 [spatial_filter_weights_str /
    bilateral_filter_weights_str: "w_1 ... w_C"] force_cpu }``. ``threshold`` and ``force_cpu``
    change nothing on the CPU path (the fork does not read threshold). Blobs (given by the
    caffemodel): W_s, W_b, W_c, each 1 x 1 x C x C. The fork initialises W_s / W_b diagonals from
    files spatial.par / bilateral.par in the working directory; caffepy from the
    ``*_filter_weights_str`` fields (one weight per class) when set, else from
    ``spatial_filter_weight`` / ``bilateral_filter_weight``; W_c = -I (POTTS).
    Bottoms: unary (N x C x H x W), Q0 (same), image (N x >=3 x H x W). Top: N x C x H x W.
    """
    exact_num_bottom_blobs = 3
    exact_num_top_blobs = 1
    #: The LayerParameter field holding the layer's parameters.
    param_field = "multi_stage_meanfield_param"
    #: The fewest channels bottom 2 may have (its first three are the bilateral filter's colour).
    min_guide_channels = 3

    def layer_setup(self, bottom, top):
        p = getattr(self.layer_param, self.param_field)
        self.iterations = int(p.num_iterations)
        if self.iterations <= 1:
            raise self.error("num_iterations must be greater than 1 (as the fork), got %d"
                             % self.iterations)
        self.alpha, self.beta, self.gamma = float(p.theta_alpha), float(p.theta_beta), \
            float(p.theta_gamma)
        if min(self.alpha, self.beta, self.gamma) <= 0:
            raise self.error("theta_alpha, theta_beta and theta_gamma must be positive")
        if bottom[0].num_axes != 4:
            raise self.error("unary must be N x C x H x W, got %s" % (bottom[0].shape,), ShapeError)
        C = bottom[0].shape[1]
        if self.blobs:
            for i, b in enumerate(self.blobs):
                if b.count != C * C:
                    raise self.error("parameter blob %d has %d values; expected %d x %d"
                                     % (i, b.count, C, C), ShapeError)
            if len(self.blobs) != 3:
                raise self.error("expected 3 parameter blobs, got %d" % len(self.blobs))
            return
        diag = []
        for name, scalar in (("spatial_filter_weights_str", p.spatial_filter_weight),
                             ("bilateral_filter_weights_str", p.bilateral_filter_weight)):
            text = getattr(p, name, "")
            if text:
                try:
                    w = [float(v) for v in text.split()]
                except ValueError:
                    raise self.error("%s must be numbers separated by spaces, got %r"
                                     % (name, text))
                if len(w) != C:
                    raise self.error("%s has %d weights; expected one per class (%d)"
                                     % (name, len(w), C))
            else:
                w = [float(scalar)] * C
            diag.append(w)
        self.blobs = [self.new_blob((1, 1, C, C)) for _ in range(3)]
        for b, w in zip(self.blobs, diag + [[-1.0] * C]):
            b.data[0, 0] = np.diag(w)

    def reshape(self, bottom, top):
        u, q0, img = bottom
        if u.num_axes != 4 or q0.shape != u.shape:
            raise self.error("unary %s and Q0 %s must be the same N x C x H x W"
                             % (u.shape, q0.shape), ShapeError)
        if img.num_axes != 4 or img.shape[0] != u.shape[0] or img.shape[2:] != u.shape[2:] \
                or img.shape[1] < self.min_guide_channels:
            raise self.error("image %s must be N x >=%d x H x W with the unary's N, H, W %s"
                             % (img.shape, self.min_guide_channels, u.shape), ShapeError)
        top[0].reshape(u.shape)

    def _guide(self, img_n, P):
        """The bilateral filter's features besides the position, P x d (before 1 / theta_beta)."""
        return img_n[:3].reshape(3, P).T.astype(np.float64)

    def _filters(self, img_n, H, W):
        """[(K x, K^T x, n)] for the spatial and the bilateral filter of one image."""
        P = H * W
        y, x = np.divmod(np.arange(P, dtype=np.float64), W)
        pos = np.stack([x, y], axis=1)
        rgb = self._guide(img_n, P)
        if P <= MAX_PIXELS:
            out = []
            for feat in (pos / self.gamma,
                         np.concatenate([pos / self.alpha, rgb / self.beta], axis=1)):
                k = _gaussian_kernel(feat)
                apply = (lambda v, k=k: (k @ v.T).T)
                out.append((apply, apply, 1.0 / (k.sum(axis=1) + 1e-20)))
            return out
        if not getattr(self, "_said_lattice", False):
            log.info("layer '%s' (%s): %d x %d = %d pixels > %d: filtering with "
                     "the fork's permutohedral lattice (approximate Gaussian), not the exact "
                     "dense filter", self.layer_param.name, self.layer_param.type, H, W, P,
                     MAX_PIXELS)
            self._said_lattice = True
        bil = np.concatenate([pos.astype(np.float32) / np.float32(self.alpha),
                              (rgb / self.beta).astype(np.float32)], axis=1)
        try:
            if getattr(self, "_spatial_key", None) != (H, W):
                # the fork's features: float32 (x / theta, y / theta[, rgb / theta_beta])
                self._spatial = Lattice(pos.astype(np.float32) / np.float32(self.gamma))
                self._spatial_key = (H, W)
            lattices = (self._spatial, Lattice(bil))
        except ValueError as e:
            raise self.error("permutohedral lattice: %s" % e)
        out = []
        for lat in lattices:
            def filt(v, lat=lat, reverse=False):
                return lat.compute(v.astype(LATTICE_DTYPE, copy=False), reverse)
            out.append((filt, lambda v, filt=filt: filt(v, reverse=True),
                        1 / (filt(np.ones(P, LATTICE_DTYPE)) + LATTICE_DTYPE(1e-20))))
        return out

    def _dtype(self, H, W):
        return np.float64 if H * W <= MAX_PIXELS else LATTICE_DTYPE

    def forward_cpu(self, bottom, top):
        N, C, H, W = bottom[0].shape
        dt = self._dtype(H, W)
        u, q0 = (b.data.astype(dt) for b in bottom[:2])
        img = bottom[2].data.astype(np.float64)
        Ws, Wb, Wc = (b.data.reshape(C, C).astype(dt) for b in self.blobs)
        self.cache = []
        out = np.empty_like(u)
        for n in range(N):
            kern = self._filters(img[n], H, W)
            steps, q = [], q0[n].reshape(C, -1)
            un = u[n].reshape(C, -1)
            for _ in range(self.iterations):
                prob = _softmax(q)
                s, b = (filt(prob) * norm for filt, _, norm in kern)
                m = Ws @ s + Wb @ b
                q = un - Wc @ m
                steps.append((prob, s, b, m))
            out[n] = q.reshape(C, H, W)
            self.cache.append((kern, steps))
        top[0].data[...] = out

    def backward_cpu(self, top, propagate_down, bottom):
        N, C, H, W = bottom[0].shape
        dt = self._dtype(H, W)
        Ws, Wb, Wc = (b.data.reshape(C, C).astype(dt) for b in self.blobs)
        dW = [np.zeros((C, C)) for _ in range(3)]
        du = np.zeros((N, C, H * W), dt)
        dq0 = np.zeros((N, C, H * W), dt)
        for n in range(N):
            kern, steps = self.cache[n]
            dq = top[0].diff[n].reshape(C, -1).astype(dt)
            for prob, s, b, m in reversed(steps):
                du[n] += dq
                dpair = -dq
                dW[2] += dpair @ m.T
                dm = Wc.T @ dpair
                dW[0] += dm @ s.T
                dW[1] += dm @ b.T
                dprob = sum(filt_t((W_.T @ dm) * norm)
                            for (_, filt_t, norm), W_ in zip(kern, (Ws, Wb)))
                dq = prob * (dprob - np.sum(dprob * prob, axis=0, keepdims=True))
            dq0[n] = dq
        if propagate_down[0]:
            bottom[0].diff[...] = du.reshape(bottom[0].shape)
        if propagate_down[1]:
            bottom[1].diff[...] = dq0.reshape(bottom[1].shape)
        for blob, d in zip(self.blobs, dW):
            blob.diff[...] += d.reshape(blob.shape)
