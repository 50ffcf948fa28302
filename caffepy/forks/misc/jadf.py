"""The bilinear-feature layers of BOBrown/JADF-caffe (also He-Zhenwei/MAF): OuterProduct and
RandomMaclaurin (a random-projection approximation of it). Both are GPU-only in the fork (empty
CPU methods); these are its GPU paths, including their backward, which zeroes the gradient of
the first bottom."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


def _check_pair(layer, bottom):
    a, b = bottom
    for i, blob in enumerate(bottom):
        if blob.num_axes < 2 or blob.count_range(2) != 1:
            raise layer.error("bottom[%d] must be N x D (trailing axes of size 1), got shape %s"
                              % (i, blob.shape), ShapeError)
    if a.shape[0] != b.shape[0]:
        raise layer.shape_mismatch("the bottoms need one num (%s vs %s)" % (a.shape, b.shape),
                                   1, 0, bottom)


@register_layer("OuterProduct")
class OuterProductLayer(Layer):
    """Per-sample outer product (BOBrown/JADF-caffe, src/caffe/layers/outerproduct_layer.cu):
    for a (N x A) and b (N x B), top N x 1 x A x B,

        y[n, 0, i, j] = a[n, i] b[n, j]
        dL/db[n, j] = sum_i dL/dy[n, 0, i, j] a[n, i];   dL/da = 0

    The fork's backward computes dL/da and then scales it by 0 / 256, so the first bottom gets a
    zero gradient (kept here). No prototxt fields.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        _check_pair(self, bottom)
        top[0].reshape((bottom[0].shape[0], 1, bottom[0].shape[1], bottom[1].shape[1]))

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        a, b = bottom[0].data.reshape(n, -1), bottom[1].data.reshape(n, -1)
        top[0].data[...] = (a[:, :, None] * b[:, None, :])[:, None]

    def backward_cpu(self, top, propagate_down, bottom):
        n = bottom[0].shape[0]
        dy = top[0].diff.reshape(n, bottom[0].shape[1], bottom[1].shape[1])
        if propagate_down[0]:
            bottom[0].diff[...] = 0
        if propagate_down[1]:
            a = bottom[0].data.reshape(n, -1)
            bottom[1].diff[...] = np.einsum("nij,ni->nj", dy, a).reshape(bottom[1].shape)


@register_layer("RandomMaclaurin")
class RandomMaclaurinLayer(Layer):
    """Random Maclaurin projection of a pair of features (BOBrown/JADF-caffe,
    src/caffe/layers/random_maclaurin_layer.cu). For x1 (N x A), x2 (N x B) and K = num_output:

        y = (x1 W1) * (x2 W2) / f     (element-wise product; top N x K)
        dL/dx2 = ((dL/dy * x1 W1) W2^T) / f;   dL/dx1 = 0;   W1, W2 get zero diffs

    (the fork's backward scales dL/dx1 by 0 / f and sets the parameter diffs to 0). W1 (A x K)
    and W2 (B x K) are the layer's parameter blobs, drawn at the first reshape and again at
    every (epoch_size + 1)-th reshape after a draw (one reshape per forward; epoch_size 0: at
    every forward):
    ``distribution_type`` "bernoulli": entries 0 or 1 with p = 0.5, f = K; "gaussian":
    N(0, std1) and N(0, std2), f = K std1 std2; "uniform": U(a1, b1) and U(a2, b2),
    f = K b1 b2 / 3. prototxt: ``random_maclaurin_param { num_output: 1 distribution_type:
    "bernoulli" std1 std2 a1 b1 a2 b2 epoch_size: 0 }``; ``random_every_epoch`` and
    ``fixed_matrix`` are not read by the fork's layer (random_maclaurin_layer.cpp reads only the
    fields above) and change nothing. The draws use caffepy's random stream, not Caffe's.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.random_maclaurin_param
        self.k = int(p.num_output)
        self.kind = p.distribution_type
        factors = {"bernoulli": self.k, "gaussian": self.k * p.std1 * p.std2,
                   "uniform": self.k * p.b1 * p.b2 / 3.0}
        if self.kind not in factors:
            raise self.error('random_maclaurin_param.distribution_type must be "bernoulli", '
                             '"gaussian" or "uniform", got "%s"' % self.kind)
        self.factor = float(factors[self.kind])
        _check_pair(self, bottom)
        self.blobs = [self.new_blob((bottom[i].shape[1], self.k)) for i in (0, 1)]
        self.param_propagate_down = [True, True]
        self.epoch_size = int(p.epoch_size)
        self.progress = self.epoch_size + 1

    def _draw(self):
        p, rng = self.layer_param.random_maclaurin_param, self.rng()
        for blob, (lo, hi, std) in zip(self.blobs, ((p.a1, p.b1, p.std1), (p.a2, p.b2, p.std2))):
            if self.kind == "bernoulli":
                values = rng.random(blob.shape) < 0.5
            elif self.kind == "gaussian":
                values = rng.normal(0.0, std, blob.shape)
            else:
                values = rng.uniform(lo, hi, blob.shape)
            blob.data[...] = values

    def reshape(self, bottom, top):
        _check_pair(self, bottom)
        for i, blob in enumerate(self.blobs):
            if blob.shape[0] != bottom[i].shape[1]:
                raise self.error("bottom[%d] has %d features, the projection %d"
                                 % (i, bottom[i].shape[1], blob.shape[0]), ShapeError)
        top[0].reshape((bottom[0].shape[0], self.k))
        if self.progress > self.epoch_size:
            self.progress = 0
            self._draw()
        self.progress += 1

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        self.p1 = bottom[0].data.reshape(n, -1) @ self.blobs[0].data
        self.p2 = bottom[1].data.reshape(n, -1) @ self.blobs[1].data
        top[0].data[...] = self.p1 * self.p2 / self.factor

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff
        if propagate_down[0]:
            bottom[0].diff[...] = 0
        if propagate_down[1]:
            g = (dy * self.p1) @ self.blobs[1].data.T / self.factor
            bottom[1].diff[...] = g.reshape(bottom[1].shape)
        for blob in self.blobs:
            blob.diff[...] = 0
