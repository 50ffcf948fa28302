"""Layers of the OpenCL branch of Caffe (BVLC/caffe branch opencl, naibaf7's greentea work) that
the 3-D U-Nets of TuragaLab's gunpowder examples use: MergeCrop, the skip connection of a U-Net
(a decoder map stacked with the centre crop of the encoder map of the same level), and the N-d
form of MemoryData (``memory_data_param.dim``).

Sources: src/caffe/layers/mergecrop_layer.cpp (Reshape; its CPU functions are LOG(FATAL)) and
mergecrop_layer.cu (CopyForward / CopyBackward), which is what is computed here;
src/caffe/layers/memory_data_layer.cpp (DataLayerSetUp: ``dim`` overrides the 4-axis fields).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, fork_param, register_layer, register_variant
from ...layers.data_memory import MemoryDataLayer


@register_layer("MergeCrop")
class MergeCropLayer(Layer):
    """Top = bottom a (N x Ca x S_a) stacked on the channels with the centre crop of bottom b
    (N x Cb x S_b, S_b >= S_a per spatial axis, any number of spatial axes):

        top[n, t, s] = a[n, (n (Ca + Cb) + t) mod Ca, s]              when (t div Ca) mod 2 = 0
                       b[n, (n (Ca + Cb) + t) mod Cb, s + pad]         otherwise,
        pad = (S_b - S_a) / 2 (truncated)

    the fork kernel's index arithmetic (it is the plain stack [a; crop(b)] when Ca = Cb, as in
    every U-Net; other channel counts are mapped as the kernel maps them). ``forward: false``
    for an input puts zeros in its part. Backward (only when bottom a propagates, as the fork's
    Backward_gpu): each top position's gradient is written to the position it was read from
    (``backward: false`` writes 0); positions of b outside the crop get 0.

    prototxt: ``mergecrop_param { operation: STACK forward: true forward: true backward: true
    backward: false }`` (defaults: forward both, backward a only). Top: N x (Ca + Cb) x S_a.
    ``operation: ADD`` is not computed by the fork's kernels shown here and is refused.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "mergecrop_param")
        self.forward_flags, self.backward_flags = [True, True], [True, False]
        if p is not None:
            for i, v in enumerate(list(p.forward)[:2]):
                self.forward_flags[i] = bool(v)
            for i, v in enumerate(list(p.backward)[:2]):
                self.backward_flags[i] = bool(v)
            if int(p.operation) != 0:
                raise self.error("operation ADD is not supported (only STACK is computed)")

    def reshape(self, bottom, top):
        a, b = bottom
        if a.num_axes < 3 or a.num_axes != b.num_axes:
            raise self.error("bottoms must be N x C x spatial... with the same number of axes, "
                             "got %s and %s" % (a.shape, b.shape), ShapeError)
        if a.shape[0] != b.shape[0]:
            raise self.error("bottoms must have the same batch size, got %s and %s"
                             % (a.shape, b.shape), ShapeError)
        if any(sb < sa for sa, sb in zip(a.shape[2:], b.shape[2:])):
            raise self.error("bottom 1 %s must be at least as large as bottom 0 %s on every "
                             "spatial axis (it is cropped to it)" % (b.shape, a.shape), ShapeError)
        self.pad = tuple(int((sb - sa) / 2) for sa, sb in zip(a.shape[2:], b.shape[2:]))
        top[0].reshape((a.shape[0], a.shape[1] + b.shape[1]) + tuple(a.shape[2:]))

    def _plan(self, bottom):
        """Per top channel t of image n: (bottom index, its channel), as the fork's kernel."""
        n, ca = bottom[0].shape[:2]
        cb = bottom[1].shape[1]
        plan = []
        for i in range(n):
            row = []
            for t in range(ca + cb):
                g = i * (ca + cb) + t
                row.append((0, g % ca) if (t // ca) % 2 == 0 else (1, g % cb))
            plan.append(row)
        return plan

    def _crop(self, bottom):
        return (slice(None),) + tuple(slice(p, p + s) for p, s in zip(self.pad,
                                                                         bottom[0].shape[2:]))

    def forward_cpu(self, bottom, top):
        crop = self._crop(bottom)
        y = top[0].data
        for i, row in enumerate(self._plan(bottom)):
            for t, (which, ch) in enumerate(row):
                if not self.forward_flags[which]:
                    y[i, t] = 0
                elif which == 0:
                    y[i, t] = bottom[0].data[i, ch]
                else:
                    y[i, t] = bottom[1].data[i, ch][crop[1:]]

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        crop = self._crop(bottom)
        da = np.zeros(bottom[0].shape, bottom[0].diff.dtype)
        db = np.zeros(bottom[1].shape, bottom[1].diff.dtype)
        dy = top[0].diff
        for i, row in enumerate(self._plan(bottom)):
            for t, (which, ch) in enumerate(row):
                value = dy[i, t] if self.backward_flags[which] else 0
                if which == 0:
                    da[i, ch] = value
                else:
                    db[i, ch][crop[1:]] = value
        bottom[0].diff[...] = da
        if propagate_down[1]:
            bottom[1].diff[...] = db

    def forward_gpu(self, bottom, top):
        self.forward_cpu(bottom, top)

    def backward_gpu(self, top, propagate_down, bottom):
        self.backward_cpu(top, propagate_down, bottom)


def _nd_memory(lp):
    return len(lp.memory_data_param.dim) > 0


@register_variant("MemoryData", _nd_memory)
class MemoryDataNdLayer(MemoryDataLayer):
    """The OpenCL branch's N-d MemoryData (src/caffe/layers/memory_data_layer.cpp there): with
    ``memory_data_param { dim: N dim: C dim: D1 ... }`` the data top has exactly that shape
    (batch first) and the optional label top (batch, 1, ..., 1) with as many axes; one or two
    tops. ``reset(data, labels=None, n=None)``: data n x dim[1:], labels n values when there is
    a label top; batches are taken as by MemoryData.
    """
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        self.shape = tuple(int(d) for d in self.layer_param.memory_data_param.dim)
        if len(self.shape) < 2 or min(self.shape) < 1:
            raise self.error("memory_data_param.dim must give batch, channels, ... (all "
                             "positive), got %s" % (self.shape,))
        self.batch_size = self.shape[0]
        self._data = self._labels = None
        self.n = self.pos = 0
        self._transformer = None

    def reshape(self, bottom, top):
        top[0].reshape((self.batch_size,) + self.shape[1:])
        if len(top) > 1:
            top[1].reshape((self.batch_size,) + (1,) * (len(self.shape) - 1))

    def reset(self, data, labels=None, n=None):
        data = np.asarray(data)
        n = data.shape[0] if n is None else int(n)
        if data.shape[1:] != self.shape[1:]:
            raise self.error("data must be N x %s, got shape %s"
                             % (" x ".join(str(d) for d in self.shape[1:]), data.shape))
        if labels is not None:
            labels = np.asarray(labels)
            if labels.size != data.shape[0]:
                raise self.error("need one label per data row (%d), got labels of shape %s"
                                 % (data.shape[0], labels.shape))
            labels = labels.reshape(-1)
        elif len(self.layer_param.top) > 1:
            raise self.error("this MemoryData has a label top: reset needs labels")
        if n < 1 or n > data.shape[0] or n % self.batch_size:
            raise self.error("n (%d) must be a positive multiple of batch_size (%d), at most %d"
                             % (n, self.batch_size, data.shape[0]))
        self._data, self._labels, self.n, self.pos = data, labels, n, 0

    def add_datum_vector(self, datums):
        raise self.error("add_datum_vector needs a 4-axis MemoryData (channels, height, width)")

    def forward_cpu(self, bottom, top):
        if self._data is None:
            raise self.error("MemoryData needs reset(data, labels) (net.set_input_arrays) "
                             "before forward")
        rows = slice(self.pos, self.pos + self.batch_size)
        top[0].data[...] = self._data[rows]
        if len(top) > 1:
            top[1].data[...] = self._labels[rows].reshape(top[1].shape)
        self.pos = (self.pos + self.batch_size) % self.n
