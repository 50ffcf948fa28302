"""Fork enum values the schema's enums lack, as the readers of :mod:`caffepy.proto.io` meet them:
a token in text (found by :func:`caffepy.proto.unknown_fields.find_unknown_values`) or a number in
a binary message (kept by protobuf as an unknown field, the field left at its default).

Rules (``strict=None``: :func:`caffepy.proto.unknown_fields.strict_default`):

* by default such a value is an error naming the file, line, field, value and layer
  (:meth:`caffepy.proto.unknown_fields.UnknownValue.describe`);
* when not strict, a value in a field that changes no math (a hint, ``solver_mode``) is dropped,
  all of them named in one WARNING; any other stays an error that says it may change the math;
* in the structure-only mode (:func:`caffepy.proto.harvest_policy.structure_only`: summary, draw)
  a V1 ``layers`` block's ``type`` that the V1 enum lacks (a fork's layer type) is kept, as its
  name in text or its number in a binary net, recorded for
  :func:`caffepy.proto.io.read_net` (:func:`recording_v1_types`), which gives it to the upgraded
  layer; when not strict every other such value is dropped with a WARNING (nothing is computed
  from it).

The WARNING lines are the readers' (logger ``caffepy.proto.io``).
"""
import contextlib
import contextvars
import logging

from ..errors import ProtoError
from . import caffe_pb2
from . import harvest_policy as _harvest
from . import unknown_fields as _unknown

_log = logging.getLogger("caffepy.proto.io")

_RAW_TYPES = contextvars.ContextVar("caffepy_raw_v1_types", default=None)


def structure_values(values, strict):
    """Split the unknown enum ``values`` of a text: (V1 layer types kept as names, values dropped,
    values left to the usual policy). In the structure-only mode
    (:func:`caffepy.proto.harvest_policy.structure_only`: summary, draw) a V1 ``layers`` block's
    ``type`` that the V1 enum lacks (a fork's layer type) is kept as its name, recorded for
    :func:`caffepy.proto.io.read_net`, which gives it to the upgraded layer; when not ``strict``
    every other unknown enum value is dropped with a WARNING (nothing is computed from it).
    Outside that mode every value is left to the usual policy."""
    if not values or not _harvest.is_structure_only():
        return [], [], values
    raw, kept, dropped, checked = _RAW_TYPES.get(), [], [], []
    for v in values:
        ref = v.layer
        if v.message == "V1LayerParameter" and v.name == "type" and \
                getattr(ref, "field", None) == "layers":
            if raw is not None:
                raw[ref.ordinal] = str(v.value)
            kept.append(v)
        elif not strict:
            dropped.append(v)
        else:
            checked.append(v)
    return kept, dropped, checked


def check_binary_values(msg, filename, strict=None):
    """Enum numbers in a binary ``msg`` that the schema's enums lack (protobuf keeps them as
    unknown fields and leaves the field at its default): an error naming the field, the number
    and the layer; when not strict, those in fields that change no math get a WARNING. Under
    the structure-only mode a V1 layer's type number the V1 enum lacks is kept (as the number)
    and any other value dropped with a WARNING unless ``strict``, as for text."""
    values = _unknown.binary_unknown_values(msg)
    if values and _harvest.is_structure_only() and msg.DESCRIPTOR.name == "NetParameter":
        kept = _binary_v1_types(msg)
        values = [v for v in values if not (v.message == "V1LayerParameter" and v.name == "type")]
        if kept:
            _log.warning("%s: %d V1 layer type number(s) the V1 enum lacks (a fork's) kept for the "
                         "structure: %s", filename, len(kept), ", ".join(
                             "layer %d = %s" % (i, n) for i, n in sorted(kept.items())))
        strict = _unknown.strict_default() if strict is None else strict
        if values and not strict:
            _log.warning("%s: ignored %d unknown enum value(s) (%s): %s", filename, len(values),
                         _unknown.lenient_reason(), "; ".join(v.where() for v in values))
            return msg
    reject_values(values, filename, strict)
    return msg


def _binary_v1_types(msg):
    """{index in ``msg.layers``: type number} of the V1 layers whose type number the V1 enum lacks
    (protobuf keeps it as an unknown field), recorded for :func:`caffepy.proto.io.read_net`."""
    try:
        from google.protobuf import unknown_fields as pb_unknown
    except ImportError:
        return {}
    number = caffe_pb2.V1LayerParameter.DESCRIPTOR.fields_by_name["type"].number
    raw, out = _RAW_TYPES.get(), {}
    for i, v1 in enumerate(msg.layers):
        for uf in pb_unknown.UnknownFieldSet(v1):
            if uf.field_number == number and uf.wire_type == 0 and not v1.HasField("type"):
                out[i] = str(uf.data)
    if raw is not None:
        raw.update(out)
    return out


def reject_values(values, filename, strict):
    """Raise the first of the unknown enum ``values`` unless not strict and all change no math;
    then name them in one WARNING."""
    if not values:
        return
    strict = _unknown.strict_default() if strict is None else strict
    for v in values:
        if strict or not v.harmless:
            raise ProtoError(v.describe(filename, lenient=not strict))
    _log.warning("%s: ignored %d unknown enum value(s) of fields that change no math "
                 "(--ignore-unknown-fields): %s", filename, len(values),
                 "; ".join(v.where() for v in values))


@contextlib.contextmanager
def recording_v1_types():
    """Within the block, the V1 layer types kept for the structure are recorded in the dict it
    yields: {index among the net's ``layers`` blocks: the type's name or number, as text}."""
    raw = {}
    token = _RAW_TYPES.set(raw)
    try:
        yield raw
    finally:
        _RAW_TYPES.reset(token)
