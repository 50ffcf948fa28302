"""Where the data stands: data layers' cursors and random state, saved for an exact resume.

A layer that reads data exposes ``get_data_state()`` (a dict) and ``set_data_state(state)``:

=================  ===========================================================================
Data (LMDB/LevelDB) ``offset`` (items advanced since the first key), ``key`` (the next item's key),
                    ``transform`` (the transformer's generator: crops, mirrors)
ImageData           ``pos``, ``order`` (the shuffled list order), ``shuffle`` and ``transform``
                    generators
WindowData          ``sample`` (window and mirror draws) and ``transform`` generators
HDF5Data            ``file``, ``row``, ``offset``, ``file_order``, ``row_order``, ``shuffle``
MemoryData          ``pos``
Python              whatever the user's layer returns from an optional ``get_state()`` (a dict
                    of numpy arrays, ints, floats, strings or bytes); ``set_state(dict)`` gets it
                    back on resume
=================  ===========================================================================

For the prefetching layers the state is the one *before the next batch the net consumes* (not
the prefetch thread's position, which runs ahead): each prefetched buffer carries the loader's
state after it was filled, and ``forward`` makes it the layer's state when it copies the buffer.

On disk (a SolverState's ``layer_state`` / ``random`` fields, a dist checkpoint's worker file)
each state is a ``LayerState``: the layer name and ``StateArray`` values (name, numpy dtype,
shape, raw bytes). A numpy ``Generator`` is stored as the JSON text of its
``bit_generator.state`` (dtype ``json``; loaders hand over that dict, taken when the batch was
made, since the Generator itself moves on); strings as UTF-8 (dtype ``str``). No pickle.
"""
import json

import numpy as np

from ..errors import CaffeError
from ..proto import caffe_pb2


def _jsonable(x):
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, np.ndarray):
        return {"__array__": x.tolist(), "dtype": x.dtype.str}
    if isinstance(x, np.integer):
        return int(x)
    return x


def _from_json(x):
    if isinstance(x, dict):
        if "__array__" in x:
            return np.asarray(x["__array__"], dtype=x["dtype"])
        return {k: _from_json(v) for k, v in x.items()}
    return x


def encode(name, values):
    """A LayerState named ``name`` holding the dict ``values``."""
    out = caffe_pb2.LayerState()
    out.layer = name
    for key in sorted(values):
        v = values[key]
        a = out.value.add()
        a.name = key
        if isinstance(v, np.random.Generator):
            v = v.bit_generator.state
        if isinstance(v, dict):        # a bit-generator state (or any JSON-able dict)
            a.dtype, a.data = "json", json.dumps(_jsonable(v)).encode("utf-8")
        elif isinstance(v, str):
            a.dtype, a.data = "str", v.encode("utf-8")
        elif isinstance(v, bytes):
            a.dtype, a.data = "bytes", v
        else:
            arr = np.asarray(v)
            if arr.dtype.kind not in "biuf":
                raise CaffeError("state of %s: value '%s' of type %s cannot be saved (numbers, arrays, "
                                 "str, bytes, dicts of those and numpy Generators can)"
                                 % (name, key, type(v).__name__))
            arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)     # keeps 0-d arrays 0-d
            a.dtype, a.data = arr.dtype.str, arr.tobytes()
            a.shape.extend(arr.shape)
    return out


def decode(state):
    """The dict of a LayerState: arrays (0-d ones as Python numbers), str, bytes; ``json`` values
    (generator states) as dicts (give those to :func:`set_rng`)."""
    out = {}
    for a in state.value:
        if a.dtype == "json":
            out[a.name] = _from_json(json.loads(a.data.decode("utf-8")))
        elif a.dtype == "str":
            out[a.name] = a.data.decode("utf-8")
        elif a.dtype == "bytes":
            out[a.name] = bytes(a.data)
        else:
            arr = np.frombuffer(a.data, np.dtype(a.dtype)).reshape(tuple(a.shape)).copy()
            out[a.name] = arr.item() if arr.ndim == 0 else arr
    return out


def set_rng(gen, state):
    """Put a bit-generator state (from :func:`decode`) back into the Generator ``gen``."""
    gen.bit_generator.state = state


def rng_state(gen, name="rng"):
    return encode(name, {"state": gen})


def restore_rng(gen, state):
    set_rng(gen, decode(state)["state"])


def net_state(net):
    """[LayerState] of every layer of ``net`` that has a data state."""
    out = []
    for name, layer in zip(net._layer_names, net.layers):
        get = getattr(layer, "get_data_state", None)
        if get is None:
            continue
        values = get()
        if values is not None:
            out.append(encode(name, values))
    return out


def restore_net(net, states, source):
    """Give each saved LayerState back to the net's layer of that name (``source`` names the file
    in errors). A saved layer the net lacks is an error; a net layer with no saved state keeps its
    fresh state."""
    names = net._layer_names
    for st in states:
        if st.layer not in names:
            raise CaffeError("%s: saved data state for layer '%s', which the net has no longer"
                             % (source, st.layer))
        layer = net.layers[names.index(st.layer)]
        setter = getattr(layer, "set_data_state", None)
        if setter is None:
            raise CaffeError("%s: layer '%s' cannot take back its saved data state" % (source, st.layer))
        setter(decode(st))


class ListLoaderState(object):
    """``get_state`` / ``set_state`` for a loader that reads a list file into ``self.lines``,
    shuffles it in place with ``self.rng`` (through :meth:`shuffle_lines`) and walks it with
    ``self.pos`` (DenseImageData, ImageSegData). The state is ``pos``, ``order`` (each line's index
    in the list as read) and the ``rng`` generator. Call :meth:`remember_lines` once the list is
    read, before any shuffle."""

    def read_lines(self, source, want, usage, exact=True):
        """The non-empty lines of the list file ``source``, each a tuple of ``want`` names
        (``exact=False``: at least ``want``; missing names become ""), then :meth:`remember_lines`.
        Errors name the file, the line and ``usage`` (the layer wraps them with its name)."""
        self.lines = []
        try:
            with open(source) as f:
                for lineno, line in enumerate(f, 1):
                    parts = line.split()
                    if not parts:
                        continue
                    if len(parts) < want or (exact and len(parts) != want):
                        raise CaffeError("%s:%d: expected %s" % (source, lineno, usage))
                    self.lines.append(tuple(parts[:want]) if want > 1 else (parts[0], ""))
        except OSError as e:
            raise CaffeError("cannot open image list %s: %s" % (source, e))
        if not self.lines:
            raise CaffeError("image list %s is empty" % source)
        self.remember_lines()

    def remember_lines(self):
        self._listed, self._order = list(self.lines), None

    def shuffle_lines(self):
        self.rng.shuffle(self.lines)
        self._order = None

    def get_state(self):
        if self._order is None:          # lines equal as text are interchangeable
            where = {}
            for i, line in enumerate(self._listed):
                where.setdefault(line, []).append(i)
            self._order = np.asarray([where[line].pop(0) for line in self.lines], np.int64)
        return {"pos": self.pos, "order": self._order, "rng": self.rng.bit_generator.state}

    def set_state(self, state):
        order = np.asarray(state["order"], np.int64)
        if len(order) != len(self._listed):
            raise CaffeError("%s: the saved state is of a list of %d lines, this one has %d"
                             % (self.what, len(order), len(self._listed)))
        self.lines = [self._listed[i] for i in order]
        self._order = order
        self.pos = int(state["pos"])
        set_rng(self.rng, state["rng"])
