"""MemoryData: batches from arrays the caller hands over (pycaffe's ``net.set_input_arrays``,
``add_datum_vector``), in BVLC's form and dementrock/caffe's (:func:`memory_blob_shapes`)."""
import numpy as np

from ..data.transformer import DataTransformer
from .base import Layer, register_layer


def memory_blob_shapes(p, num_tops):
    """The top shapes of dementrock/caffe's MemoryData forms, None for BVLC's:
    ``input_shapes`` (branch vgps, src/caffe/layers/memory_data_layer.cpp: one top per shape,
    each N x C x H x W with the first shape's N) or ``channelsK / heightK / widthK`` (K = 1..4,
    commit 6202c5b7, whose one to four tops the later branch pose allows (MinTopBlobs 1, a
    Reshape of top K only when there are K tops): top K batch_size x channelsK x heightK x
    widthK, each size 1 unless set; the shapes of absent tops are not used)."""
    if len(p.input_shapes):
        return [tuple(int(d) for d in s.dim) for s in p.input_shapes]
    names = ["%s%d" % (f, k) for k in range(1, 5) for f in ("channels", "height", "width")]
    if not any(p.HasField(n) for n in names):
        return None
    shapes = [(int(p.batch_size), int(getattr(p, "channels%d" % k)),
               int(getattr(p, "height%d" % k)), int(getattr(p, "width%d" % k)))
              for k in range(1, 5)]
    return shapes[:num_tops] if 1 <= num_tops <= 4 else shapes


@register_layer("MemoryData")
class MemoryDataLayer(Layer):
    """Serves batches from arrays handed over by the caller (pycaffe's ``net.set_input_arrays``).

    prototxt: ``memory_data_param { batch_size channels height width }`` (+ ``transform_param``,
    used only by ``add_datum_vector``). ``reset(data, labels, n)``: data is n x C x H x W, labels n
    values (any shape with n rows), n a multiple of batch_size; the arrays are used as given
    (no transform), batch i being rows [i*batch_size, (i+1)*batch_size) cyclically.
    ``add_datum_vector(datums)`` transforms Datums first. Tops: data, label.

    dementrock/caffe's forms (:func:`memory_blob_shapes`): ``input_shapes { dim: N dim: C dim: H
    dim: W }`` once per top (all the same N, 4 axes), or ``batch_size`` with ``channelsK``,
    ``heightK``, ``widthK`` (K = 1..4; one to four tops, top K from the K-th sizes, 1 where
    unset). Then ``reset(arrays, n)`` takes one array per top (n x the top's C x H x W; n a
    multiple of N) and each forward serves the next N rows of every array, cyclically, as the
    fork's Reset(vector<Dtype*>, n) / Forward.
    """
    exact_num_bottom_blobs = 0
    exact_num_top_blobs = None
    min_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.memory_data_param
        self.shapes = memory_blob_shapes(p, len(top))
        self._data = None
        self._labels = None
        self.n = 0
        self.pos = 0
        self._transformer = None
        if self.shapes is not None:
            self._fork_setup(top)
            return
        if len(top) != 2:
            raise self.error("takes exactly 2 top blob(s), got %d" % len(top))
        self.batch_size, self.channels = int(p.batch_size), int(p.channels)
        self.height, self.width = int(p.height), int(p.width)
        if min(self.batch_size, self.channels, self.height, self.width) < 1:
            raise self.error("batch_size, channels, height and width must be specified and positive")

    def _fork_setup(self, top):
        if len(self.shapes) != len(top):
            raise self.error("memory_data_param gives %d top shapes, the layer has %d tops"
                             % (len(self.shapes), len(top)))
        for s in self.shapes:
            if len(s) != 4 or min(s) < 1:
                raise self.error("memory_data_param: each top shape must be 4 positive sizes "
                                 "(N x C x H x W), got %s" % (s,))
        self.batch_size = self.shapes[0][0]
        if any(s[0] != self.batch_size for s in self.shapes):
            raise self.error("inconsistent batch sizes across blobs: %s"
                             % [s[0] for s in self.shapes])

    def reshape(self, bottom, top):
        if self.shapes is not None:
            for t, s in zip(top, self.shapes):
                t.reshape((self.batch_size,) + s[1:])
            return
        top[0].reshape(self.batch_size, self.channels, self.height, self.width)
        top[1].reshape(self.batch_size)

    def reset(self, data, labels=None, n=None):
        if self.shapes is not None:
            return self._fork_reset(data, labels if n is None else n)
        data = np.asarray(data)
        labels = np.asarray(labels)
        n = data.shape[0] if n is None else int(n)
        if data.ndim != 4 or data.shape[1:] != (self.channels, self.height, self.width):
            raise self.error("data must be N x %d x %d x %d, got shape %s"
                             % (self.channels, self.height, self.width, data.shape))
        if labels.shape[:1] != (data.shape[0],) or labels.size != data.shape[0]:
            raise self.error("need one label per data row (%d), got labels of shape %s"
                             % (data.shape[0], labels.shape))
        if n < 1 or n > data.shape[0] or n % self.batch_size:
            raise self.error("n (%d) must be a positive multiple of batch_size (%d), at most %d"
                             % (n, self.batch_size, data.shape[0]))
        self._data = data
        self._labels = labels.reshape(-1)
        self.n = n
        self.pos = 0

    def _fork_reset(self, arrays, n):
        arrays = [np.asarray(a) for a in arrays]
        if len(arrays) != len(self.shapes):
            raise self.error("reset needs one array per top (%d), got %d"
                             % (len(self.shapes), len(arrays)))
        n = arrays[0].shape[0] if n is None else int(n)
        for i, (a, s) in enumerate(zip(arrays, self.shapes)):
            if a.ndim != 4 or a.shape[1:] != s[1:] or a.shape[0] < n:
                raise self.error("array %d must be at least %d x %d x %d x %d, got shape %s"
                                 % (i, n, s[1], s[2], s[3], a.shape))
        if n < 1 or n % self.batch_size:
            raise self.error("n (%d) must be a positive multiple of batch size (%d)"
                             % (n, self.batch_size))
        self._data = arrays
        self.n = n
        self.pos = 0

    def add_datum_vector(self, datums):
        if self.shapes is not None:
            raise self.error("add_datum_vector needs BVLC's form of memory_data_param (channels "
                             "height width), not one shape per top")
        if len(datums) % self.batch_size or not datums:
            raise self.error("the number of datums (%d) must be a positive multiple of batch_size "
                             "(%d)" % (len(datums), self.batch_size))
        if self._transformer is None:
            self._transformer = DataTransformer(self.layer_param.transform_param, self.phase,
                                                self.dtype, what="layer '%s' (MemoryData)" % self.name)
        data = self._transformer.transform_datums(list(datums))
        self.reset(data, np.array([d.label for d in datums], self.dtype))

    def set_batch_size(self, batch_size):
        if self._data is not None and self.n % batch_size:
            raise self.error("batch_size %d does not divide the %d rows set by reset" % (batch_size, self.n))
        self.batch_size = int(batch_size)
        self.pos = 0

    def forward_cpu(self, bottom, top):
        if self._data is None:
            raise self.error("MemoryData needs reset(data, labels) (net.set_input_arrays) before forward")
        rows = slice(self.pos, self.pos + self.batch_size)
        if self.shapes is not None:
            for t, a in zip(top, self._data):
                t.data[...] = a[rows]
            self.pos = (self.pos + self.batch_size) % self.n
            return
        top[0].data[...] = self._data[rows]
        top[1].data[...] = self._labels[rows]
        self.pos = (self.pos + self.batch_size) % self.n

    def get_data_state(self):
        return {"pos": self.pos}

    def set_data_state(self, state):
        self.pos = int(state["pos"])

    def backward_cpu(self, top, propagate_down, bottom):
        """No gradient."""
