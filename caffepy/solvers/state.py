"""Solver snapshots in Caffe's formats: ``.solverstate`` (binary SolverState) and ``.solverstate.h5``.

``<prefix>_iter_<N>.caffemodel`` (binary NetParameter) or ``.caffemodel.h5`` holds the weights;
``<prefix>_iter_<N>.solverstate`` holds a ``SolverState`` message:

- ``iter``: the number of updates done;
- ``learned_net``: the path of the weights file written with it;
- ``current_step``: the lr-policy step counter (step / multistep);
- ``history``: one BlobProto per history blob, in the solver's order (SGD/Nesterov/AdaGrad/RMSProp:
  one per learnable param; AdaDelta/Adam: two, all first moments then all second moments).

The HDF5 form (``snapshot_format: HDF5``) has scalar datasets ``iter``, ``current_step``, the string
``learned_net`` and a group ``history`` with datasets ``0``, ``1``, ... caffepy adds where the data
stands (caffepy.data.state): SolverState fields ``layer_state`` (20000: each data layer's cursor and
random state) and ``random`` (20001: the solver thread's generator), or in HDF5 a group
``caffepy_state`` of serialised LayerStates; Caffe ignores them, and a state without them resumes
the data from its start as before. Both are written atomically
(temporary file in the same directory, fsync, rename), the weights before the state that names them.
"""
import os

import numpy as np

from ..blob import blobproto_shape
from ..errors import SolverError, file_errors
from ..proto import caffe_pb2, io as proto_io, packed


def snapshot_filename(prefix, it, extension):
    return "%s_iter_%d%s" % (prefix, it, extension)


def _h5py():
    try:
        import h5py
    except ImportError:
        raise SolverError("snapshot_format HDF5 needs h5py (pip install h5py)")
    return h5py


_HISTORY = 3    # SolverState.history


def _history_chunks(arr):
    """A history blob as BlobProto chunks: float64 arrays as ``double_data``, others as ``data``."""
    return packed.blob_chunks(arr, double=arr.dtype == np.float64)


def _reshaped(values, bp, what):
    """``values`` in the BlobProto's shape; a count that does not match is a SolverError."""
    shape = blobproto_shape(bp)
    count = 1
    for d in shape:
        count *= int(d)
    try:
        if min(shape, default=0) < 0 or count != values.size:
            raise ValueError
        return values.reshape(shape)
    except ValueError:          # (a zero dim beside dims whose product overflows numpy's intp)
        raise SolverError("%s: holds %d values for shape %s" % (what, values.size, tuple(shape)))


def _values_to_array(bp, values, dtype, what="history blob"):
    for name in ("double_data", "data"):
        if name in values:
            return _reshaped(values[name].astype(dtype), bp, what)
    return _blobproto_to_array(bp, dtype, what)


def _blobproto_to_array(bp, dtype, what="history blob"):
    values = packed.field_array(bp, "double_data", dtype)
    if values is None:
        values = packed.field_array(bp, "data", dtype)
    if values is None:
        values = np.zeros(0, dtype)
    return _reshaped(values, bp, what)


def write_state(path, it, learned_net, current_step, history, hdf5=False, layer_state=(),
                random=None):
    """Write a solver state file (binary SolverState, or HDF5 when ``hdf5``), atomically.
    ``layer_state`` / ``random``: LayerStates of the data layers and the solver's generator
    (caffepy.data.state), for an exact resume."""
    if not hdf5:
        state = caffe_pb2.SolverState()
        state.iter = int(it)
        state.learned_net = learned_net
        state.current_step = int(current_step)
        state.layer_state.extend(layer_state)
        if random is not None:
            state.random.CopyFrom(random)
        chunks = [state.SerializeToString()]
        for h in history:
            body = _history_chunks(np.asarray(h))
            chunks += [packed.varint(_HISTORY << 3 | 2), packed.varint(packed.chunks_len(body))] + body
        proto_io.atomic_write(path, chunks)
        return
    h5py = _h5py()
    with proto_io.atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as f:
            f.create_dataset("iter", data=np.int32(it))
            f.create_dataset("learned_net", data=np.bytes_(learned_net.encode("utf-8")))
            f.create_dataset("current_step", data=np.int32(current_step))
            g = f.create_group("history")
            for i, h in enumerate(history):
                g.create_dataset(str(i), data=h)
            extra = f.create_group("caffepy_state")       # serialised LayerStates, as uint8
            for i, st in enumerate(list(layer_state) + ([random] if random is not None else [])):
                name = "random" if random is not None and i == len(layer_state) else str(i)
                extra.create_dataset(name, data=np.frombuffer(st.SerializeToString(), np.uint8))


def _h5_int(f, name, path, h5py):
    ds = f[name]
    if not isinstance(ds, h5py.Dataset) or ds.size != 1 or ds.dtype.kind not in "iub":
        raise SolverError("%s: %s is not an integer" % (path, name))
    return int(np.asarray(ds[()]).reshape(()))


def read_state(path, dtype=np.float32):
    """``(iter, learned_net, current_step, [history arrays])`` from a .solverstate or .solverstate.h5."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise SolverError("%s: no such solver state file" % path)
    if path.endswith(".h5"):
        h5py = _h5py()
        with file_errors(path, "not a readable HDF5 solver state", SolverError):
            with h5py.File(path, "r") as f:
                it = _h5_int(f, "iter", path, h5py)
                current_step = _h5_int(f, "current_step", path, h5py) if "current_step" in f else 0
                learned = ""
                if "learned_net" in f:
                    raw = f["learned_net"]
                    if not isinstance(raw, h5py.Dataset) or raw.shape != () or raw.dtype.kind not in "SOU":
                        raise SolverError("%s: learned_net is not a string" % path)
                    raw = raw[()]
                    learned = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
                group = f["history"] if "history" in f else {}
                if not isinstance(group, (dict, h5py.Group)):
                    raise SolverError("%s: history is not a group" % path)
                history = []
                for i in range(len(group)):
                    ds = group.get(str(i))
                    if not isinstance(ds, h5py.Dataset) or ds.dtype.kind not in "fiub":
                        raise SolverError("%s: history/%d is not a numeric dataset" % (path, i))
                    history.append(np.asarray(ds[()], dtype=dtype))
        return it, learned, current_step, history
    raw = proto_io._read_bytes(path)
    split = packed.split_blob_field(raw, _HISTORY)      # history values as views of the bytes
    state = caffe_pb2.SolverState()
    proto_io.parse_binary(raw if split is None else split[0], state, filename=path)
    if split is None:
        history = [_blobproto_to_array(bp, dtype, "%s: history blob %d" % (path, i))
                   for i, bp in enumerate(state.history)]
    else:
        history = [_values_to_array(bp, vals, dtype, "%s: history blob %d" % (path, i))
                   for i, (bp, vals) in enumerate(zip(state.history, split[1]))]
    return state.iter, state.learned_net, state.current_step, history


def read_data_state(path):
    """``([LayerState], random LayerState or None)`` saved in a state file (empty when it was
    written by Caffe or an older caffepy)."""
    path = os.fspath(path)
    if path.endswith(".h5"):
        h5py = _h5py()
        states, random = [], None
        with file_errors(path, "not a readable HDF5 solver state", SolverError), h5py.File(path, "r") as f:
            g = f["caffepy_state"] if "caffepy_state" in f else {}
            if not isinstance(g, (dict, h5py.Group)):
                raise SolverError("%s: caffepy_state is not a group" % path)
            for name in sorted(g, key=lambda n: (n == "random", int(n) if n.isdigit() else 0)):
                ds = g[name]
                if not isinstance(ds, h5py.Dataset) or ds.dtype != np.uint8 or ds.ndim != 1:
                    raise SolverError("%s: caffepy_state/%s is not a serialised LayerState" % (path, name))
                st = proto_io.parse_binary(ds[()].tobytes(), caffe_pb2.LayerState(),
                                           "%s: caffepy_state/%s" % (path, name))
                if name == "random":
                    random = st
                else:
                    states.append(st)
        return states, random
    raw = proto_io._read_bytes(path)
    split = packed.split_blob_field(raw, _HISTORY)
    state = caffe_pb2.SolverState()
    proto_io.parse_binary(raw if split is None else split[0], state, filename=path)
    return list(state.layer_state), (state.random if state.HasField("random") else None)


def resolve_learned_net(learned_net, state_path):
    """The weights file a state names: as written (relative to the cwd, as Caffe), else next to it."""
    if not learned_net or os.path.exists(learned_net):
        return learned_net
    beside = os.path.join(os.path.dirname(os.path.abspath(state_path)), os.path.basename(learned_net))
    if os.path.exists(beside):
        return beside
    raise SolverError("%s: the weights it names, %s, do not exist" % (state_path, learned_net))


def load_weights(net, path):
    """Copy trained layers from a .caffemodel or a .caffemodel.h5 into ``net``."""
    net.copy_from(path)
