"""Shape rules for layers caffepy has no class for, so ``caffepy summary`` can go past them.

A fork's layer type that no caffepy layer (or plug-in) registers cannot be built, and without its
tops' shapes nothing after it can be either. In lenient mode (not ``--strict``) ``summary`` asks
:func:`rule_for` whether the top shapes follow from the layer's wiring and fields alone; the
rules, in order:

a. **in place** (every top is one of its bottoms): each top keeps that bottom's shape;
b. **same shape as its first bottom**: a type of :data:`SAME_SHAPE` (element-wise activations,
   normalizations and dropout-like layers of forks, each entry naming a fork whose
   source shapes the top as ``ReshapeLike(*bottom[0])``), one top;
c. **a loss**: a type whose name ends with ``Loss`` (any case: V0 / V1 spellings), one top: a
   scalar;
d. **convolution-like**: a type whose name contains ``Conv`` (not ``Deconv``), one bottom, one
   top, and a ``*_param`` message that sets ``num_output``: Caffe's convolution arithmetic with
   the kernel / stride / pad / dilation (``_h`` / ``_w`` too) of that message; without a kernel
   there is no rule.

:func:`rule_for` returns a :class:`Rule` whose ``stand_in`` is the LayerParameter ``summary``
builds in the layer's place (a carrier of the shape, or a plain Convolution for d), or None.
Without a rule the layer's tops are unknown, and so are those of every layer that reads them
(``summary`` lists them with '?'). The carrier types exist only while ``summary`` builds
(:func:`carriers`): no file can name them and no other command sees them.
"""
import contextlib
import re

from ..layers.base import Layer, NeuronLayer
from ..proto import caffe_pb2, is_repeated

_SYNOPSYS = "foss-for-synopsys-dwc-arc-processors/synopsys-caffe"

#: Fork layer types whose top has the shape of their first bottom -> the fork whose source does
#: so (``top[0]->ReshapeLike(*bottom[0])``, or a NeuronLayer subclass). Only types no caffepy
#: layer registers are useful here (a registered type is built, not carried).
SAME_SHAPE = {
    # activations and other element-wise functions
    "SeLU": _SYNOPSYS, "HardTanH": _SYNOPSYS, "ScaledTanH": _SYNOPSYS, "Softplus": _SYNOPSYS,
    "Softsign": _SYNOPSYS, "ThresholdedReLU": _SYNOPSYS, "XLU": _SYNOPSYS,
    "LogSoftmax": _SYNOPSYS, "Sin": _SYNOPSYS, "Atan": _SYNOPSYS, "Ceil": _SYNOPSYS,
    "Floor": _SYNOPSYS, "Round": _SYNOPSYS,
    "HSwish": "aovoc/caffe", "HSigmoid": "aovoc/caffe",
    # normalizations
    "LayerNorm": _SYNOPSYS,
    "GroupNorm": "blankWorld/GroupNorm-caffe",
    # dropout-like
    "SeLUDropout": _SYNOPSYS,
}

STAND_IN_SAME = "caffepy.summary.SameShape"
STAND_IN_SCALAR = "caffepy.summary.Scalar"


class Rule(object):
    """How a layer's top shapes are carried: ``text`` (for the summary's footnote) and
    ``stand_in`` (the LayerParameter built in the layer's place)."""

    def __init__(self, text, stand_in):
        self.text, self.stand_in = text, stand_in


def _stand_in(lp, type_name):
    """A copy of ``lp``'s wiring (name, bottoms, tops, phase rules, loss weights), of another
    type."""
    out = caffe_pb2.LayerParameter(name=lp.name, type=type_name)
    out.bottom.extend(lp.bottom)
    out.top.extend(lp.top)
    out.include.extend(lp.include)
    out.exclude.extend(lp.exclude)
    if lp.HasField("phase"):
        out.phase = lp.phase
    if len(lp.loss_weight) == len(lp.top):
        out.loss_weight.extend(lp.loss_weight)
    return out


def rule_for(lp):
    """The :class:`Rule` carrying ``lp``'s top shapes (module doc), or None."""
    if len(lp.bottom) and len(lp.top) and all(t in lp.bottom for t in lp.top):
        return Rule("in place: same shape as its bottom", _stand_in(lp, STAND_IN_SAME))
    if len(lp.bottom) and len(lp.top) == 1 and lp.type in SAME_SHAPE:
        return Rule("same shape as its first bottom (element-wise in %s)" % SAME_SHAPE[lp.type],
                    _stand_in(lp, STAND_IN_SAME))
    if lp.type.lower().endswith("loss") and len(lp.top) == 1:
        return Rule("a loss: a scalar top", _stand_in(lp, STAND_IN_SCALAR))
    low = lp.type.lower()
    if "conv" in low and "deconv" not in low and len(lp.bottom) == 1 and len(lp.top) == 1:
        return _conv_rule(lp)
    return None


_GEOMETRY = ("kernel_size", "kernel_h", "kernel_w", "stride", "stride_h", "stride_w", "pad",
             "pad_h", "pad_w", "dilation")


def _conv_rule(lp):
    for fd, msg in lp.ListFields():
        if fd.message_type is None or is_repeated(fd) or not fd.name.endswith("_param"):
            continue
        fields = msg.DESCRIPTOR.fields_by_name
        if "num_output" not in fields or not getattr(msg, "num_output"):
            continue
        geo = {}
        for name in _GEOMETRY:
            if name not in fields:
                continue
            value = getattr(msg, name)
            if is_repeated(fields[name]):
                if len(value):
                    geo[name] = [int(v) for v in value]
            elif msg.HasField(name):
                geo[name] = int(value)
        if not (geo.get("kernel_size") or ("kernel_h" in geo and "kernel_w" in geo)):
            return None
        out = _stand_in(lp, "Convolution")
        cp = out.convolution_param
        cp.num_output = int(msg.num_output)
        for name, value in geo.items():
            if isinstance(value, list):
                getattr(cp, name).extend(value)
            elif is_repeated(cp.DESCRIPTOR.fields_by_name[name]):
                getattr(cp, name).append(value)
            else:
                setattr(cp, name, value)
        if "group" in fields and getattr(msg, "group", 1) > 1 \
                and msg.num_output % msg.group == 0:
            cp.group = int(msg.group)
        if "bias_term" in fields:
            cp.bias_term = bool(msg.bias_term)
        k = geo.get("kernel_size")
        kernel = (("x".join(str(v) for v in k) if isinstance(k, list) else str(k)) if k
                  else "%dx%d" % (geo["kernel_h"], geo["kernel_w"]))
        return Rule("convolution-like: %s.num_output %d, kernel %s (Caffe's convolution "
                    "arithmetic; params and FLOPs as a Convolution's)"
                    % (fd.name, cp.num_output, kernel), out)
    return None


class _SameShape(NeuronLayer):
    """Each top has the shape of the bottom of the same name (in place), else of bottom 0."""
    exact_num_bottom_blobs = None
    min_bottom_blobs = 1
    exact_num_top_blobs = None
    min_top_blobs = 1

    def reshape(self, bottom, top):
        names = list(self.layer_param.bottom)
        for name, t in zip(self.layer_param.top, top):
            b = bottom[names.index(name)] if name in names else bottom[0]
            if t is not b:
                t.reshape(b.shape)


class _Scalar(Layer):
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        top[0].reshape(())


@contextlib.contextmanager
def carriers():
    """Within the block the stand-in types of :func:`rule_for` can be built."""
    from ..layers import base
    added = {STAND_IN_SAME: _SameShape, STAND_IN_SCALAR: _Scalar}
    added = {k: v for k, v in added.items() if k not in base._REGISTRY}
    base._REGISTRY.update(added)
    try:
        yield
    finally:
        for k in added:
            base._REGISTRY.pop(k, None)


def retyped(error, carried):
    """``error`` with each carried layer it names shown with its own type (:func:`retyped_text`),
    or ``error`` itself when it names none."""
    text = retyped_text(str(error), carried)
    if text == str(error):
        return error
    out = type(error)(text)
    out.__dict__.update(error.__dict__)
    return out


def retyped_text(text, carried):
    """``text`` with "layer 'x' (Convolution)" of a carried layer's stand-in shown as "layer 'x'
    (FancyConv, shape carried as a Convolution's)", and other stand-ins as "(Type, shape
    carried)". ``carried``: {layer name: (its type, the rule's text)}."""
    for name, (kind, _) in carried.items():
        text = re.sub(r"layer '%s' \(([^)]*)\)" % re.escape(name),
                      lambda m: "layer '%s' (%s, shape carried as a %s's)" % (
                          name, kind, m.group(1)) if m.group(1) == "Convolution" else
                      "layer '%s' (%s, shape carried)" % (name, kind), text)
    return text
