"""The fuzz targets: every reader of untrusted input, with its seeds and mutators.

A target is ``(name, family, make)``; ``make(src, workdir)`` builds one input from the choices of
``src`` (a :class:`harness.Source`), writes it under ``workdir`` and returns ``(fn, args, name)``:
the reader call to run and what its error must name. Seeds are real files written by caffepy's own
writers (built once per process, lazily) and the repository's models/*.prototxt.
"""
import functools
import glob
import json
import math
import os
import struct
import tempfile

import numpy as np

try:
    from . import harness
except ImportError:             # imported as a top-level module (tools/fuzz.py, pytest rootdir)
    import harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TINY_NET = """name: "fz"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 2 dim: 5 dim: 5 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 3 kernel_size: 3 } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip" inner_product_param { num_output: 2 } }
"""

V1_NET = """name: "v1"
input: "data"
input_dim: 1 input_dim: 2 input_dim: 5 input_dim: 5
layers { name: "conv" type: CONVOLUTION bottom: "data" top: "conv"
         blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
         convolution_param { num_output: 3 kernel_size: 3 } }
layers { name: "relu" type: RELU bottom: "conv" top: "conv" }
layers { name: "ip" type: INNER_PRODUCT bottom: "conv" top: "ip" inner_product_param { num_output: 2 } }
"""

V0_NET = """name: "v0"
input: "data"
input_dim: 1 input_dim: 2 input_dim: 5 input_dim: 5
layers { layer { name: "conv" type: "conv" num_output: 3 kernelsize: 3 stride: 1 pad: 1 }
         bottom: "data" top: "conv" }
layers { layer { name: "pool" type: "pool" pool: MAX kernelsize: 2 stride: 2 } bottom: "conv" top: "pool" }
layers { layer { name: "ip" type: "innerproduct" num_output: 2 } bottom: "pool" top: "ip" }
"""

SOLVER_V1 = """net: "net.prototxt"
base_lr: 0.01 momentum: 0.9 lr_policy: "step" stepsize: 10 gamma: 0.1
max_iter: 100 solver_type: NESTEROV snapshot_prefix: "x"
"""


# -- seeds -----------------------------------------------------------------------------------------
@functools.lru_cache(None)
def _seed_dir():
    return tempfile.mkdtemp(prefix="caffepy-fuzz-seeds-")


@functools.lru_cache(None)
def text_seeds():
    nets = [TINY_NET, V1_NET, V0_NET]
    solvers = [SOLVER_V1]
    for path in sorted(glob.glob(os.path.join(ROOT, "models", "*", "*.prototxt"))):
        with open(path) as f:
            text = f.read()
        (solvers if "solver" in os.path.basename(path) or "cluster" in path else nets).append(text)
    return nets, solvers


@functools.lru_cache(None)
def tiny_net():
    from caffepy.net import Net
    from caffepy.proto import caffe_pb2
    from caffepy.proto.io import read_net
    net = Net(read_net(TINY_NET), phase=caffe_pb2.TEST)
    rng = np.random.default_rng(0)
    for layer in net.layers:
        for b in layer.blobs:
            b.data[...] = rng.standard_normal(b.shape)
    return net


@functools.lru_cache(None)
def caffemodel_seeds():
    """Serialised NetParameters with the tiny net's weights: current, V1 (``layers``), legacy
    4-d blobs, double values, unpacked floats and NVCaffe raw fp16 / fp32 blobs."""
    from caffepy.proto import caffe_pb2
    from caffepy.proto.io import read_net
    net = tiny_net()
    path = os.path.join(_seed_dir(), "tiny.caffemodel")
    net.save(path)
    with open(path, "rb") as f:
        current = f.read()
    param = caffe_pb2.NetParameter()
    param.ParseFromString(current)
    seeds = [current]
    legacy = caffe_pb2.NetParameter()
    legacy.CopyFrom(param)
    for lp in legacy.layer:
        for bp in lp.blobs:
            dims = list(bp.shape.dim)
            bp.ClearField("shape")
            bp.num, bp.channels, bp.height, bp.width = ([1] * (4 - len(dims)) + dims)[-4:]
    seeds.append(legacy.SerializeToString())
    for kind, dtype in ((2, "<f2"), (1, "<f4"), (0, "<f8")):
        raw = caffe_pb2.NetParameter()
        raw.CopyFrom(param)
        for lp in raw.layer:
            for bp in lp.blobs:
                values = np.asarray(bp.data, np.float32)
                bp.ClearField("data")
                bp.raw_data_type = kind
                bp.raw_data = values.astype(dtype).tobytes()
        seeds.append(raw.SerializeToString())
    double = caffe_pb2.NetParameter()
    double.CopyFrom(param)
    for lp in double.layer:
        for bp in lp.blobs:
            bp.double_data.extend(bp.data)
            bp.ClearField("data")
    seeds.append(double.SerializeToString())
    v1 = read_net(V1_NET, upgrade=False)
    for lp, src in zip([lp for lp in v1.layers if lp.name in ("conv", "ip")],
                       [lp for lp in param.layer if lp.name in ("conv", "ip")]):
        lp.blobs.extend(src.blobs)
    seeds.append(v1.SerializeToString())
    return seeds


@functools.lru_cache(None)
def solverstate_seeds():
    from caffepy.data.state import rng_state
    from caffepy.solvers import state
    d = _seed_dir()
    rng = np.random.default_rng(1)
    history = [rng.standard_normal((3, 2, 3, 3)).astype(np.float32), rng.standard_normal(3),
               np.zeros((0,), np.float32)]
    out = []
    for hdf5 in (False, True):
        path = os.path.join(d, "s.solverstate" + (".h5" if hdf5 else ""))
        state.write_state(path, 7, "w.caffemodel", 2, history, hdf5=hdf5,
                          random=rng_state(np.random.default_rng(3)))
        with open(path, "rb") as f:
            out.append(f.read())
    return out


@functools.lru_cache(None)
def mean_seed():
    from caffepy.data.datum import write_mean
    path = os.path.join(_seed_dir(), "mean.binaryproto")
    write_mean(np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4), path)
    with open(path, "rb") as f:
        return f.read()


# -- protobuf field-level mutation -------------------------------------------------------------------
_FLOATS = (0.0, -0.0, 1.0, -1.0, 1e-45, 3.4e38, 1e308, float("inf"), float("-inf"), float("nan"))


def _int_range(fd):
    from google.protobuf.descriptor import FieldDescriptor as F
    return {F.TYPE_INT32: (-2 ** 31, 2 ** 31 - 1), F.TYPE_SINT32: (-2 ** 31, 2 ** 31 - 1),
            F.TYPE_SFIXED32: (-2 ** 31, 2 ** 31 - 1), F.TYPE_UINT32: (0, 2 ** 32 - 1),
            F.TYPE_FIXED32: (0, 2 ** 32 - 1), F.TYPE_INT64: (-2 ** 63, 2 ** 63 - 1),
            F.TYPE_SINT64: (-2 ** 63, 2 ** 63 - 1), F.TYPE_SFIXED64: (-2 ** 63, 2 ** 63 - 1),
            F.TYPE_UINT64: (0, 2 ** 64 - 1), F.TYPE_FIXED64: (0, 2 ** 64 - 1)}.get(fd.type)


def _value(src, fd):
    from google.protobuf.descriptor import FieldDescriptor as F
    rng = _int_range(fd)
    if rng:
        lo, hi = rng
        cands = [v for v in harness.INTERESTING_INTS if lo <= v <= hi] + [lo, hi]
        return src.choice(cands)
    if fd.type in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
        return src.choice(_FLOATS)
    if fd.type == F.TYPE_BOOL:
        return src.bool()
    if fd.type == F.TYPE_ENUM:
        return src.choice([v.number for v in fd.enum_type.values])
    if fd.type == F.TYPE_STRING:
        return src.choice(["", "x", "data", "conv", "ip", "../../etc/passwd", "\u00e9\u4e2d", "a" * 300,
                           "%s%d", "<f4", "|O", "<U8", ">f8", "V8", "S0", "f0", "<c16", "<M8"])
    if fd.type == F.TYPE_BYTES:
        return src.bytes(src.int(0, 24))
    return None


def _fields(msg, out, depth=0):
    """Every (message, field descriptor) present in ``msg``, and some absent ones, recursively."""
    if depth > 6:
        return
    present = msg.ListFields()
    names = {fd.name for fd, _ in present}
    for fd in msg.DESCRIPTOR.fields[:60]:
        if fd.name not in names and fd.message_type is None:
            out.append((msg, fd))
    for fd, value in present:
        out.append((msg, fd))
        if fd.message_type is not None:
            items = value if fd.label == fd.LABEL_REPEATED else [value]
            for item in list(items)[:8]:
                _fields(item, out, depth + 1)


def mutate_message(src, msg):
    """1-3 field-level edits: set a scalar to an extreme value, append to / clear a repeated
    field, drop a sub-message, duplicate a repeated message."""
    for _ in range(src.int(1, 3)):
        fields = []
        _fields(msg, fields)
        if not fields:
            return msg
        owner, fd = src.choice(fields)
        op = src.int(0, 3)
        try:
            if fd.message_type is not None:
                if fd.label == fd.LABEL_REPEATED:
                    items = getattr(owner, fd.name)
                    if op == 0 or not len(items):
                        items.add()
                    elif op == 1:
                        del items[src.int(0, len(items) - 1)]
                    else:
                        for _ in range(src.int(1, 3)):
                            items.add().CopyFrom(items[src.int(0, len(items) - 1)])
                else:
                    owner.ClearField(fd.name)
                continue
            value = _value(src, fd)
            if fd.label == fd.LABEL_REPEATED:
                items = getattr(owner, fd.name)
                if op == 0 and len(items):
                    del items[src.int(0, len(items) - 1):]
                elif op == 1 and len(items):
                    items[src.int(0, len(items) - 1)] = value
                else:
                    items.extend([value] * src.int(1, 3))
            else:
                setattr(owner, fd.name, value)
        except (ValueError, TypeError):
            pass
    return msg


def _blob_edit(src, bp):
    """Edits aimed at a BlobProto's declared size: huge / negative dims, legacy dims, values cut,
    raw bytes of another length or type."""
    op = src.int(0, 5)
    big = src.choice([10 ** 6, 10 ** 12, 2 ** 31 - 1, 2 ** 62, -1, -(2 ** 40), 0])
    if op == 0 and len(bp.shape.dim):
        bp.shape.dim[src.int(0, len(bp.shape.dim) - 1)] = big
    elif op == 1:
        bp.num, bp.channels = src.choice([1, 2 ** 31 - 1, -1, 0]), max(-2 ** 31, min(big, 2 ** 31 - 1))
    elif op == 2:
        bp.shape.dim.extend([src.choice([1, 2, 10 ** 6, 2 ** 40])] * src.int(1, 40))
    elif op == 3 and len(bp.data):
        del bp.data[src.int(0, len(bp.data) - 1):]
    elif op == 4:
        bp.raw_data_type = src.int(0, 5)
        bp.raw_data = src.bytes(src.int(0, 17))
    else:
        bp.ClearField("data")
        bp.ClearField("raw_data")
    return bp


def mutate_proto_bytes(src, data, msg_type, blobs=None):
    """``data`` (a serialised ``msg_type``) after field-level edits; ``blobs(msg)``: the BlobProtos
    to aim size edits at."""
    msg = msg_type()
    try:
        msg.ParseFromString(data)
    except Exception:
        return data
    if blobs is not None and src.bool():
        found = blobs(msg)
        if found:
            _blob_edit(src, src.choice(found))
    else:
        mutate_message(src, msg)
    return msg.SerializeToString()


def _net_blobs(msg):
    return [bp for lp in list(msg.layer) + list(msg.layers) for bp in lp.blobs]


# -- text mutation ---------------------------------------------------------------------------------
_TOKENS = ("{", "}", ":", '"', "layer {", "layers {", "input_dim: 100000000000", "dim: -1",
           "dim: 99999999999", "num_output: 4294967295", "kernel_size: 0", "stride: 0", "type: 9999",
           "name: \"\\xff\\u0000\"", "#", "\\", "\x00", "\u2028", "1e999", "-nan", "0x7fffffff",
           "type: CONVOLUTION", "layer { layer {", "blobs_lr: 1", "solver_type: 99", "lr_policy: \"x\"")


def mutate_text(src, text):
    op = src.int(0, 5)
    if op == 0:
        return harness.mutate_bytes(src, text.encode("utf-8"))
    if op == 1:                                # a number -> an extreme one
        import re
        nums = list(re.finditer(r"-?\d+(\.\d+)?(e-?\d+)?", text))
        if nums:
            m = src.choice(nums)
            repl = str(src.choice(harness.INTERESTING_INTS + (1e308, -1e-308)))
            text = text[:m.start()] + repl + text[m.end():]
        return text.encode("utf-8")
    if op == 2:                                # deep nesting
        depth = src.choice([50, 200, 1000, 20000])
        opener = src.choice(["layer { ", "layer { convolution_param { weight_filler { ", "a { ",
                             "layers { layer { ", "net_param { layer { ", "[ ", "{"])
        at = src.int(0, len(text))
        return (text[:at] + opener * depth + text[at:]).encode("utf-8")
    if op == 3:                                # a token inserted
        at = src.int(0, len(text))
        return (text[:at] + " " + src.choice(_TOKENS) + " " + text[at:]).encode("utf-8")
    if op == 4:                                # lines shuffled / duplicated / dropped
        lines = text.split("\n")
        if lines:
            i = src.int(0, len(lines) - 1)
            j = src.int(0, len(lines) - 1)
            lines.insert(j, lines[i]) if src.bool() else lines.pop(i)
        return "\n".join(lines).encode("utf-8")
    return harness.random_bytes(src)


def _write(workdir, name, data):
    path = os.path.join(workdir, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


# -- targets ---------------------------------------------------------------------------------------
def _prototxt_net(src, workdir):
    from caffepy.proto.io import read_net
    nets, _ = text_seeds()
    seed = src.choice(nets)
    data = mutate_text(src, seed) if src.int(0, 9) else b"" if src.bool() else b" \n\t"
    path = _write(workdir, "net.prototxt", data)
    return read_net, (path,), path


def _prototxt_solver(src, workdir):
    from caffepy.proto.io import read_solver
    _, solvers = text_seeds()
    data = mutate_text(src, src.choice(solvers))
    path = _write(workdir, "solver.prototxt", data)
    return read_solver, (path,), path


def _caffemodel_bytes(src):
    from caffepy.proto import caffe_pb2
    seed = src.choice(caffemodel_seeds())
    op = src.int(0, 9)
    if op < 4:
        return harness.mutate_bytes(src, seed)
    if op < 9:
        return mutate_proto_bytes(src, seed, caffe_pb2.NetParameter, _net_blobs)
    return harness.random_bytes(src)


def _copy_from(path):
    tiny_net().copy_from(path)


def _caffemodel(src, workdir):
    path = _write(workdir, "w.caffemodel", _caffemodel_bytes(src))
    return _copy_from, (path,), path


def _binary_net(src, workdir):
    from caffepy.proto.io import read_net
    path = _write(workdir, "net.caffemodel", _caffemodel_bytes(src))
    return read_net, (path,), path


def _read_state_both(path):
    from caffepy.solvers import state
    state.read_state(path)
    state.read_data_state(path)


def _solverstate(src, workdir):
    from caffepy.proto import caffe_pb2
    seed = solverstate_seeds()[0]
    op = src.int(0, 9)
    if op < 4:
        data = harness.mutate_bytes(src, seed)
    elif op < 9:
        data = mutate_proto_bytes(src, seed, caffe_pb2.SolverState, lambda m: list(m.history))
    else:
        data = harness.random_bytes(src)
    path = _write(workdir, "s.solverstate", data)
    return _read_state_both, (path,), path


def _binaryproto(src, workdir):
    from caffepy.data.datum import read_mean
    from caffepy.proto import caffe_pb2
    seed = mean_seed()
    op = src.int(0, 9)
    if op < 4:
        data = harness.mutate_bytes(src, seed)
    elif op < 9:
        data = mutate_proto_bytes(src, seed, caffe_pb2.BlobProto, lambda m: [m])
    else:
        data = harness.random_bytes(src)
    path = _write(workdir, "mean.binaryproto", data)
    return read_mean, (path,), path


# HDF5: files written by h5py with a drawn structure, or a real file's bytes mutated
def _h5_value(src):
    kind = src.int(0, 9)
    if kind == 0:
        return np.bytes_(b"text")
    if kind == 1:
        return np.float32(src.choice(_FLOATS))
    if kind == 2:
        return np.zeros((0, 3), np.float32)
    if kind == 3:
        return np.array([(1, 2.0)], dtype=[("a", "<i4"), ("b", "<f8")])
    if kind == 4:
        return np.ones(src.choice([(3, 2, 3, 3), (2, 27), (3,), (2,), (1, 1, 1, 1, 1)]), np.float16)
    if kind == 5:
        return np.array([True, False])
    if kind == 6:
        return np.array(["a", "bc"], dtype=object)
    if kind == 7:
        return np.full((2, 2), 7, np.int64)
    if kind == 8:
        return np.array(np.nan)
    return np.arange(src.choice([1, 3, 6, 54, 81]), dtype=np.float64)


def _h5_put(f, name, value):
    import h5py
    if value.dtype == object:
        f.create_dataset(name, data=value, dtype=h5py.string_dtype())
    else:
        f.create_dataset(name, data=value)


def _h5_structured(src, path, names):
    """An HDF5 file shaped like the readers' input, with drawn deviations."""
    import h5py
    with h5py.File(path, "w") as f:
        layout = src.int(0, 5)
        if layout == 0:
            _h5_put(f, src.choice(names), _h5_value(src))
            return
        for name in names:
            if src.int(0, 5) == 0:
                continue
            if layout == 1:
                _h5_put(f, name, _h5_value(src))
            else:
                g = f.require_group(name)
                for j in range(src.int(0, 3)):
                    key = src.choice([str(j), str(j), "x", "-1", "99"])
                    if key in g:
                        continue
                    if src.int(0, 4) == 0:
                        g.create_group(key)
                    else:
                        _h5_put(g, key, _h5_value(src))


@functools.lru_cache(None)
def hdf5_weight_seed():
    from caffepy.net.weights import save_hdf5
    path = os.path.join(_seed_dir(), "w.caffemodel.h5")
    save_hdf5(tiny_net(), path)
    with open(path, "rb") as f:
        return f.read()


def _load_hdf5(path):
    from caffepy.net.weights import load_hdf5
    load_hdf5(tiny_net(), path)


def _hdf5_weights(src, workdir):
    path = os.path.join(workdir, "w.caffemodel.h5")
    op = src.int(0, 9)
    if op < 3:
        _write(workdir, "w.caffemodel.h5", harness.mutate_bytes(src, hdf5_weight_seed()))
    elif op < 9:
        import h5py
        with h5py.File(path, "w") as f:
            top = src.choice(["data", "data", "data", "diff", "Data"])
            if src.int(0, 6) == 0:
                _h5_put(f, top, _h5_value(src))
            else:
                g = f.create_group(top)
                for name in ("conv", "ip", "relu", "nope"):
                    if src.int(0, 3) == 0:
                        continue
                    sub = g.create_group(name)
                    for j in range(src.int(0, 3)):
                        key = src.choice([str(j), str(j), str(j), "x"])
                        if key not in sub:
                            if src.int(0, 6) == 0:
                                sub.create_group(key)
                            else:
                                _h5_put(sub, key, _h5_value(src))
    else:
        _write(workdir, "w.caffemodel.h5", harness.random_bytes(src))
    return _load_hdf5, (path,), path


@functools.lru_cache(None)
def _hdf5_layer():
    from caffepy.layers.base import create_layer
    from caffepy.proto import caffe_pb2
    from caffepy.proto.io import parse_text
    d = _seed_dir()
    import h5py
    h5 = os.path.join(d, "train.h5")
    with h5py.File(h5, "w") as f:
        f.create_dataset("data", data=np.zeros((4, 2, 3), np.float32))
        f.create_dataset("label", data=np.arange(4, dtype=np.float32))
    listing = _write(d, "list.txt", h5.encode())
    lp = parse_text('name: "h5" type: "HDF5Data" top: "data" top: "label" '
                    'hdf5_data_param { source: "%s" batch_size: 2 }' % listing,
                    caffe_pb2.LayerParameter())
    layer = create_layer(lp, phase=caffe_pb2.TRAIN)
    from caffepy.blob import Blob
    tops = [Blob((), dtype=np.float32), Blob((), dtype=np.float32)]
    layer.setup([], tops)
    with open(h5, "rb") as f:
        seed = f.read()
    return layer, tops, seed


def _hdf5_data_run(path):
    layer, tops, _ = _hdf5_layer()
    layer.files = [path]
    layer.file_order = np.arange(1)
    layer._load(path)
    layer.reshape([], tops)
    layer.forward_cpu([], tops)


def _hdf5_data(src, workdir):
    path = os.path.join(workdir, "d.h5")
    op = src.int(0, 9)
    if op < 3:
        _write(workdir, "d.h5", harness.mutate_bytes(src, _hdf5_layer()[2]))
    elif op < 9:
        _h5_structured(src, path, ["data", "label"])
    else:
        _write(workdir, "d.h5", harness.random_bytes(src))
    return _hdf5_data_run, (path,), path


def _solverstate_h5(src, workdir):
    path = os.path.join(workdir, "s.solverstate.h5")
    op = src.int(0, 9)
    if op < 3:
        _write(workdir, "s.solverstate.h5", harness.mutate_bytes(src, solverstate_seeds()[1]))
    elif op < 9:
        import h5py
        with h5py.File(path, "w") as f:
            for name in ("iter", "current_step", "learned_net"):
                if src.int(0, 4):
                    _h5_put(f, name, _h5_value(src) if src.int(0, 2) == 0 else np.int32(3))
            if src.int(0, 3):
                g = f.create_group(src.choice(["history", "history", "caffepy_state"]))
                for j in range(src.int(0, 3)):
                    key = src.choice([str(j), str(j), "random", "x"])
                    if key not in g:
                        _h5_put(g, key, _h5_value(src))
    else:
        _write(workdir, "s.solverstate.h5", harness.random_bytes(src))
    return _read_state_both, (path,), path


# checkpoints
@functools.lru_cache(None)
def checkpoint_seed():
    """(workspace, {file name: bytes}) of a step written by caffepy's writer: a worker file, a
    server file (two slices and history), the manifest."""
    from caffepy.data.state import rng_state
    from caffepy.dist import checkpoint as ck
    ws = tempfile.mkdtemp(prefix="caffepy-fuzz-ckpt-")
    os.makedirs(ck.checkpoint_dir(ws))
    rng = np.random.default_rng(2)
    w = [ck.make_slice("conv_w", 0, 0, 0, 3, rng.standard_normal(54).astype(np.float32),
                       shape=(3, 2, 3, 3)),
         ck.make_slice("ip_b", 3, 0, 0, 3, rng.standard_normal(2).astype(np.float32))]
    s = [ck.make_slice("conv_w", 0, 0, 0, 3, rng.standard_normal(30).astype(np.float32),
                       history=[np.zeros(30, np.float32)], count=54),
         ck.make_slice("conv_w", 0, 1, 30, 3, rng.standard_normal(24).astype(np.float32),
                       history=[np.zeros(24, np.float32)], count=54),
         ck.make_slice("table", 4, 0, 0, 3, np.ones(6, np.float32), count=12, shape=(4, 3)),
         ck.make_slice("table", 4, 1, 0, 3, np.ones(6, np.float32), count=12, shape=(4, 3))]
    s[2].table_shards = s[3].table_shards = 2
    files = [ck.write_file(ws, 5, "worker", 0, w, random=rng_state(np.random.default_rng(0))),
             ck.write_file(ws, 5, "server", 0, s, current_step=1, solver_type="SGD")]
    ck.write_manifest(ws, 5, files, 1, "SGD", 1, 1)
    d = ck.checkpoint_dir(ws)
    out = {}
    for name in files + ["step5.manifest"]:
        with open(os.path.join(d, name), "rb") as f:
            out[name] = f.read()
    return out


def _ckpt_header_edit(src, data):
    """A format-2 file whose header (a DistCheckpoint) got field-level edits."""
    from caffepy.proto import caffe_pb2
    n = struct.unpack("<Q", data[8:16])[0]
    msg = caffe_pb2.DistCheckpoint()
    msg.ParseFromString(data[16:16 + n])
    if len(msg.slices) and src.bool():
        s = src.choice(list(msg.slices))
        field = src.choice(["raw_offset", "raw_length", "raw_history", "count", "offset",
                            "table_shards", "raw_dtype", "shape", "slice"])
        if field == "raw_dtype":
            s.raw_dtype = src.choice(["<f4", "<f8", "|O", "<U4", "V0", "S0", ">f4", "<i8", "bogus",
                                      "<f0", "|b1", "<c8", "<M8[s]", ""])
        elif field == "shape":
            del s.shape.dim[:]
            s.shape.dim.extend([src.choice([0, 1, 4, 5, -3, 10 ** 12])] * src.int(0, 3))
        else:
            lo, hi = _int_range(s.DESCRIPTOR.fields_by_name[field])
            setattr(s, field, src.choice([v for v in harness.INTERESTING_INTS if lo <= v <= hi]))
    else:
        mutate_message(src, msg)
    header = msg.SerializeToString()
    return data[:8] + struct.pack("<Q", len(header)) + header + data[16 + n:]


def _ckpt_run(ws, manifest_path, verify):
    from caffepy.dist import checkpoint as ck
    ck.latest_complete(ws, verify=verify)
    m = ck.read_manifest(manifest_path)
    for role in ("worker", "server"):
        ck.full_params(ws, m, np.float32, role=role)
    ck.worker_states(ws, m)


def _checkpoint(src, workdir):
    from caffepy.dist import checkpoint as ck
    from caffepy.proto import caffe_pb2
    files = dict(checkpoint_seed())
    d = ck.checkpoint_dir(workdir)
    os.makedirs(d, exist_ok=True)
    target = src.choice(sorted(files))
    data = files[target]
    op = src.int(0, 9)
    if op < 4:
        data = harness.mutate_bytes(src, data)
    elif op < 9:
        if target.endswith(".manifest"):
            data = mutate_proto_bytes(src, data, caffe_pb2.DistManifest)
        else:
            data = _ckpt_header_edit(src, data)
    else:
        data = harness.random_bytes(src)
    files[target] = data
    for name, blob in files.items():
        _write(d, name, blob)
    manifest = os.path.join(d, "step5.manifest")
    if not target.endswith(".manifest") and src.bool():    # sizes recorded as the file has them
        m = caffe_pb2.DistManifest()
        m.ParseFromString(files["step5.manifest"])
        for i, f in enumerate(m.file):
            m.size[i] = len(files[f])
            m.checksum[i] = ck.checksum(os.path.join(d, f))
        _write(d, "step5.manifest", m.SerializeToString())
    return _ckpt_run, (workdir, manifest, src.bool()), d    # an error names a file of the step


# net JSON
@functools.lru_cache(None)
def netjson_seed():
    from caffepy.draw.netjson import dumps, net_json
    from caffepy.proto.io import read_net
    text = open(os.path.join(ROOT, "models", "lenet", "lenet_train_test.prototxt")).read()
    return dumps(net_json(read_net(text)))


def _json_edit(src, doc):
    """Replace a value somewhere in ``doc`` with one of another type."""
    slots = []

    def walk(node, depth):
        if depth > 8:
            return
        if isinstance(node, dict):
            for k in list(node):
                slots.append((node, k))
                walk(node[k], depth + 1)
        elif isinstance(node, list):
            for i in range(len(node)):
                slots.append((node, i))
                walk(node[i], depth + 1)
    walk(doc, 0)
    if not slots:
        return doc
    for _ in range(src.int(1, 3)):
        node, key = src.choice(slots)
        node[key] = src.choice([None, 1, -1, 1e308, "x", [], {}, [1, 2], {"id": []}, True,
                                "ALL", "TEST", "layer", "blob", [[[]]], {"a": {"b": {}}}])
    return doc


def _read_net_json(path):
    from caffepy.draw.netjson import read_net_json, select_phase
    doc = read_net_json(path)
    for phase in ("TRAIN", "TEST", "ALL"):
        select_phase(doc, phase)


def _netjson(src, workdir):
    seed = netjson_seed()
    op = src.int(0, 9)
    if op < 3:
        data = harness.mutate_bytes(src, seed.encode())
    elif op < 8:
        data = json.dumps(_json_edit(src, json.loads(seed))).encode()
    elif op < 9:
        data = (src.choice(["[", "{\"a\":", "[{\"schema\": "]) * src.choice([10, 1000, 100000])).encode()
    else:
        data = harness.random_bytes(src)
    path = _write(workdir, "net.json", data)
    return _read_net_json, (path,), path


# MPI frames
@functools.lru_cache(None)
def frame_seeds():
    from caffepy.dist import frames
    from caffepy.proto import caffe_pb2
    out = []
    for sizes in ((3, 0), (5000,), (40000, 2), ()):
        entries, lists = [], []
        for k, n in enumerate(sizes or (0,)):
            h = caffe_pb2.DistHeader()
            h.dst = k
            h.step = 7
            bufs = [np.arange(n, dtype=np.float32), np.arange(k + 1, dtype=np.int64)] if sizes else []
            entries.append(frames.encode(h.SerializeToString(), bufs))
            lists.append(bufs)
        out.append(frames.pack_batch(entries, lists)[0])
    return out


def _plan_batch(raw):
    from caffepy.dist import frames
    frames.plan_batch(raw, source=3)


def _frame(src, workdir):
    from caffepy.dist import frames
    op = src.int(0, 9)
    if op < 6:
        data = harness.mutate_bytes(src, src.choice(frame_seeds()))
    elif op < 9:      # an entry with drawn buffer descriptions
        descr = [(src.choice([b"<f4", b"<f8", b"|u1", b"<i8", b"|O", b"<U4", b"V0", b"xx", b"\xff\xfe",
                              b"<f0", b"", b"<M8", b">f4"]),
                  src.choice(harness.INTERESTING_INTS[:-1])) for _ in range(src.int(0, 3))]
        entry = frames._MSG.pack(0, len(descr)) + b"".join(frames._BUF.pack(c, n) for c, n in descr)
        data = frames.LEN.pack(len(entry)) + entry + src.bytes(src.int(0, 24))
    else:
        data = harness.random_bytes(src)
    return _plan_batch, (data,), "rank 3"


# the ONNX exporter's inputs
def _export(proto, weights):
    from caffepy.onnx.export import load_net, to_model
    to_model(load_net(proto, weights))


def _onnx(src, workdir):
    from caffepy.proto import caffe_pb2
    from caffepy.proto.io import read_net
    if src.bool():
        proto = _write(workdir, "net.prototxt", mutate_text(src, TINY_NET))
        weights = _write(workdir, "w.caffemodel", caffemodel_seeds()[0])
        return _export, (proto, weights), workdir       # the error names the net or the weights
    if src.bool():
        text = str(mutate_message(src, read_net(TINY_NET)))
        proto = _write(workdir, "net.prototxt", text.encode())
        weights = _write(workdir, "w.caffemodel", caffemodel_seeds()[0])
        return _export, (proto, weights), workdir
    proto = _write(workdir, "net.prototxt", TINY_NET.encode())
    weights = _write(workdir, "w.caffemodel", _caffemodel_bytes(src))
    return _export, (proto, weights), weights


# Datum records (LMDB / LevelDB values)
@functools.lru_cache(None)
def datum_seeds():
    import io
    from PIL import Image
    from caffepy.data.datum import array_to_datum, encoded_datum
    png = io.BytesIO()
    Image.fromarray(np.arange(48, dtype=np.uint8).reshape(4, 4, 3)).save(png, format="PNG")
    return [array_to_datum(np.arange(24, dtype=np.uint8).reshape(2, 3, 4), 1).SerializeToString(),
            array_to_datum(np.ones((1, 2, 2), np.float32), 0).SerializeToString(),
            encoded_datum(png.getvalue(), 3).SerializeToString()]


def _datum_record(value, what):
    from caffepy.data.datum import datum_to_array, parse_datum
    datum_to_array(parse_datum(value, what), None, what)


def _record_bytes(src):
    from caffepy.proto import caffe_pb2
    seed = src.choice(datum_seeds())
    op = src.int(0, 9)
    if op < 4:
        return harness.mutate_bytes(src, seed)
    if op < 9:
        d = caffe_pb2.Datum()
        d.ParseFromString(seed)
        if src.bool():
            setattr(d, src.choice(["channels", "height", "width"]),
                    src.choice([0, -1, 2 ** 31 - 1, -2 ** 31, 65536, 3]))
        else:
            mutate_message(src, d)
        return d.SerializeToString()
    return harness.random_bytes(src)


def _db_record(src, workdir):
    what = os.path.join(workdir, "train_lmdb") + ": key b'00000001'"
    return _datum_record, (_record_bytes(src), what), os.path.join(workdir, "train_lmdb")


def _lmdb_layer(db_path):
    from caffepy.layers.base import create_layer
    from caffepy.proto import caffe_pb2
    from caffepy.proto.io import parse_text
    from caffepy.blob import Blob
    lp = parse_text('name: "d" type: "Data" top: "data" top: "label" '
                    'data_param { source: "%s" backend: LMDB batch_size: 2 }' % db_path,
                    caffe_pb2.LayerParameter())
    layer = create_layer(lp, phase=caffe_pb2.TEST)
    tops = [Blob((), dtype=np.float32), Blob((), dtype=np.float32)]
    layer.setup([], tops)
    layer.reshape([], tops)
    layer.forward([], tops)


def _lmdb(src, workdir):
    from caffepy.data.db import open_db
    path = os.path.join(workdir, "train_lmdb")
    with open_db(path, "lmdb", "w") as db:
        for i in range(src.int(1, 3)):
            db.put(b"%08d" % i, _record_bytes(src) if src.int(0, 2) else src.choice(datum_seeds()))
    return _lmdb_layer, (path,), path


TARGETS = [
    ("prototxt_net", "prototxt", _prototxt_net),
    ("prototxt_solver", "prototxt", _prototxt_solver),
    ("caffemodel", "binary", _caffemodel),
    ("binary_net", "binary", _binary_net),
    ("solverstate", "binary", _solverstate),
    ("binaryproto", "binary", _binaryproto),
    ("hdf5_weights", "hdf5", _hdf5_weights),
    ("hdf5_data", "hdf5", _hdf5_data),
    ("solverstate_h5", "hdf5", _solverstate_h5),
    ("checkpoint", "checkpoint", _checkpoint),
    ("netjson", "netjson", _netjson),
    ("frames", "frames", _frame),
    ("onnx_export", "onnx", _onnx),
    ("db_record", "db", _db_record),
    ("lmdb_data", "db", _lmdb),
]


def targets(family=None):
    return [t for t in TARGETS if family is None or t[1] == family]


def run_one(make, src, workdir):
    """Build one input and run its reader; (problem or None, outcome)."""
    for name in os.listdir(workdir):
        p = os.path.join(workdir, name)
        if os.path.isdir(p):
            import shutil
            shutil.rmtree(p)
        else:
            os.unlink(p)
    fn, args, name = make(src, workdir)
    out = harness.run_case(fn, *args)
    return harness.problem(out, name), out


def warm():
    """Build every seed (before forking, so children share them)."""
    text_seeds(), caffemodel_seeds(), solverstate_seeds(), mean_seed(), hdf5_weight_seed()
    _hdf5_layer(), checkpoint_seed(), netjson_seed(), frame_seeds(), datum_seeds()
    math.isfinite(0)
