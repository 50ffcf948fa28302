"""FlowNet 2's image writers (lmb-freiburg/flownet2; the same files in twhui/LiteFlowNet,
JingchunCheng/SegFlow, adamtwig/segpred): ImgWriter (binary PGM / PPM, src/caffe/layers/
imgwriter_layer.cpp with writePGM / writePPM / writePGMNorm / writePPMNorm of
src/caffe/util/output.cpp) and PFMWriter (src/caffe/layers/pfmwriter_layer.cpp, through the bundled
CImg 1.6.0's ``save_pfm``). Files are named as FLOWriter's (:class:`files._WriterLayer`) and
written atomically.

Byte values: the fork converts floats to ``unsigned char`` with a plain C cast; :func:`to_uchar`
does what x86 compilers emit for it (truncate to a 32-bit int, keep the low byte; NaN and values
outside the int range give 0).
"""
import numpy as np

from ...errors import CaffeError, ShapeError
from ...layers.base import register_layer
from ...proto.io import atomic_write
from .files import _WriterLayer

FLT_MIN, FLT_MAX = np.finfo(np.float32).tiny, np.finfo(np.float32).max


def to_uchar(v):
    """The C cast ``(unsigned char)f`` of float32 values, as x86 code computes it."""
    with np.errstate(invalid="ignore"):
        t = np.trunc(np.asarray(v, dtype=np.float64))
        bad = ~np.isfinite(t) | (t < -2.0 ** 31) | (t >= 2.0 ** 31)
        return (np.where(bad, 0, t).astype(np.int64) & 0xFF).astype(np.uint8)


def _normalized(data):
    """255 (v - min) / (max - min) in float32; max starts at FLT_MIN as in the fork (so an
    all-negative image uses max = FLT_MIN)."""
    mn = min(np.float32(FLT_MAX), data.min())
    mx = max(np.float32(FLT_MIN), data.max())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.float32(255) * (data - mn) / (mx - mn)


def write_pgm(path, image, scale=1.0, normalize=False):
    """An H x W image as binary PGM (``P5``), bytes (uchar)(v scale), or 255 (v - min) /
    (max - min) with ``normalize``."""
    v = np.asarray(image, dtype=np.float32)
    h, w = v.shape
    vals = _normalized(v) if normalize else v * np.float32(scale)
    atomic_write(path, [b"P5\n%d %d \n255\n" % (w, h), to_uchar(vals).tobytes()])


def write_ppm(path, image, scale=1.0, normalize=False):
    """A 3 x H x W (BGR) image as binary PPM (``P6``), pixels in R, G, B order: bytes
    (uchar)clamp(v scale, 0, 255), or the normalized values (min / max over all channels)."""
    v = np.asarray(image, dtype=np.float32)
    _, h, w = v.shape
    if normalize:
        vals = _normalized(v)
    else:
        with np.errstate(invalid="ignore"):
            s = v * np.float32(scale)
            vals = np.where(s < 0, 0, np.where(s > 255, 255, s))
    head = (b"P6\n" if normalize else b"P6 \n") + b"%d %d \n255\n" % (w, h)
    atomic_write(path, [head, to_uchar(vals[::-1].transpose(1, 2, 0)).tobytes()])


def write_pfm(path, image):
    """A C x H x W blob item as CImg 1.6.0 writes PFM: ``Pf`` (C = 1) or ``PF`` (C >= 2; the
    first three channels, blue 0 when C = 2), ``W H``, scale ``1.0``, rows top to bottom,
    big-endian float32 -- of the NEGATED values (the fork negates for DispNet's disparities)."""
    v = -np.asarray(image, dtype=np.float32)
    c, h, w = v.shape
    if c == 1:
        body = v[0]
    else:
        body = np.zeros((h, w, 3), np.float32)
        body[..., :min(c, 3)] = v[:3].transpose(1, 2, 0)
    atomic_write(path, [b"P%s\n%d %d\n1.0\n" % (b"f" if c == 1 else b"F", w, h),
                        np.ascontiguousarray(body, dtype=">f4").tobytes()])


def read_pfm(path):
    """A PFM file as a (C, H, W) float32 array, rows as stored (one-line errors)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        tag, size, scale, body = raw.split(b"\n", 3)
        w, h = (int(t) for t in size.split())
        channels = {b"Pf": 1, b"PF": 3}[tag.strip()]
        order = "<" if float(scale) < 0 else ">"
    except (ValueError, KeyError):
        raise CaffeError("%s: not a PFM file (Pf / PF, width height, scale)" % path)
    if len(body) != 4 * w * h * channels:
        raise CaffeError("%s: %dx%dx%d values need %d bytes, the file has %d"
                         % (path, w, h, channels, 4 * w * h * channels, len(body)))
    return np.frombuffer(body, order + "f4").reshape(h, w, channels).transpose(2, 0, 1).copy()


@register_layer("ImgWriter")
class ImgWriterLayer(_WriterLayer):
    """FlowNet 2's ImgWriter: each item of a (N, 1 or 3, H, W) blob to a binary ``.pgm`` (1
    channel) or ``.ppm`` (3 channels, BGR blob to RGB pixels) file; see :func:`write_pgm` and
    :func:`write_ppm`. The PGM bytes are not clamped (the fork's plain cast), the PPM's are.

    prototxt: ``writer_param { file folder prefix suffix normalize: false scale: 1 }``.
    """

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        if bottom[0].shape[1] not in (1, 3):
            raise self.error("the image must have 1 or 3 channels, got %d" % bottom[0].shape[1],
                             ShapeError)
        self.ext = ".pgm" if bottom[0].shape[1] == 1 else ".ppm"

    def write(self, path, item):
        p = self.layer_param.writer_param
        if item.shape[0] == 1:
            write_pgm(path, item[0], p.scale, p.normalize)
        else:
            write_ppm(path, item, p.scale, p.normalize)


@register_layer("PFMWriter")
class PFMWriterLayer(_WriterLayer):
    """FlowNet 2's PFMWriter: each item of a (N, C, H, W) blob, negated, to a ``.pfm`` file
    (see :func:`write_pfm`). prototxt: ``writer_param { file folder prefix suffix }``.
    """
    ext = ".pfm"

    def write(self, path, item):
        write_pfm(path, item)
