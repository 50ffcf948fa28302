"""DeViSE (Qi-Xian/DeVise, also gtlim/Ahra): the visual-semantic embedding's LinearTransform and
Similarity, and the viewpoint accuracy PoseAccuracy (caffe/src/caffe/layers/
linear_transform_layer.cpp / .cu, similarity_layer.cpp / .cu, pose_accuracy_layer.cpp).
"""
import logging

import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, fork_param, register_layer

_log = logging.getLogger(__name__)


@register_layer("LinearTransform")
class LinearTransformLayer(Layer):
    """An InnerProduct without bias: y = x W^T, x flattened from ``axis`` (M x K), W N x K.
    dW += dy^T x (accumulated); dx = dy W, written only with ``backprop`` (default true; false
    keeps the bottom's diff, for fixed word vectors). ``verbose`` logs |W|^2 at train-phase
    reshapes (the fork's only use of it: logging). prototxt: ``linear_transform_param {
    num_output weight_filler axis: 1 backprop: true verbose: false }``. Top: the bottom's shape
    up to ``axis``, then N.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "linear_transform_param")
        self.axis = bottom[0].canonical_axis_index(p.axis)
        self.n, self.k = int(p.num_output), bottom[0].count_range(self.axis)
        self.backprop, self.verbose = bool(p.backprop), bool(p.verbose)
        if self.n <= 0:
            raise self.error("linear_transform_param.num_output must be > 0")
        self.init_param_blobs([(self.n, self.k)], p.weight_filler)
        self.param_propagate_down = [True]

    def reshape(self, bottom, top):
        self.axis = bottom[0].canonical_axis_index(
            fork_param(self.layer_param, "linear_transform_param").axis)
        if bottom[0].count_range(self.axis) != self.k:
            raise self.error("bottom %s gives %d inputs from axis %d; the weights take %d"
                             % (bottom[0].shape, bottom[0].count_range(self.axis), self.axis,
                                self.k), ShapeError)
        self.m = bottom[0].count_range(0, self.axis)
        top[0].reshape(*(tuple(bottom[0].shape[:self.axis]) + (self.n,)))
        if self.verbose and self.phase == 0 and getattr(self.blobs[0], "allocated", True):
            _log.info("%s: ||W||: %g", self.layer_param.name,
                      float(np.sum(np.square(self.blobs[0].data))))

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(self.m, self.k)
        top[0].data.reshape(self.m, self.n)[...] = x @ self.blobs[0].data.T

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff.reshape(self.m, self.n)
        if self.param_propagate_down[0]:
            self.blobs[0].diff += dy.T @ bottom[0].data.reshape(self.m, self.k)
        if propagate_down[0] and self.backprop:
            bottom[0].diff.reshape(self.m, self.k)[...] = dy @ self.blobs[0].data


@register_layer("Similarity")
class SimilarityLayer(Layer):
    """Dot products of features with prototypes: y = x P^T, x M x K (bottom 0, M its num), P
    N x K (bottom 1, N its num); top M x N. dx = dy P, dP = dy^T x (the fork overwrites both
    diffs). Bottoms must have the same channel count. No parameters (the fork's
    ``similarity_param { mode }`` is not read). caffe-simnets' Similarity (templates as
    parameters, one top per bottom) is another layer, not built here.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        x, p = bottom
        if x.num_axes > 4 or p.num_axes > 4 or x.channels != p.channels:
            raise self.error("dimension is not compatible: %s and %s (same channels, at most 4 "
                             "axes)" % (x.shape, p.shape), ShapeError)
        self.m, self.n = x.num, p.num
        self.k = p.count // max(self.n, 1)
        if x.count != self.m * self.k:
            raise self.error("bottom[0] %s does not hold %d features of %d values"
                             % (x.shape, self.m, self.k), ShapeError)
        top[0].reshape(self.m, self.n)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(self.m, self.k)
        top[0].data[...] = x @ bottom[1].data.reshape(self.n, self.k).T

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff
        if propagate_down[0]:
            bottom[0].diff.reshape(self.m, self.k)[...] = dy @ bottom[1].data.reshape(
                self.n, self.k)
        if propagate_down[1]:
            bottom[1].diff.reshape(self.n, self.k)[...] = dy.T @ bottom[0].data.reshape(
                self.m, self.k)


_THRESH, _PI = 0.5236, 3.14159265          # the fork's constants


def _unit_vectors(azimuth, elevation):
    """The fork's compute_distance points, stored in float: degrees (its PI) to (x, y, z)."""
    a, e = np.float64(azimuth) * _PI / 180.0, np.float64(elevation) * _PI / 180.0
    return np.stack([np.cos(a) * np.sin(e), np.sin(e) * np.sin(a), np.cos(e)]).astype(np.float32)


@register_layer("PoseAccuracy")
class PoseAccuracyLayer(Layer):
    """Top-k viewpoint accuracy. Bottoms: scores (outer x C x inner along ``axis``), azimuth and
    elevation labels (one per outer x inner position, truncated to int), and the C classes'
    (azimuth, elevation) table (C x 2, truncated to int). Per position the k best classes are
    the k smallest scores (``mode: "distance"``; ties: the smaller class first) or the k largest
    (``"similarity"``; ties: the larger class first), or, for another mode, the first k classes
    (the fork warns and does not sort). The position counts when one of them matches: ``version:
    "exact"``, the same azimuth and elevation; ``"thresh"``, chord distance <= 0.5236 between
    the unit vectors at (azimuth, elevation + 90) degrees (float, as the fork); another version
    counts nothing (with the fork's warning). Top: the count over all positions, a scalar.
    prototxt: ``pose_accuracy_param { top_k: 1 axis: 1 mode version }``. No backward (the fork
    stops on a request). One top: the fork never shapes a second.
    """
    exact_num_bottom_blobs = 4
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "pose_accuracy_param")
        self.k, self.mode, self.version = int(p.top_k), p.mode, p.version
        self.axis_param = p.axis
        for what, v, known in (("mode", self.mode, ("distance", "similarity")),
                               ("version", self.version, ("thresh", "exact"))):
            if v not in known:
                _log.warning("%s: pose_accuracy_param.%s %r is neither %s nor %s: as the fork, %s",
                             self.layer_param.name, what, v, known[0], known[1],
                             "the classes stay unsorted" if what == "mode" else
                             "no position counts")

    def reshape(self, bottom, top):
        s = bottom[0]
        if self.k > s.count // max(bottom[1].count, 1):
            raise self.error("top_k must be less than or equal to the number of classes")
        self.axis = s.canonical_axis_index(self.axis_param)
        self.outer, self.inner = s.count_range(0, self.axis), s.count_range(self.axis + 1)
        for i in (1, 2):
            if bottom[i].count != self.outer * self.inner:
                raise self.error("bottom[%d] holds %d labels for %d predictions"
                                 % (i, bottom[i].count, self.outer * self.inner), ShapeError)
        if bottom[3].count < 2 * s.shape[self.axis]:
            raise self.error("bottom[3] needs an (azimuth, elevation) row per class (%d), got %s"
                             % (s.shape[self.axis], bottom[3].shape), ShapeError)
        top[0].reshape(())

    def _ranked(self, scores):
        """Class order per row of ``scores`` (positions x C)."""
        c = scores.shape[1]
        if self.mode == "distance":
            return np.lexsort((np.broadcast_to(np.arange(c), scores.shape), scores), axis=1)
        if self.mode == "similarity":
            return np.lexsort((np.broadcast_to(np.arange(c), scores.shape), scores),
                              axis=1)[:, ::-1]
        return np.broadcast_to(np.arange(c), scores.shape)

    def forward_cpu(self, bottom, top):
        c = bottom[0].shape[self.axis]
        scores = np.moveaxis(bottom[0].data.reshape(self.outer, c, self.inner), 1, 2)
        scores = scores.reshape(-1, c)
        azi = np.trunc(bottom[1].data.reshape(-1)).astype(np.int64)
        ele = np.trunc(bottom[2].data.reshape(-1)).astype(np.int64)
        table = np.trunc(bottom[3].data.reshape(-1)[:2 * c].reshape(c, 2)).astype(np.int64)
        picked = self._ranked(scores)[:, :self.k]
        pa, pe = table[picked, 0], table[picked, 1]
        if self.version == "exact":
            hit = (pa == azi[:, None]) & (pe == ele[:, None])
        elif self.version == "thresh":
            d = _unit_vectors(pa, pe + 90) - _unit_vectors(azi, ele + 90)[:, :, None]
            dist = np.sqrt(np.sum(d * d, axis=0, dtype=np.float32).astype(np.float64))
            hit = dist.astype(np.float32).astype(np.float64) <= _THRESH
        else:
            hit = np.zeros(picked.shape, bool)
        top[0].data[...] = np.count_nonzero(hit.any(axis=1)) / float(scores.shape[0])
