"""HDF5 data layers: HDF5Data reads one dataset per top from .h5 files; HDF5Output writes bottoms."""
import os

import numpy as np

from .. import common
from ..data.state import set_rng
from ..errors import CaffeError
from ..proto import caffe_pb2
from .base import Layer, register_layer


def _h5py(layer):
    try:
        import h5py
    except ImportError:
        raise layer.error("HDF5 layers need h5py: pip install h5py (or pip install caffepy[data])")
    return h5py


@register_layer("HDF5Data")
class HDF5DataLayer(Layer):
    """Reads rows of HDF5 datasets named like the tops, as Caffe's HDF5DataLayer.

    prototxt: ``hdf5_data_param { source: "<list file>" batch_size: N shuffle: false }``.
    ``source`` lists .h5 paths (whitespace separated, used as written: relative to the working
    directory). Each file holds, for every top ``t``, a numeric dataset ``t`` of shape
    rows x d1 x ...; all datasets of a file have the same number of rows. Top ``t`` is
    batch_size x d1 x .... Rows are served in order, moving to the next file at the end of one and
    wrapping after the last; with ``shuffle`` the file order is shuffled at every pass and the rows
    of each file every time it is (re)loaded. With several solvers (``solver_count`` > 1, read in
    the thread that runs forward) in TRAIN, solver r keeps rows r, r + count, ... of that stream
    and skips the others, as Caffe does. No transform_param (an error, as in Caffe); no backward.
    """
    exact_num_bottom_blobs = 0
    min_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.hdf5_data_param
        if self.layer_param.HasField("transform_param"):     # Caffe's CHECK in LayerSetUp
            raise self.error("HDF5Data does not transform data (remove transform_param)")
        self.h5py = _h5py(self)
        self.batch_size = int(p.batch_size)
        if self.batch_size < 1:
            raise self.error("hdf5_data_param.batch_size must be positive")
        self.shuffle = bool(p.shuffle)
        self.names = list(self.layer_param.top)
        if len(self.names) < len(top):
            self.names += ["top%d" % i for i in range(len(self.names), len(top))]
        try:
            with open(p.source, "r") as f:
                self.files = f.read().split()
        except OSError as e:
            raise self.error("cannot open source file %s: %s" % (p.source, e.strerror or e))
        if not self.files:
            raise self.error("must have at least 1 HDF5 filename listed in %s" % p.source)
        self.rng = np.random.default_rng(int(common.rng().integers(0, 2 ** 63)))
        self.file_order = np.arange(len(self.files))
        if self.shuffle:
            self.rng.shuffle(self.file_order)
        self.current_file = 0
        self._load(self.files[self.file_order[0]])
        self.current_row = 0
        self.offset = 0

    def get_data_state(self):
        return {"file": self.current_file, "row": self.current_row, "offset": self.offset,
                "file_order": self.file_order.copy(), "row_order": self.row_order.copy(),
                "shuffle": self.rng.bit_generator.state}

    def set_data_state(self, state):
        order = np.asarray(state["file_order"], np.int64)
        if len(order) != len(self.files):
            raise self.error("the saved state is of %d HDF5 files, the source lists %d"
                             % (len(order), len(self.files)))
        self.file_order, self.current_file = order, int(state["file"])
        self._load(self.files[self.file_order[self.current_file]])
        if len(state["row_order"]) != self.data[0].shape[0]:
            raise self.error("the saved state's HDF5 file has %d rows, %s has %d"
                             % (len(state["row_order"]), self.files[order[self.current_file]],
                                self.data[0].shape[0]))
        self.row_order = np.asarray(state["row_order"], np.int64)
        self.current_row, self.offset = int(state["row"]), int(state["offset"])
        set_rng(self.rng, state["shuffle"])

    def _skip(self):
        if self.phase == caffe_pb2.TEST:
            return False
        size = max(1, common._state.solver_count)
        return self.offset % size != common._state.solver_rank

    def _load(self, path):
        try:
            f = self.h5py.File(path, "r")
        except OSError as e:
            raise self.error("cannot open HDF5 file %s: %s" % (path, " ".join(str(e).split())))
        try:
            data = self._read(f, path)
        except (OSError, KeyError, RuntimeError, ValueError) as e:
            raise self.error("cannot read HDF5 file %s: %s" % (path, " ".join(str(e).split())[:300]))
        rows = data[0].shape[0]
        for name, d in zip(self.names, data):
            if d.shape[0] != rows:
                raise self.error("%s: dataset '%s' has %d rows, '%s' has %d"
                                 % (path, name, d.shape[0], self.names[0], rows))
        if rows < 1:
            raise self.error("%s: datasets have no rows" % path)
        self.data = data
        self.row_order = np.arange(rows)
        if self.shuffle:
            self.rng.shuffle(self.row_order)

    def _read(self, f, path):
        with f:
            data = []
            for name in self.names:
                if name not in f:
                    has = sorted(k if isinstance(k, str) and k.isprintable() else repr(k) for k in f)
                    raise self.error("%s: no dataset '%s' (one per top; has: %s)"
                                     % (path, name, ", ".join(has)))
                ds = f[name]
                if not isinstance(ds, self.h5py.Dataset) or ds.dtype.kind not in "fiub" or ds.ndim < 1:
                    raise self.error("%s: '%s' must be a numeric dataset with at least 1 axis, got "
                                     "%s" % (path, name, getattr(ds, "dtype", "a group")))
                try:
                    data.append(np.asarray(ds[...], dtype=self.dtype))
                except (OSError, ValueError, RuntimeError) as e:     # truncated, damaged
                    raise self.error("%s: dataset '%s' cannot be read (truncated or damaged "
                                     "file?): %s" % (path, name, " ".join(str(e).split())))
        return data

    def reshape(self, bottom, top):
        for t, d in zip(top, self.data):
            t.reshape((self.batch_size,) + d.shape[1:])

    def _next(self):
        self.offset += 1
        self.current_row += 1
        if self.current_row == self.data[0].shape[0]:
            if len(self.files) > 1:
                self.current_file += 1
                if self.current_file == len(self.files):
                    self.current_file = 0
                    if self.shuffle:
                        self.rng.shuffle(self.file_order)
                self._load(self.files[self.file_order[self.current_file]])
            elif self.shuffle:
                self.rng.shuffle(self.row_order)
            self.current_row = 0

    def forward_cpu(self, bottom, top):
        for i in range(self.batch_size):
            while self._skip():
                self._next()
            r = self.row_order[self.current_row]
            for name, t, d in zip(self.names, top, self.data):
                if d.shape[1:] != t.shape[1:]:
                    raise self.error("file %s changes the shape of top '%s' from %s to %s"
                                     % (self.files[self.file_order[self.current_file]],
                                        name, t.shape[1:], d.shape[1:]))
                t.data[i] = d[r]
            self._next()

    def backward_cpu(self, top, propagate_down, bottom):
        """No gradient."""


@register_layer("HDF5Output")
class HDF5OutputLayer(Layer):
    """Writes its two bottoms to datasets ``data`` and ``label`` of an HDF5 file (Caffe's HDF5Output).

    prototxt: ``hdf5_output_param { file_name: "<out.h5>" }``. The file is created (truncated) at
    setup. Each forward appends the batch along axis 0 (Caffe fails on a second forward because the
    datasets exist; appending is the compatible extension). Values are stored as float32 (float64
    for a float64 net). No tops; no backward.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 0

    def layer_setup(self, bottom, top):
        self.h5py = _h5py(self)
        self.file_name = self.layer_param.hdf5_output_param.file_name
        if not self.file_name:
            raise self.error("hdf5_output_param.file_name is not set")
        d = os.path.dirname(os.path.abspath(self.file_name))
        try:
            os.makedirs(d, exist_ok=True)
            self.h5py.File(self.file_name, "w").close()
        except OSError as e:
            raise self.error("cannot create %s: %s" % (self.file_name, " ".join(str(e).split())))

    def reshape(self, bottom, top):
        pass

    def forward_cpu(self, bottom, top):
        with self.h5py.File(self.file_name, "a") as f:
            for name, b in (("data", bottom[0]), ("label", bottom[1])):
                arr = np.asarray(b.data, dtype=self.dtype)
                if name not in f:
                    f.create_dataset(name, data=arr, maxshape=(None,) + arr.shape[1:],
                                     chunks=True if arr.ndim else None)
                    continue
                ds = f[name]
                if ds.shape[1:] != arr.shape[1:]:
                    raise CaffeError("layer '%s' (HDF5Output): bottom '%s' changed shape from %s to "
                                     "%s" % (self.name, name, ds.shape[1:], arr.shape[1:]))
                n = ds.shape[0]
                ds.resize(n + arr.shape[0], axis=0)
                ds[n:] = arr

    def backward_cpu(self, top, propagate_down, bottom):
        """No gradient."""
