"""Bilinear pooling of the compact-bilinear forks (shizenglin/Deep-NCL's files, read here;
JoeFannie/Label85 registers the same types; Yang Gao's compact bilinear pooling): Bilinear (the
full outer product summed over positions) and CompactBilinear (its Tensor Sketch
approximation). Their SignedSqrt and L2Normalize are in :mod:`caffepy.forks.misc.activations`."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


def glibc_rand(seed, count):
    """The first ``count`` values of glibc's rand() after srand(seed) (its TYPE_3 additive
    feedback generator), which the fork draws its sketch hashes from."""
    r = [seed & 0xffffffff]
    for i in range(1, 31):
        hi, lo = divmod(r[i - 1] if r[i - 1] < 2 ** 31 else r[i - 1] - 2 ** 32, 127773)
        word = 16807 * lo - 2836 * hi
        if word < 0:
            word += 2147483647
        r.append(word)
    for i in range(31, 34):
        r.append(r[i - 31])
    out = []
    i = 34
    while len(out) < count + 310:
        r.append((r[i - 31] + r[i - 3]) & 0xffffffff)
        if i >= 344:
            out.append(r[i] >> 1)
        i += 1
    return out[:count]


def _check_pair(layer, bottom, top):
    for i in (0, 1):
        if bottom[i].num_axes != 4:
            raise layer.error("bottom[%d] must be N x C x H x W, got shape %s"
                              % (i, bottom[i].shape), ShapeError)
    a, b = bottom
    if (a.shape[0], a.shape[2], a.shape[3]) != (b.shape[0], b.shape[2], b.shape[3]):
        raise layer.needs("the bottoms may differ in channels only (%s vs %s)"
                          % (a.shape, b.shape),
                          [(1, (a.shape[0], b.shape[1]) + tuple(a.shape[2:]), None)])
    if top[0] is a or top[0] is b:
        raise layer.error("cannot run in place")


@register_layer("Bilinear")
class BilinearLayer(Layer):
    """Bilinear pooling (shizenglin/Deep-NCL, src/caffe/layers/bilinear_layer.cpp): for
    a (N x C1 x H x W) and b (N x C2 x H x W), with A_n, B_n their C x HW matrices,

        y_n = A_n B_n^T   (top N x (C1 C2) x 1 x 1, row-major over (C1, C2))
        dL/dA_n = dY_n B_n;   dL/dB_n = dY_n^T A_n

    No prototxt fields.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        _check_pair(self, bottom, top)
        a, b = bottom
        top[0].reshape((a.shape[0], a.shape[1] * b.shape[1], 1, 1))

    def _mats(self, bottom):
        n = bottom[0].shape[0]
        return (bottom[0].data.reshape(n, bottom[0].shape[1], -1),
                bottom[1].data.reshape(n, bottom[1].shape[1], -1))

    def forward_cpu(self, bottom, top):
        a, b = self._mats(bottom)
        top[0].data[...] = np.matmul(a, b.transpose(0, 2, 1)).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        a, b = self._mats(bottom)
        dy = top[0].diff.reshape(a.shape[0], a.shape[1], b.shape[1])
        if propagate_down[0]:
            bottom[0].diff[...] = np.matmul(dy, b).reshape(bottom[0].shape)
        if propagate_down[1]:
            bottom[1].diff[...] = np.matmul(dy.transpose(0, 2, 1), a).reshape(bottom[1].shape)


@register_layer("CompactBilinear")
class CompactBilinearLayer(Layer):
    """Compact bilinear pooling by Tensor Sketch (shizenglin/Deep-NCL,
    src/caffe/layers/compact_bilinear_layer.cpp). With D = num_output, each bottom k is sketched at
    every position: channel c adds s_k[c] x[c] into bin h_k[c] (h in [0, D), s = +-1), and

        y[:, p] = D * circular_convolution(sketch_0[:, p], sketch_1[:, p])
        (the fork multiplies the two FFTs and takes an unnormalised inverse FFT, hence D)
        top N x D x 1 x 1 summed over positions (sum_pool: true), else N x D x H x W
        dL/dx_k[c, p] = s_k[c] D * circular_correlation(dL/dy[:, p], sketch_other[:, p])[h_k[c]]

    h and s are the fork's: after srand(1), glibc rand() gives h_0 (C1 values rand() % D), s_0
    (C1 values 2 (rand() % 2) - 1), then h_1 and s_1 (the fork reseeds at every reshape, so
    they never change). prototxt: ``compact_bilinear_param { num_output: <even, required>
    sum_pool: true }`` (the fork's CPU path refuses an odd num_output). Not in place.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.compact_bilinear_param
        if not p.HasField("num_output") or p.num_output <= 0:
            raise self.error("compact_bilinear_param.num_output must be given and > 0")
        self.d = int(p.num_output)
        if self.d % 2:
            raise self.error("compact_bilinear_param.num_output must be even (the fork's CPU "
                             "path refuses an odd one), got %d" % self.d)
        self.sum_pool = bool(p.sum_pool)

    def reshape(self, bottom, top):
        _check_pair(self, bottom, top)
        a = bottom[0]
        shape = [a.shape[0], self.d, a.shape[2], a.shape[3]]
        if self.sum_pool:
            shape[2:] = [1, 1]
        top[0].reshape(shape)
        c = [bottom[0].shape[1], bottom[1].shape[1]]
        draws = glibc_rand(1, 2 * (c[0] + c[1]))
        self.h, self.s = [], []
        at = 0
        for ck in c:
            self.h.append(np.array(draws[at:at + ck]) % self.d)
            self.s.append(2.0 * (np.array(draws[at + ck:at + 2 * ck]) % 2) - 1)
            at += 2 * ck

    def _sketch(self, x, k):
        """x (N, C, P) -> (N, D, P)."""
        out = np.zeros((x.shape[0], self.d, x.shape[2]))
        np.add.at(out, (slice(None), self.h[k]), x * self.s[k][None, :, None])
        return out

    def _flat(self, bottom, k):
        n, c = bottom[k].shape[:2]
        return bottom[k].data.reshape(n, c, -1).astype(np.float64)

    def forward_cpu(self, bottom, top):
        s0, s1 = (self._sketch(self._flat(bottom, k), k) for k in (0, 1))
        f = np.fft.rfft(s0, axis=1) * np.fft.rfft(s1, axis=1)
        y = np.fft.irfft(f, n=self.d, axis=1) * self.d
        top[0].data[...] = (y.sum(axis=2) if self.sum_pool else y).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        n = bottom[0].shape[0]
        p = bottom[0].count_range(2)
        dy = top[0].diff.reshape(n, self.d, -1).astype(np.float64)
        if self.sum_pool:
            dy = np.repeat(dy, p, axis=2)
        fdy = np.fft.rfft(dy, axis=1)
        for k in (0, 1):
            if not propagate_down[k]:
                continue
            other = self._sketch(self._flat(bottom, 1 - k), 1 - k)
            corr = np.fft.irfft(fdy * np.conj(np.fft.rfft(other, axis=1)), n=self.d,
                                axis=1) * self.d
            g = corr[:, self.h[k], :] * self.s[k][None, :, None]
            bottom[k].diff[...] = g.reshape(bottom[k].shape)
