"""FlowNet 2's file layers (lmb-freiburg/flownet2): FLOWriter (Middlebury ``.flo``), FloatWriter and
FloatReader (the fork's ``.float3``) with the format functions, and ImgReader.

``.flo``: ``PIEH``, int32 width, int32 height, then per pixel (row-major) float32 u, v.
``.float3``: the text lines ``float``, the dimension count (2 or 3), X, Y[, Z], then X Y Z
float32 values, X fastest (a C x H x W blob is X = W, Y = H, Z = C). Little-endian, as written
on the fork's x86 machines. Writes are atomic (temp file + rename).
"""
import os

import numpy as np

from ...errors import CaffeError, ShapeError
from ...proto.io import atomic_write
from ...layers.base import Layer, register_layer

FLO_TAG = b"PIEH"


def write_flo(path, flow):
    """Write a (2, H, W) flow field as a ``.flo`` file."""
    flow = np.asarray(flow, dtype="<f4")
    if flow.ndim != 3 or flow.shape[0] != 2:
        raise CaffeError("%s: a .flo file holds 2 x H x W flow, got %s" % (path, flow.shape))
    _, h, w = flow.shape
    atomic_write(path, [FLO_TAG, np.array([w, h], "<i4").tobytes(),
                        np.ascontiguousarray(flow.transpose(1, 2, 0)).tobytes()])


def read_flo(path):
    """A ``.flo`` file as a (2, H, W) float32 array (one-line errors for a bad file)."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:4] != FLO_TAG or len(raw) < 12:
        raise CaffeError("%s: not a .flo file (no PIEH header)" % path)
    w, h = (int(v) for v in np.frombuffer(raw[4:12], "<i4"))
    if w < 1 or h < 1 or len(raw) != 12 + 8 * w * h:
        raise CaffeError("%s: a %dx%d .flo file needs %d bytes, it has %d"
                         % (path, w, h, 12 + 8 * w * h, len(raw)))
    return np.frombuffer(raw[12:], "<f4").reshape(h, w, 2).transpose(2, 0, 1).copy()


def write_float3(path, data):
    """Write a (C, H, W) array as the fork's ``.float3`` file (X = W, Y = H, Z = C)."""
    data = np.asarray(data, dtype="<f4")
    if data.ndim != 3:
        raise CaffeError("%s: a .float3 file holds C x H x W values, got %s" % (path, data.shape))
    c, h, w = data.shape
    atomic_write(path, [("float\n3\n%d\n%d\n%d\n" % (w, h, c)).encode("ascii"),
                        np.ascontiguousarray(data).tobytes()])


def read_float3(path):
    """The fork's ``.float3`` (or 2-D ``float``) file as a (Z, Y, X) float32 array."""
    with open(path, "rb") as f:
        raw = f.read()
    lines, pos = [], 0
    try:
        for _ in range(2):
            end = raw.index(b"\n", pos)
            lines.append(raw[pos:end])
            pos = end + 1
        if lines[0] != b"float" or int(lines[1]) not in (2, 3):
            raise ValueError
        dims = []
        for _ in range(int(lines[1])):
            end = raw.index(b"\n", pos)
            dims.append(int(raw[pos:end]))
            pos = end + 1
    except ValueError:
        raise CaffeError("%s: not a float file (header 'float', 2 or 3, then the sizes)" % path)
    x, y, z = (dims + [1])[:3]
    if min(x, y, z) < 1 or len(raw) - pos != 4 * x * y * z:
        raise CaffeError("%s: %dx%dx%d values need %d bytes, the file has %d"
                         % (path, x, y, z, 4 * x * y * z, len(raw) - pos))
    return np.frombuffer(raw[pos:], "<f4").reshape(z, y, x).copy()


class _WriterLayer(Layer):
    """Shared by the writers: one file per item, named ``file`` or
    ``folder/prefix%07d[(%03d)]suffix.EXT`` (the iteration, then the item when N > 1); the
    iteration is this layer's forward count (the fork reads the net's iteration)."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 0
    ext = ""

    def layer_setup(self, bottom, top):
        self.count = 0

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be N x C x H x W", ShapeError)

    def _name(self, n, num):
        p = self.layer_param.writer_param
        if p.HasField("file"):
            return p.file
        item = "(%03d)" % n if num > 1 else ""
        return os.path.join(p.folder, "%s%07d%s%s%s" % (p.prefix, self.count, item, p.suffix,
                                                         self.ext))

    def forward_cpu(self, bottom, top):
        num = bottom[0].shape[0]
        for n in range(num):
            try:
                self.write(self._name(n, num), bottom[0].data[n])
            except OSError as e:
                raise self.error("cannot write %s: %s" % (self._name(n, num), e.strerror or e))
        self.count += 1

    def backward_cpu(self, top, propagate_down, bottom):
        """A writer passes no gradient."""


@register_layer("FLOWriter")
class FLOWriterLayer(_WriterLayer):
    """FlowNet 2's FLOWriter: each item of a (N, 2, H, W) flow blob to a ``.flo`` file.

    prototxt: ``writer_param { file folder prefix suffix }`` (see :class:`_WriterLayer`).
    """
    ext = ".flo"

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        if bottom[0].shape[1] != 2:
            raise self.error("the flow must have 2 channels, got %d" % bottom[0].shape[1],
                             ShapeError)

    def write(self, path, item):
        write_flo(path, item)


@register_layer("FloatWriter")
class FloatWriterLayer(_WriterLayer):
    """FlowNet 2's FloatWriter: each item of a (N, C, H, W) blob to a ``.float3`` file.

    prototxt: ``writer_param { file folder prefix suffix }`` (see :class:`_WriterLayer`).
    """
    ext = ".float3"

    def write(self, path, item):
        write_float3(path, item)


class _ReaderLayer(Layer):
    """FloatReader's and ImgReader's frame: ``reader_param.file`` read once at setup
    (:meth:`_read`) and repeated ``num`` times; a data layer, no gradient."""
    exact_num_bottom_blobs = 0
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.reader_param
        if not p.file:
            raise self.error("reader_param.file is required")
        self.values = self._read(p.file)

    def reshape(self, bottom, top):
        top[0].reshape((self.layer_param.reader_param.num,) + self.values.shape)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = self.values

    def backward_cpu(self, top, propagate_down, bottom):
        """Data: no gradient."""


@register_layer("FloatReader")
class FloatReaderLayer(_ReaderLayer):
    """FlowNet 2's FloatReader: a ``.float3`` file, repeated ``num`` times.

    prototxt: ``reader_param { file num: 1 }``. Top (num, Z, Y, X).
    """

    def _read(self, path):
        try:
            return read_float3(path)
        except OSError as e:
            raise self.error("cannot read %s: %s" % (path, e.strerror or e))


@register_layer("ImgReader")
class ImgReaderLayer(_ReaderLayer):
    """FlowNet 2's ImgReader: one image file (colour, BGR, as ``cv::imread``) through the layer's
    ``transform_param`` (as Caffe's DataTransformer), repeated ``num`` times.

    prototxt: ``reader_param { file num: 1 }`` + ``transform_param``. Top (num, C, h, w).
    """

    def _read(self, path):
        from ...data.image import read_image
        from ...data.transformer import DataTransformer
        try:
            img = read_image(path).transpose(2, 0, 1)
            tf = DataTransformer(self.layer_param.transform_param, self.phase, np.float64,
                                 what="layer '%s'" % self.name)
            return tf.transform(img[None].astype(np.float64))[0]
        except CaffeError as e:
            raise self.error(str(e))
