"""The candidate input sizes of caffepy.zoo.input_search, in the order they are tried.

:func:`candidates` lists (channels, height, width, guessed, where) for a net whose data layers
leave their size open: the reader's guessed size, sizes ``--input`` gives, sizes the net itself
names (:func:`net_sizes`: crop / resize fields, height / width pairs, declared input shapes), the
input sizes the net files beside it declare (:func:`family_sizes`: a train_val.prototxt's
deploy.prototxt), the default, the usual sizes (:data:`USUAL`) and stride-friendly squares
(those divisible by the net's :func:`stride_divisor` first, when it is over 32); channel counts
besides the reader's own where the file declares neither. :func:`weight_shapes` and :func:`check_weights` make
a .caffemodel's blob shapes a check on each candidate.
"""
import os
import re

from google.protobuf.descriptor import FieldDescriptor as _FD

from ..errors import ShapeError
from ..proto import is_repeated
from ..proto.io import without_comments

USUAL = (224, 227, 256, 299, 300, 320, 321, 384, 416, 448, 473, 512, 28, 32, 40, 48, 64, 96, 112,
         128, 160, 192, 480, 500, 513, 600)
_NOT_SIZES = ("kernel", "stride", "pad", "dilation", "pool", "step", "offset", "min", "max")


def shapes_by_top(param):
    return {t: tuple(s.dim) for lp in param.layer if lp.type == "Input"
            for t, s in zip(lp.top, lp.input_param.shape)}


def _walk(msg):
    """(message, field name, value) of every set int field of ``msg`` and its sub-messages.
    The type constants are FieldDescriptor's class attributes: protobuf 4.21's descriptor objects
    have no CPPTYPE_* attributes of their own."""
    for fd, value in msg.ListFields():
        if fd.type == _FD.TYPE_MESSAGE:
            for sub in (value if is_repeated(fd) else [value]):
                for item in _walk(sub):
                    yield item
        elif fd.cpp_type in (_FD.CPPTYPE_INT32, _FD.CPPTYPE_UINT32, _FD.CPPTYPE_INT64,
                             _FD.CPPTYPE_UINT64) and not is_repeated(fd):
            yield msg, fd.name, int(value)


def _pairs(lp):
    """(h, w, field names) of the size fields of one layer."""
    out = []
    for msg, name, v in _walk(lp):
        if name == "crop_size" and v >= 8:
            out.append((v, v, "crop_size"))
        for hs, ws in (("height", "width"), ("_h", "_w")):
            if name.endswith(hs) and not name.startswith(_NOT_SIZES) and v >= 8:
                wname = name[:-len(hs)] + ws
                if wname in msg.DESCRIPTOR.fields_by_name and getattr(msg, wname) >= 8:
                    out.append((v, int(getattr(msg, wname)), "%s / %s" % (name, wname)))
    return out


def _dims(shape):
    d = [int(x) for x in shape.dim]
    return (d[2], d[3]) if len(d) == 4 and min(d[2:]) >= 8 else None


def net_sizes(net_param):
    """[(h, w, where)] sizes the net file itself names (see the module doc), in the order tried."""
    from . import is_data_layer
    readers, others, shapes = [], [], []
    for lp in net_param.layer:
        for h, w, what in _pairs(lp):
            where = "%s of layer '%s'" % (what, lp.name)
            (readers if is_data_layer(lp) or what == "crop_size" else others).append((h, w, where))
        for what, field, shape_list in (("Input", "input_param", "shape"),
                                        ("DummyData", "dummy_data_param", "shape"),
                                        ("Reshape", "reshape_param", "shape")):
            if lp.type == what:
                sub = getattr(getattr(lp, field), shape_list)
                for s in (sub if what != "Reshape" else [sub]):
                    if _dims(s):
                        shapes.append(_dims(s) + ("%s shape of layer '%s'" % (what, lp.name),))
    for s in net_param.input_shape:
        if _dims(s):
            shapes.append(_dims(s) + ("input_shape of the net",))
    dims = list(net_param.input_dim)
    for i in range(0, len(dims) - 3, 4):
        if min(dims[i + 2:i + 4]) >= 8:
            shapes.append((dims[i + 2], dims[i + 3], "input_dim of the net"))
    return readers + others + shapes


FAMILY_FILES = 16                   # net files beside it read for their sizes, at most
FAMILY_BYTES = 2 << 20              # each at most this long
_NET_FILE = re.compile(r"\.(prototxt|pt)$", re.I)
_SHAPE_BLOCK = re.compile(r"\b(?:input_shape|shape)\s*:?\s*\{([^{}]*)\}")
_DIM = re.compile(r"\bdim\s*:\s*(\d+)")
_INPUT_DIMS = re.compile(r"(?:\binput_dim\s*:\s*\d+\s*){4}")
_CROP = re.compile(r"\bcrop_size\s*:\s*(\d+)")


def family_sizes(path):
    """[(h, w, where)] the input sizes that the net files in ``path``'s directory declare, one
    family with it (a training file's deploy file, the other stage's file): 4-d ``input_shape`` /
    Input ``shape`` blocks, four ``input_dim`` values, and ``crop_size``, each H and W at least 8;
    files named like ``*deploy*`` first, then by name; at most :data:`FAMILY_FILES` files of at
    most :data:`FAMILY_BYTES` bytes. A text scan, not a parse: a sibling that does not parse still
    says its size, and reading it logs nothing. Unreadable files and directories give nothing."""
    if not isinstance(path, str) or not path:
        return []
    folder, own = os.path.split(os.path.abspath(path))
    try:
        names = [n for n in os.listdir(folder) if _NET_FILE.search(n) and n != own]
    except OSError:
        return []
    names.sort(key=lambda n: ("deploy" not in n.lower(), n))
    out = []
    for name in names[:FAMILY_FILES]:
        full = os.path.join(folder, name)
        try:
            if not os.path.isfile(full) or os.path.getsize(full) > FAMILY_BYTES:
                continue
            with open(full, "rb") as f:
                text = without_comments(f.read()).decode("utf-8", "replace")
        except OSError:
            continue
        where = "the input size %s beside it declares" % name
        for m in _SHAPE_BLOCK.finditer(text):
            dims = [int(d) for d in _DIM.findall(m.group(1))]
            if len(dims) == 4 and min(dims[2:]) >= 8:
                out.append((dims[2], dims[3], where))
        for m in _INPUT_DIMS.finditer(text):
            dims = [int(d) for d in re.findall(r"\d+", m.group(0))]
            if min(dims[2:]) >= 8:
                out.append((dims[2], dims[3], where))
        out += [(int(v), int(v), where) for v in _CROP.findall(text) if int(v) >= 8]
    return out


def weight_shapes(path):
    """{layer name: [BlobProto]} of a .caffemodel (shapes; values left in the file's bytes)."""
    from ..net.params import read_weights
    _, src, _ = read_weights(path)
    if src is None:
        return {}
    return {lp.name: list(lp.blobs) for lp in src.layer if len(lp.blobs)}


def check_weights(net, shapes):
    """Raise ShapeError when a layer's parameter shapes differ from the weights' ``shapes``."""
    import numpy as np
    from ..blob import blobproto_shape
    from ..net.weights import _proto_matches, shape_string
    for name, layer in zip(net._layer_names, net.layers):
        if name not in shapes or getattr(layer, "adopt_source_blob", None) is not None:
            continue
        loose = not getattr(layer.layer_param, "strict_dim", True)
        for j, (blob, bp) in enumerate(zip(layer.blobs, shapes[name])):
            same = _proto_matches(blob, bp) or (
                loose and int(np.prod(blobproto_shape(bp))) == blob.count)
            if not same:
                raise ShapeError("layer '%s' (%s): param %d shape %s does not match the weights' "
                                 "%s" % (name, layer.type, j, shape_string(blob.shape),
                                         shape_string(blobproto_shape(bp))))


def channel_options(net_param, searched, weights):
    """Channel counts to try besides the reader's own (module doc)."""
    from . import is_data_layer
    out = [1, 3]
    for lp in net_param.layer:
        if is_data_layer(lp) and any(t in searched for t in lp.top):
            n = len(lp.transform_param.mean_value)
            if n > 1:
                out.append(n)
    if weights:
        for lp in net_param.layer:
            if lp.type == "Convolution" and lp.bottom and lp.bottom[0] in searched:
                bps = weights.get(lp.name)
                if bps:
                    from ..blob import blobproto_shape
                    shape = blobproto_shape(bps[0])
                    if len(shape) == 4:
                        out.append(int(shape[1]) * max(int(lp.convolution_param.group), 1))
                break
    return out


def _layer_stride(lp):
    """(stride, divides): the spatial stride a layer applies, and whether it divides the size
    (a convolution, a pooling, a Reorg) rather than multiplying it (a Deconvolution)."""
    def most(p):
        values = [int(v) for v in (p.stride if is_repeated(
            p.DESCRIPTOR.fields_by_name["stride"]) else [p.stride])]
        values += [int(p.stride_h), int(p.stride_w)]
        return max([v for v in values if v > 0] or [1])
    if lp.type == "Reorg" and not lp.reorg_param.reverse:
        return max(int(lp.reorg_param.stride), 1), True
    if lp.HasField("pooling_param") and not lp.pooling_param.global_pooling:
        return most(lp.pooling_param), True
    if lp.HasField("convolution_param"):
        return most(lp.convolution_param), "deconv" not in lp.type.lower()
    return 1, True


MAX_DIVISOR = 256


def stride_divisor(net_param):
    """The product of the strides along the most strided path of the net (data tops count 1): a
    size divisible by it passes every stride-2 stage without a remainder (Reorg needs it; Concat /
    Eltwise joins of branches whose strided layers round differently often do). At most
    :data:`MAX_DIVISOR`."""
    stride, need = {}, 1
    for lp in net_param.layer:
        s_in = max([stride.get(b, 1) for b in lp.bottom] or [1])
        f, divides = _layer_stride(lp)
        if divides:
            s_out = s_in * f
            need = max(need, s_out) if f > 1 else need
        else:
            s_out = max(s_in // f, 1)
        for t in lp.top:
            stride[t] = min(s_out, MAX_DIVISOR)
    return min(need, MAX_DIVISOR)


def candidates(net_param, searched, default_shape, batch_size, inputs, weights, path=None):
    """[(channels or None, h, w, guess, where)] in the order tried (module doc); ``path``: the
    net file's, for :func:`family_sizes`."""
    from . import replace_data_layers
    sizes = []
    guessed = shapes_by_top(replace_data_layers(net_param, default_shape, batch_size))
    plain = shapes_by_top(replace_data_layers(net_param, default_shape, batch_size, guess=False))
    first = []
    if guessed != plain:
        first.append((None, default_shape[1], default_shape[2], True,
                      "caffepy.zoo's size for this reader, from its source or fork"))
    for blob, shape in inputs.items():
        if len(shape) == 4 and blob in plain:
            sizes.append((shape[2], shape[3], "the size --input gives '%s'" % blob))
    sizes += net_sizes(net_param)
    sizes += family_sizes(path)
    sizes.append((default_shape[1], default_shape[2], "the default size"))
    usual = [(s, s, "a usual input size") for s in USUAL]
    for step in (32, 16, 8):
        usual += [(s, s, "a multiple of %d" % step) for s in range(16, 1025, step)]
    d = stride_divisor(net_param)
    if d > 32:              # deeper than the usual sizes allow for: sizes divisible by it first
        usual = ([(h, w, where) for h, w, where in usual if h % d == 0] +
                 [(s, s, "a multiple of %d, the net's stride" % d) for s in range(d, 1025, d)] +
                 [(h, w, where) for h, w, where in usual if h % d])
    sizes += usual
    seen, ordered = set(), []
    for h, w, where in sizes:
        if (h, w) not in seen:
            seen.add((h, w))
            ordered.append((h, w, where))
    out = first + [(None, h, w, False, where) for h, w, where in ordered]
    if any(searched.values()):
        alts = [c for c in channel_options(net_param, searched, weights)
                if c != default_shape[0]]
        alts = list(dict.fromkeys(alts))
        h, w, where = ordered[0]
        out[len(first) + 1:len(first) + 1] = [(c, h, w, False, where + ", %d channels" % c)
                                              for c in alts]
        out += [(c, h, w, False, where + ", %d channels" % c)
                for h, w, where in ordered[1:20] for c in alts]
    return out
