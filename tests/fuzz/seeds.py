"""Seeds and mutators for the fuzz targets. The seeds are the sample nets and solver (``TINY_NET``,
``V1_NET``, ``V0_NET``, ``SOLVER_V1``), the repository's models/*.prototxt and real files written by
caffepy's own writers (caffemodels in each blob encoding, solverstates, a mean binaryproto), built
once per process, lazily. The mutators draw their choices from a :class:`harness.Source`:
field-level protobuf edits (``mutate_message``, ``mutate_proto_bytes``, with edits aimed at a
BlobProto's declared size), text edits of prototxt (``mutate_text``); ``_write`` puts an input
under a target's work directory.
"""
import atexit
import functools
import glob
import os
import shutil
import tempfile

import numpy as np

from caffepy.proto import is_repeated

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
"""  # noqa: E501

V1_NET = """name: "v1"
input: "data"
input_dim: 1 input_dim: 2 input_dim: 5 input_dim: 5
layers { name: "conv" type: CONVOLUTION bottom: "data" top: "conv"
         blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
         convolution_param { num_output: 3 kernel_size: 3 } }
layers { name: "relu" type: RELU bottom: "conv" top: "conv" }
layers { name: "ip" type: INNER_PRODUCT bottom: "conv" top: "ip" inner_product_param { num_output: 2 } }
"""  # noqa: E501

V0_NET = """name: "v0"
input: "data"
input_dim: 1 input_dim: 2 input_dim: 5 input_dim: 5
layers { layer { name: "conv" type: "conv" num_output: 3 kernelsize: 3 stride: 1 pad: 1 }
         bottom: "data" top: "conv" }
layers { layer { name: "pool" type: "pool" pool: MAX kernelsize: 2 stride: 2 } bottom: "conv" top: "pool" }
layers { layer { name: "ip" type: "innerproduct" num_output: 2 } bottom: "pool" top: "ip" }
"""  # noqa: E501

SOLVER_V1 = """net: "net.prototxt"
base_lr: 0.01 momentum: 0.9 lr_policy: "step" stepsize: 10 gamma: 0.1
max_iter: 100 solver_type: NESTEROV snapshot_prefix: "x"
"""


# -- seeds -----------------------------------------------------------------------------------------
@functools.lru_cache(None)
def _seed_dir():
    """A scratch folder for seed files, removed when the process ends."""
    d = tempfile.mkdtemp(prefix="caffepy-fuzz-seeds-")
    atexit.register(shutil.rmtree, d, True)
    return d


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


# -- protobuf field-level mutation -----------------------------------------------------------------
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
        return src.choice(["", "x", "data", "conv", "ip", "../../etc/passwd", "\u00e9\u4e2d",
                           "a" * 300, "%s%d", "<f4", "|O", "<U8", ">f8", "V8", "S0", "f0", "<c16",
                           "<M8"])
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
            items = value if is_repeated(fd) else [value]
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
                if is_repeated(fd):
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
            if is_repeated(fd):
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
        bp.num, bp.channels = (src.choice([1, 2 ** 31 - 1, -1, 0]),
                               max(-2 ** 31, min(big, 2 ** 31 - 1)))
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
           "dim: 99999999999", "num_output: 4294967295", "kernel_size: 0", "stride: 0",
           "type: 9999", "name: \"\\xff\\u0000\"", "#", "\\", "\x00", "\u2028", "1e999", "-nan",
           "0x7fffffff", "type: CONVOLUTION", "layer { layer {", "blobs_lr: 1", "solver_type: 99",
           "lr_policy: \"x\"")


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
