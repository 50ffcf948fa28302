"""MultiProto of the DeViSE forks (Qi-Xian/DeVise, gtlim/Ahra): a learned prototype matrix
given out as a top."""
import os

import numpy as np

from ...errors import ShapeError
from ...fillers import get_filler
from ...layers.base import Layer, _shapes_only, register_layer


@register_layer("MultiProto")
class MultiProtoLayer(Layer):
    """A parameter blob as the top (Qi-Xian/DeVise, caffe/src/caffe/layers/multi_proto_layer.cpp;
    gtlim/Ahra registers the type too): the prototypes P (num_protos x num_output, filled by
    ``weight_filler``) are copied to the top; backward sets P's diff to the top's diff.

    With ``source`` (a text file listing HDF5 files) P is read from the first listed file, from
    the dataset named like the layer's top, and takes that dataset's shape (a build for shapes
    only goes on with num_protos x num_output when the files are absent). Parameter blobs given
    with the layer are kept. prototxt: ``multi_proto_param { num_protos num_output
    weight_filler source }``; ``save`` is not read by the layer (multi_proto_layer.cpp reads only
    the fields above). No bottoms.
    """
    exact_num_bottom_blobs = 0
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.multi_proto_param
        shape = (int(p.num_protos), int(p.num_output))
        self.param_propagate_down = [True]
        if self.blobs:
            return
        if p.source:
            data = self._read_source(p.source)
            if data is not None:
                self.blobs = [self.new_blob(data.shape)]
                self.blobs[0].data[...] = data
                return
        if min(shape) <= 0:
            raise self.error("multi_proto_param: num_protos and num_output must be > 0, got %s"
                             % (shape,), ShapeError)
        self.blobs = [self.new_blob(shape)]
        get_filler(p.weight_filler).fill(self.blobs[0])

    def _read_source(self, source):
        if _shapes_only[0] and not os.path.exists(source):
            return None
        try:
            with open(source) as f:
                names = f.read().split()
        except (IOError, OSError) as e:
            raise self.error("cannot read the HDF5 list '%s': %s" % (source, e))
        if not names:
            raise self.error("'%s' lists no HDF5 file" % source)
        if _shapes_only[0] and not os.path.exists(names[0]):
            return None
        from ...layers.data_hdf5 import _h5py
        h5py = _h5py(self)
        key = self.layer_param.top[0] if self.layer_param.top else ""
        try:
            with h5py.File(names[0], "r") as f:
                if key not in f:
                    raise self.error("'%s' has no dataset '%s' (the layer's top)"
                                     % (names[0], key))
                return np.asarray(f[key], dtype=np.float64)
        except OSError as e:
            raise self.error("cannot read HDF5 file '%s': %s" % (names[0], e))

    def reshape(self, bottom, top):
        top[0].reshape(self.blobs[0].shape)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = self.blobs[0].data

    def backward_cpu(self, top, propagate_down, bottom):
        if self.param_propagate_down[0]:
            self.blobs[0].diff[...] = top[0].diff
