"""Equivalence of two net definitions: same layers, types, parameters, wiring and top shapes.

Both files are read and upgraded (``input_dim`` -> Input layer), their data layers swapped for
Input layers (:func:`caffepy.zoo.replace_data_layers`), then compared layer by layer on the
effective values of every field (a field set to its default equals an unset one), and built with
:class:`caffepy.net.Net` to compare parameter and top shapes. Blob names are compared through the
layer that produces them, so a net may rename blobs; layer names are compared when asked.
"""
from google.protobuf import descriptor as _desc

from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.zoo import replace_data_layers
from caffepy.proto import is_repeated

IGNORED = ("name", "bottom", "top", "phase", "blobs")
DEPLOY_IGNORED = ("param", "weight_filler", "bias_filler")
# repeated fields whose empty value means a default (ConvolutionParameter: stride 1, pad 0 ...)
REPEATED_DEFAULTS = {"stride": [1], "dilation": [1], "pad": [0]}


def _num(v):
    """A float as compared: rounded, and NaN (some fork fields' default) equal to itself."""
    return "nan" if v != v else round(v, 6)


def effective(msg, skip=()):
    """{field: value} with defaults filled in for scalars, recursing into set messages."""
    out = {}
    for f in msg.DESCRIPTOR.fields:
        if f.name in skip:
            continue
        value = getattr(msg, f.name)
        if is_repeated(f):
            if f.type == _desc.FieldDescriptor.TYPE_MESSAGE:
                out[f.name] = [effective(v, skip) for v in value]
            else:
                values = [_num(v) if isinstance(v, float) else v for v in value]
                if msg.DESCRIPTOR.name == "ConvolutionParameter" and values == REPEATED_DEFAULTS.get(f.name):
                    values = []
                out[f.name] = values
        elif f.type == _desc.FieldDescriptor.TYPE_MESSAGE:
            if msg.HasField(f.name):
                out[f.name] = effective(value, skip)
        else:
            out[f.name] = _num(value) if isinstance(value, float) else value
    return out


def _wiring(net_param):
    """Each layer's bottoms/tops as (producing layer index, top index) pairs."""
    producer, rows = {}, []
    for i, lp in enumerate(net_param.layer):
        rows.append(([producer[b] for b in lp.bottom],))
        for j, t in enumerate(lp.top):
            if t not in lp.bottom:
                producer[t] = (i, j)
    return rows


def load(path):
    return replace_data_layers(proto_io.read_net(path), batch_size=1)


def differences(ours_path, ref_path, names=True, deploy=True, phases=(caffe_pb2.TEST,)):
    """A list of human-readable differences (empty when equivalent)."""
    ours, ref = load(ours_path), load(ref_path)
    diffs = []
    if [l.type for l in ours.layer] != [l.type for l in ref.layer]:
        return ["layer types differ: %s vs %s" % ([l.type for l in ours.layer], [l.type for l in ref.layer])]
    skip = IGNORED + (DEPLOY_IGNORED if deploy else ())
    for a, b in zip(ours.layer, ref.layer):
        if names and a.type != "Input" and a.name != b.name:
            diffs.append("layer name %s vs %s" % (a.name, b.name))
        ea, eb = effective(a, skip), effective(b, skip)
        for key in sorted(set(ea) | set(eb)):
            if ea.get(key) != eb.get(key):
                diffs.append("layer %s: %s = %s vs %s" % (a.name, key, ea.get(key), eb.get(key)))
    if _wiring(ours) != _wiring(ref):
        diffs.append("wiring differs")
    for phase in phases:
        na, nb = Net(ours, phase), Net(ref, phase)
        sa = [[tuple(t.shape) for t in tops] for tops in na.top_vecs]
        sb = [[tuple(t.shape) for t in tops] for tops in nb.top_vecs]
        if sa != sb:
            diffs.append("top shapes differ in phase %d" % phase)
        pa = [[p.shape for p in ps] for ps in na.params.values()]
        pb = [[p.shape for p in ps] for ps in nb.params.values()]
        if pa != pb:
            diffs.append("param shapes differ in phase %d" % phase)
        del na, nb
    return diffs
