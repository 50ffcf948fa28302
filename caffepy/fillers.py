"""Fillers: initialise parameter blobs from a ``FillerParameter`` (Caffe's filler.hpp).

    filler = get_filler(layer_param.convolution_param.weight_filler)
    filler.fill(blob)

Random numbers come from ``caffepy.common.rng()`` (seed with ``caffepy.set_random_seed``). Values
are drawn in float64 and stored in the blob's dtype. In a build for shapes only
(:func:`caffepy.layers.base.shapes_only`) a filler checks the blob and draws nothing.

| type | fills with | fields (defaults) |
|---|---|---|
| ``constant`` | ``value`` | value (0) |
| ``uniform`` | U(min, max) | min (0), max (1) |
| ``gaussian`` | N(mean, std^2), optionally sparse | mean (0), std (1), sparse (-1) |
| ``positive_unitball`` | U(0, 1), each of the shape[0] rows scaled to sum 1 | |
| ``xavier`` | U(-a, a), a = sqrt(3 / n) | variance_norm (FAN_IN) |
| ``msra`` | N(0, 2 / (n (1 + alpha^2))) | variance_norm (FAN_IN), alpha (0) |
| ``bilinear`` | the bilinear-upsampling kernel on each (K, K) slice of a 4-d blob | |
| ``diagonal`` | FlowNet 2's: w[n, n] = diag_val[n] (1 past its end) / kernel area, else 0 | diag_val |
| ``file`` | the numbers of a text file, in blob order (see :class:`FileFiller`) | file |
| ``imagexy`` | image x / y weights (:class:`ImageXYFiller`) | channels, width, height, xy |
| ``expectation`` | expected-position weights (:class:`ExpectationFiller`) | width, height, expectation_option |
| ``expectation_data`` | pixel coordinates (:class:`ExpectationDataFiller`) | expectation_option |

``n`` is ``fan_in = count / shape[0]`` (FAN_IN), ``fan_out = count / shape[1]`` (FAN_OUT; ``count``
for a 1-d blob) or their mean (AVERAGE). ``sparse = s >= 0`` keeps each gaussian value with
probability ``s / shape[0]`` and zeroes the rest. Only ``gaussian`` accepts ``sparse``; the others
reject it, as Caffe does. Bilinear (square K x K filters): with ``f = ceil(K / 2)`` and
``c = (K - 1) / (2f)`` (BVLC master, correct for odd K too),
``w[y, x] = (1 - |x / f - c|) * (1 - |y / f - c|)``.
"""
import math

import numpy as np

from . import common
from .errors import CaffeError


class Filler(object):
    """Base: holds the FillerParameter; subclasses implement ``values(shape) -> float64 array``."""

    accepts_sparse = False

    def __init__(self, param):
        self.param = param
        if not self.accepts_sparse and param.sparse != -1:
            raise CaffeError("filler '%s': sparsity (sparse: %d) is only supported by the gaussian "
                             "filler" % (param.type, param.sparse))

    def fill(self, blob):
        if blob.count == 0:
            raise CaffeError("filler '%s': cannot fill an empty blob of shape %s"
                             % (self.param.type, blob.shape))
        from .layers import base
        if base._shapes_only[0]:        # a build for its shapes (caffepy.layers.base.shapes_only):
            return                      # nothing reads the values, so none are drawn
        self._write(blob)

    def _write(self, blob):
        blob.data[...] = self.values(tuple(blob.shape)).reshape(blob.shape)

    def values(self, shape):
        raise NotImplementedError

    @staticmethod
    def _count(shape):
        return int(np.prod(shape, dtype=np.int64))


class ConstantFiller(Filler):
    def values(self, shape):
        return np.full(shape, self.param.value, dtype=np.float64)

    def _write(self, blob):
        """Writes the value in place (the float64 array of ``values`` would double a large
        blob's memory: a 1000 x 802816 InnerProduct is 3.2 GB as float32)."""
        blob.data[...] = np.float64(self.param.value)


class UniformFiller(Filler):
    def values(self, shape):
        return common.rng().uniform(self.param.min, self.param.max, size=shape)


class GaussianFiller(Filler):
    accepts_sparse = True

    def values(self, shape):
        p = self.param
        if p.sparse < -1:
            raise CaffeError("filler 'gaussian': sparse must be >= -1, got %d" % p.sparse)
        data = common.rng().normal(p.mean, p.std, size=shape)
        if p.sparse >= 0:
            if not shape:
                raise CaffeError("filler 'gaussian': sparse needs a blob with at least one axis")
            keep = min(1.0, float(p.sparse) / shape[0])
            data *= common.rng().random(shape) < keep
        return data


GAUSSIAN_CHUNK = 1 << 16      # values per stream of gaussian_float32


def _fill_chunk(job):
    seed, out = job
    np.random.Generator(np.random.PCG64(seed)).standard_normal(out.size, dtype=np.float32, out=out)


def gaussian_float32(count, mean, std):
    """``count`` values of N(mean, std^2) as float32, for data drawn anew at every forward
    (DummyData): numpy's float32 ziggurat (``Generator.standard_normal(dtype=float32)``), scaled
    and shifted in float32. The values come in chunks of ``GAUSSIAN_CHUNK``; chunk i is drawn
    from its own PCG64 stream, child i of a ``SeedSequence`` whose entropy is one 63-bit draw of
    ``common.rng()``, so they depend on caffepy's seed only. The chunks are filled on up to
    ``kernels.threads()`` threads (numpy releases the GIL while it fills): the same values on any
    thread count. On a 2-core AVX2 machine, 2 threads, 100 x 3 x 32 x 32 values: 2.5 ms, where
    a float32 Box-Muller transform of numpy uniforms took 7.2 ms and ``rng().normal`` (float64)
    4.7 ms."""
    z = np.empty(count, np.float32)
    seeds = np.random.SeedSequence(int(common.rng().integers(1 << 63))).spawn(
        max(1, -(-count // GAUSSIAN_CHUNK)))
    jobs = [(sd, z[i * GAUSSIAN_CHUNK:(i + 1) * GAUSSIAN_CHUNK]) for i, sd in enumerate(seeds)]
    from .math import kernels
    workers = min(kernels.threads(), len(jobs))
    if workers > 1:
        list(common.thread_pool("caffepy-fill", workers).map(_fill_chunk, jobs))
    else:
        for job in jobs:
            _fill_chunk(job)
    if std != 1:
        z *= np.float32(std)
    if mean != 0:
        z += np.float32(mean)
    return z


class PositiveUnitballFiller(Filler):
    def values(self, shape):
        num = shape[0] if shape else 1
        data = common.rng().uniform(0.0, 1.0, size=shape).reshape(num, -1)
        data /= data.sum(axis=1, keepdims=True)
        return data


def _fan_n(param, shape):
    count = Filler._count(shape)
    fan_in = count // shape[0] if shape else count
    fan_out = count // shape[1] if len(shape) > 1 else count
    norm = param.variance_norm
    if norm == param.AVERAGE:
        return (fan_in + fan_out) / 2.0
    if norm == param.FAN_OUT:
        return float(fan_out)
    return float(fan_in)


class XavierFiller(Filler):
    def values(self, shape):
        scale = math.sqrt(3.0 / _fan_n(self.param, shape))
        return common.rng().uniform(-scale, scale, size=shape)


class MSRAFiller(Filler):
    """N(0, 2 / (n (1 + alpha^2))): ``alpha`` (default 0, BVLC's filler) is the negative slope of
    the PReLU the weights feed, eq. 15 of He et al., as happynear/caffe-windows and the forks
    derived from it read ``FillerParameter.alpha``."""

    def values(self, shape):
        alpha = float(self.param.alpha)
        std = math.sqrt(2.0 / _fan_n(self.param, shape) / (1.0 + alpha * alpha))
        return common.rng().normal(0.0, std, size=shape)


class BilinearFiller(Filler):
    def values(self, shape):
        if len(shape) != 4:
            raise CaffeError("filler 'bilinear': blob must be 4-d, got shape %s" % (shape,))
        if shape[2] != shape[3]:
            raise CaffeError("filler 'bilinear': filter must be square, got %dx%d"
                             % (shape[2], shape[3]))
        k = shape[3]
        f = math.ceil(k / 2.0)
        c = (k - 1) / (2.0 * f)
        w = 1 - np.abs(np.arange(k, dtype=np.float64) / f - c)
        return np.broadcast_to(np.outer(w, w), shape)


class DiagonalFiller(Filler):
    """lmb-freiburg/flownet2's: an identity-like (O, C, kh, kw) kernel scaled per output."""

    def values(self, shape):
        if len(shape) < 2:
            raise CaffeError("filler 'diagonal': blob must have 2+ axes, got shape %s" % (shape,))
        out = np.zeros(shape)
        area = int(np.prod(shape[2:])) if len(shape) > 2 else 1
        vals = list(self.param.diag_val)
        for n in range(min(shape[0], shape[1])):
            out[n, n] = (vals[n] if n < len(vals) else 1.0) / area
        return out


class FileFiller(Filler):
    """The ``file`` filler of daerduoCarey's spatial-transformer Caffe (daerduoCarey/mycaffe,
    include/caffe/filler.hpp, ``FileFiller``; the field is also declared by forks that copied its
    SpatialTransformer, e.g. MVIG-SJTU/RMPE, garrickbrazil/AR-Ped, lawy623/SVS, whose filler.hpp
    need not read it: the reference is daerduoCarey's): the blob's values, in memory
    order, are the whitespace-separated numbers read one by one (``file >> value``) from the
    text file ``file`` (a path as given, relative to the working directory). Its C++ stream
    semantics are kept: once the numbers run out, or a token is not a number, the stream fails;
    a token that is not a number reads as 0, and every later position keeps the last value
    read. A file that cannot be opened, or holds no number, leaves the fork's values
    uninitialised: here it is an error naming the file.
    """

    def values(self, shape):
        path = self.param.file
        if not path:
            raise CaffeError("filler 'file': the field 'file' (a text file of values) is required")
        try:
            with open(path) as f:
                tokens = f.read().split()
        except OSError as e:
            raise CaffeError("filler 'file': cannot read '%s': %s" % (path, e.strerror or e))
        count = self._count(shape)
        out = np.empty(count)
        value, failed = None, False
        for i in range(count):
            if not failed and i < len(tokens):
                try:
                    value = float(tokens[i])
                except ValueError:
                    value, failed = 0.0, True
            elif value is None:
                raise CaffeError("filler 'file': '%s' holds no number (the blob needs %d)"
                                 % (path, count))
            out[i] = value
        return out


class ImageXYFiller(Filler):
    """dementrock/caffe's ``imagexy`` filler (branch pose, include/caffe/filler.hpp): inner-product
    weights that read the expected image x / y position of each of C = ``channels`` feature
    maps of X x Y = ``width`` x ``height`` (a spatial softmax before it). Input index
    i = c X Y + y X + x, u = 2 ((x + 1) / X - 0.5), v = 2 ((y + 1) / Y - 0.5):

    * ``xy: "both"``: 2 C outputs, w[2c, i] = u, w[2c + 1, i] = v; ``"nboth2"``: -u^2, -v^2;
    * ``"x"`` / ``"y"`` / ``"ones"``: C outputs, w[c, i] = u / v / 1;

    every other weight 0. The blob is (outputs, C X Y) (the fork's 1 x 1 x outputs x C X Y).
    """

    def values(self, shape):
        p = self.param
        c, nx, ny, xy = int(p.channels), int(p.width), int(p.height), p.xy
        rows = {"both": 2 * c, "nboth2": 2 * c, "x": c, "y": c, "ones": c}
        if xy not in rows:
            raise CaffeError("filler 'imagexy': unknown xy policy '%s' (both, nboth2, x, y, ones)"
                             % xy)
        if len(shape) < 2 or int(np.prod(shape[:-2])) != 1:
            raise CaffeError("filler 'imagexy': blob must be outputs x inputs, got %s" % (shape,))
        if c <= 0 or nx <= 0 or ny <= 0 or shape[-1] != c * nx * ny or shape[-2] != rows[xy]:
            raise CaffeError("filler 'imagexy': blob %s must be %d x channels width height "
                             "(channels %d, width %d, height %d)"
                             % (shape, rows[xy], c, nx, ny))
        u = np.tile(2 * ((np.arange(nx) + 1.0) / nx - 0.5), ny)
        v = np.repeat(2 * ((np.arange(ny) + 1.0) / ny - 0.5), nx)
        out = np.zeros((shape[-2], shape[-1]))
        for k in range(c):
            cols = slice(k * nx * ny, (k + 1) * nx * ny)
            if xy in ("both", "nboth2"):
                sign, power = (1, 1) if xy == "both" else (-1, 2)
                out[2 * k, cols] = sign * u ** power
                out[2 * k + 1, cols] = sign * v ** power
            else:
                out[k, cols] = {"x": u, "y": v, "ones": 1.0}[xy]
        return out.reshape(shape)


def _coords(n):
    """2 (i / (n - 1) - 0.5) for i < n: the pixel coordinates in [-1, 1] of the expectation
    fillers (0 for a single pixel, where the fork divides 0 by 0)."""
    return 2 * (np.arange(n) / max(n - 1, 1) - 0.5)


class ExpectationFiller(Filler):
    """dementrock/caffe's ``expectation`` filler (master, include/caffe/filler.hpp): the weights
    of an InnerProduct with ``axis: -2`` after a SpatialSoftmax, so that each channel's output is
    the expected pixel position of its (normalised) feature map. For ``width`` x ``height`` =
    X x Y pixels, input index i = y X + x, u = 2 (x / (X - 1) - 0.5), v = 2 (y / (Y - 1) - 0.5):

    * ``expectation_option: "xy"`` (default): 2 outputs, w[0, i] = u, w[1, i] = v;
    * ``"-x^2y^2"``: 2 outputs, w[0, i] = -u^2, w[1, i] = -v^2 (for the variance);
    * ``"x"`` / ``"y"``: 1 output, w[0, i] = u / v.

    The blob is (outputs, X Y); ``sparse`` must stay -1.
    """

    def values(self, shape):
        p = self.param
        nx, ny, opt = int(p.width), int(p.height), p.expectation_option
        rows = {"xy": 2, "-x^2y^2": 2, "x": 1, "y": 1}
        if opt not in rows:
            raise CaffeError("filler 'expectation': unknown expectation_option '%s' (xy, -x^2y^2, "
                             "x, y)" % opt)
        if len(shape) != 2 or shape[1] != nx * ny or shape[0] != rows[opt]:
            raise CaffeError("filler 'expectation': blob %s must be %d x width height (width %d, "
                             "height %d; an InnerProduct with axis -2)"
                             % (tuple(shape), rows[opt], nx, ny))
        u = np.tile(_coords(nx), ny)
        v = np.repeat(_coords(ny), nx)
        out = {"xy": (u, v), "-x^2y^2": (-u ** 2, -v ** 2), "x": (u,), "y": (v,)}[opt]
        return np.stack(out).reshape(shape)


class ExpectationDataFiller(Filler):
    """dementrock/caffe's ``expectation_data`` filler: every (H, W) map of the blob holds the
    pixel coordinate 2 (x / (W - 1) - 0.5) (``expectation_option: "x"``) or
    2 (y / (H - 1) - 0.5) (``"y"``), as DummyData input to the expectation layers."""

    def values(self, shape):
        opt = self.param.expectation_option
        if opt not in ("x", "y"):
            raise CaffeError("filler 'expectation_data': expectation_option must be x or y, got "
                             "'%s'" % opt)
        if len(shape) < 2:
            raise CaffeError("filler 'expectation_data': blob %s needs 2 axes" % (tuple(shape),))
        h, w = shape[-2], shape[-1]
        plane = np.broadcast_to(_coords(w)[None, :] if opt == "x" else _coords(h)[:, None], (h, w))
        return np.broadcast_to(plane, shape).copy()


FILLERS = {
    "constant": ConstantFiller,
    "uniform": UniformFiller,
    "gaussian": GaussianFiller,
    "positive_unitball": PositiveUnitballFiller,
    "xavier": XavierFiller,
    "msra": MSRAFiller,
    "bilinear": BilinearFiller,
    "diagonal": DiagonalFiller,
    "file": FileFiller,
    "imagexy": ImageXYFiller,
    "expectation": ExpectationFiller,
    "expectation_data": ExpectationDataFiller,
}


def get_filler(filler_param):
    """The filler for a ``FillerParameter`` (CaffeError for an unknown type)."""
    try:
        cls = FILLERS[filler_param.type]
    except KeyError:
        raise CaffeError("unknown filler type '%s'; known types: %s"
                         % (filler_param.type, ", ".join(sorted(FILLERS))))
    return cls(filler_param)


def fill(blob, filler_param):
    """Shorthand: ``get_filler(filler_param).fill(blob)``."""
    get_filler(filler_param).fill(blob)
