"""Per-layer summary of a net: type, top shapes, parameter count, forward FLOPs and memory.

    rows, total = summarize("deploy.prototxt", inputs={"data": (1, 3, 224, 224)})
    print(format_summary(rows, total))

Data layers become Input layers of their declared shape (caffepy.zoo.replace_data_layers);
a size the file leaves open (an LMDB read without crop_size, a reader whose size only its data
knows) is the first candidate with which every shape check of the net passes
(caffepy.zoo.input_search: sizes the file names, then the usual ones); ``inputs`` overrides the
shape of any input blob and takes it out of that search. A Python data layer whose module imports
and whose ``setup`` works is kept (it shapes its tops); any other is replaced like those readers,
in strict mode too, with a note saying why (caffepy.zoo.readers). The tops of a replaced reader
that the file does not shape take the shapes the layers reading them need
(caffepy.zoo.label_shapes).
The net is built for its shapes only (``caffepy.layers.base.shapes_only``): no parameter is
allocated or filled and no activation allocated, so VGG16 takes a fraction of a second. A net
whose requested phase cannot be built because its data layers are in the other phase is shown
in that phase, with a note; one built without stages whose data layers are each given to a stage
(DIGITS' "train" / "val", LRCN's "test-on-val") with the first stage (this phase first) with
which every bottom is produced, with a note. A layer caffepy cannot build (no class, an absent Python module) has
its shapes carried by a rule of caffepy.zoo.shape_rules (its row's ``carried`` names the rule;
params and FLOPs those of the stand-in), or is listed with '?' tops, as is every layer that
depends on them, with a note naming the plug-in to write; ``strict=True``: an error instead.
A DIGITS classification network's InnerProduct layers without num_output take ``num_classes``,
else a stand-in named in one WARNING, strict or not (caffepy.proto.digits).

FLOPs: caffepy.zoo.flops. Memory is the bytes of the layer's top blobs (in-place tops not counted
again) plus its parameter blobs.
"""
import collections

from ..errors import CaffeError, ShapeError
from ..layers.base import shapes_only
from ..net import Net
from ..net.passes import PhaseError
from ..proto import caffe_pb2, digits, io as proto_io
from .flops import layer_flops
from .shape_rules import retyped, retyped_text

Row = collections.namedtuple("Row", "name type top_shapes params flops memory carried",
                             defaults=(None,))


def summarize(source, inputs=None, phase=caffe_pb2.TEST, default_shape=(3, 224, 224),
              notes=None, weights=None, inferred=None, strict=False, nets=None, filename=None,
              num_classes=None, declared=True):
    """Build the net for its shapes and return (rows, total row). ``inputs``: {blob name: shape}.
    ``notes``: a list that receives one-line notes (the Python data layers replaced and why, the
    phase shown when another was asked for, the layers shown with '?' tops and what a plug-in
    must supply for them).
    ``weights``: a .caffemodel whose blob shapes the net must match. ``inferred``: a list that
    receives the one-line report of the input sizes found by search (caffepy.zoo.input_search),
    when the file leaves a data layer's size open.

    A layer caffepy cannot build (a type no layer or plug-in registers, a Python layer whose
    module does not import) has its top shapes carried by a rule of
    :mod:`caffepy.zoo.shape_rules` when one applies (its row's ``carried`` names the rule);
    otherwise its tops, and those of every layer that depends on them, are '?' and a note names
    what a plug-in must supply. ``strict``: neither; such a layer is the one-line error of the
    build. ``nets``: a list that receives the Net built (for shapes only). ``filename``: the file
    the layers are written in (for line numbers) when ``source`` is a NetParameter.
    ``num_classes``: the class count of a DIGITS classification network (without it, a stand-in
    named in a WARNING: :func:`caffepy.proto.digits.complete`), strict or not."""
    from .input_search import infer_input_shapes, set_input_shapes, terminal_layer
    from .readers import python_data_layers, replaced_notes, with_declared
    from .shape_rules import carriers
    original = proto_io.read_net(source)
    digits.complete(original, num_classes, source if isinstance(source, str) else
                    (filename or "<NetParameter>"), stand_in=True)
    inputs = dict(inputs or {})
    order = [lp.name for lp in original.layer]
    tops_of = {lp.name: (lp.type, len(lp.top)) for lp in original.layer}
    unresolved, probed, shaped, sourced = {}, {}, {} if declared else None, set()
    keep, replaced = python_data_layers(original, inputs, phase, probed, shaped, sourced)
    filename = source if isinstance(source, str) else filename
    if shaped:                      # tops a failed setup shaped: tried first (readers doc)
        out = with_declared(summarize, original, inputs, shaped, replaced, dict(
            phase=phase, default_shape=default_shape, notes=notes, weights=weights, nets=nets,
            inferred=inferred, strict=strict, filename=filename, num_classes=num_classes),
            sourced)
        if out is not None:
            return out
    carried, roots = ({}, {}) if strict else _carry(original, filename)   # edits in place
    phase_note, dropped = [], {}

    def prepare(param):
        for i in keep:                   # importable Python data layers set their own shapes
            param.layer[i].CopyFrom(original.layer[i])
        unknown = set_input_shapes(param, inputs)
        if unknown:
            raise ValueError("--input names no input blob of the net: %s" % ", ".join(unknown))

    def net_of(param, at, stages=()):
        dropped.clear()
        if roots:
            param, found = _prune(param, at, roots)
            dropped.update(found)
        return Net(param, at, filename=filename, stages=stages)

    def build(param):
        del phase_note[:]
        with shapes_only(), carriers():
            at, stages, tried = phase, (), []
            while True:     # a suggested phase may itself need a stage: follow it once more
                try:
                    return net_of(param, at, stages)
                except PhaseError as e:
                    other, more = _suggested_phase(e)
                    if other is None or (other, more) in tried or len(tried) >= 2:
                        raise
                    tried.append((other, more))
                    at, stages = other, more
                    phase_note[:] = [_phase_note(phase, at, stages)]

    for _ in range(MAX_FAILED_TERMINALS + 1):
        kept = {t for i in keep for t in original.layer[i].top}
        try:
            found = infer_input_shapes(original, phase, inputs, weights, default_shape,
                                       build=build, prepare=prepare, fixed=kept, path=filename)
            break
        except CaffeError as e:
            why = e
            if isinstance(e, ShapeError) or strict:
                name = None
            elif getattr(e, "terminal_fallback", None) is not None:
                name, why = e.terminal_fallback     # a size at which only that layer fails
            else:
                name = terminal_layer(original, getattr(e, "layer_name", None))
            if name is None or len(unresolved) >= MAX_FAILED_TERMINALS:
                raise retyped(e, carried)
            lp = next(x for x in original.layer if x.name == name)
            unresolved[name] = ("layer '%s' (%s) does not build here (%s); its tops (%s) are "
                                "shown as '?' (no other layer reads them)" % (
                                    name, carried.get(name, (lp.type,))[0],
                                    " ".join(retyped_text(str(why), carried).split())[:240],
                                    ", ".join(lp.top)))
            if notes is not None:
                notes.append(unresolved[name])
            original = _without(original, {name})
            keep, replaced = python_data_layers(original, inputs, phase, probed)
    net = found.net
    if nets is not None:
        nets.append(net)
    if notes is not None:
        notes.extend(replaced_notes(original, replaced, net, inputs))
        notes.extend(_unknown_notes(roots, dropped))
        notes.extend(phase_note)
    if inferred is not None and found.line:
        inferred.append(found.line)
    rows = []
    for layer, name, bottom, top in zip(net.layers, net._layer_names, net.bottom_vecs,
                                        net.top_vecs):
        if layer.type == "Split":
            continue
        n_params = sum(b.count for b in layer.blobs)
        memory = sum(t.count * t.dtype.itemsize for t in top if all(t is not b for b in bottom)) + \
            sum(b.count * b.dtype.itemsize for b in layer.blobs)
        kind, rule = carried.get(name, (layer.type, None))
        rows.append(Row(name, kind, [tuple(t.shape) for t in top], n_params,
                        layer_flops(layer, bottom, top), memory, rule))
    missing = list(unresolved) + [n for n in dropped if n not in unresolved]
    if missing:             # shown where the file has them, their tops not computed
        at = {n: i for i, n in enumerate(order)}
        for name in sorted(missing, key=at.get):
            before = [k for k, r in enumerate(rows) if at.get(r.name, -1) < at[name]]
            rows.insert(before[-1] + 1 if before else 0,
                        Row(name, tops_of[name][0], ["?"] * tops_of[name][1], 0, 0, 0))
    total = Row("total", "", [], sum(r.params for r in rows), sum(r.flops for r in rows),
                sum(r.memory for r in rows))
    return rows, total


def _unbuildable(lp, filename=None):
    """Why caffepy cannot build ``lp`` (a type nothing registers, a Python layer with bottoms whose
    module does not import and that caffepy does not build in: where near ``filename`` it is), or
    None."""
    from ..layers.base import has_layer_type
    from ..layers.python_layer import builtin_layer_class, module_hint
    from . import is_data_layer
    from .readers import importable
    if is_data_layer(lp):
        return None
    if lp.type == "Python":
        if not len(lp.bottom) or importable(lp) or builtin_layer_class(
                lp.python_param.module, lp.python_param.layer) is not None:
            return None
        module = lp.python_param.module
        return "python_param.module '%s' is not importable%s" % (
            module, module_hint(module, filename) if filename else "")
    if has_layer_type(lp.type):
        return None
    return "no class"


def _carry(param, filename=None):
    """Put the stand-in of :mod:`caffepy.zoo.shape_rules` in ``param`` (in place) for each layer
    caffepy cannot build and a rule carries; return ({name: (type, rule text)} of those,
    {name: (type, why)} of the others, whose tops are unknown)."""
    from .shape_rules import rule_for
    carried, roots = {}, {}
    for lp in param.layer:
        why = _unbuildable(lp, filename)
        if why is None:
            continue
        rule = rule_for(lp)
        if rule is None:
            roots[lp.name] = (lp.type, why, lp.python_param.module if lp.type == "Python" else "",
                              len(lp.top))
            continue
        carried[lp.name] = (lp.type, rule.text)
        lp.CopyFrom(rule.stand_in)
    return carried, roots


def _prune(param, phase, roots):
    """``param`` without the ``roots`` included in ``phase`` and the layers that read, directly
    or not, a top of theirs; and {dropped layer: the roots its tops depend on}."""
    from ..net.passes import layer_included, make_state
    state = make_state(param, phase)
    out = caffe_pb2.NetParameter()
    out.CopyFrom(param)
    del out.layer[:]
    unknown, dropped = {}, {}          # blob -> roots it depends on
    for lp in param.layer:
        try:
            included = layer_included(lp, state)
        except CaffeError:
            included = True             # (the build reports it)
        if included:
            why = set()
            if lp.name in roots:
                why.add(lp.name)
            for b in lp.bottom:
                why |= unknown.get(b, set())
            if why:
                dropped[lp.name] = why
                for t in lp.top:
                    unknown[t] = set(why)
                continue
            for t in lp.top:
                unknown.pop(t, None)
        out.layer.add().CopyFrom(lp)
    return out, dropped


def _unknown_notes(roots, dropped):
    """One line per type of the layers caffepy cannot build and no rule carries: what must supply
    it, and the layers shown with '?' because of it."""
    by_type = collections.OrderedDict()
    for name, (kind, why, module, n_tops) in roots.items():
        if name in dropped:
            by_type.setdefault((kind, module), []).append((name, why, n_tops))
    lines = []
    for (kind, module), layers in by_type.items():
        names = {n for n, _, _ in layers}
        after = [n for n, r in dropped.items() if n not in names and r & names]
        first, why, _ = layers[0]
        more = " and %d more of this type: %s" % (len(layers) - 1, ", ".join(
            n for n, _, _ in layers[1:])) if len(layers) > 1 else ""
        if kind == "Python":
            need = ("%s and no shape rule — the module must be importable (PYTHONPATH), or a "
                    "plug-in must supply the layer: @caffepy.register_layer(\"Python\") loaded "
                    "with --layers MODULE" % why)
        else:
            need = ("no class and no shape rule — a plug-in must supply it: "
                    "@caffepy.register_layer(\"%s\") loaded with --layers MODULE" % kind)
        shown = "; shown as '?' with %s" % (
            "the %d layer(s) that depend on its tops: %s" % (len(after), ", ".join(after))
            if after else "no layer depending on its tops") if any(
                n for _, _, n in layers) else "; listed without shapes (no tops)"
        lines.append("layer '%s' (type %s%s): %s%s" % (first, kind, more, need, shown))
    return lines


MAX_FAILED_TERMINALS = 8


def _without(param, names):
    """A copy of ``param`` without the layers named in ``names``."""
    pruned = caffe_pb2.NetParameter()
    pruned.CopyFrom(param)
    del pruned.layer[:]
    pruned.layer.extend(lp for lp in param.layer if lp.name not in names)
    return pruned


def _phase_note(asked, shown, stages):
    """The note saying which phase (and stage) summary shows instead of ``asked``."""
    if stages:
        return ("the net cannot be built without a stage (layers it needs are given to stages); "
                "showing phase %s with stage %s" % (caffe_pb2.Phase.Name(shown), ", ".join(stages)))
    return ("phase %s cannot be built (its data layers are in phase %s); showing phase %s"
            % (caffe_pb2.Phase.Name(asked), caffe_pb2.Phase.Name(shown),
               caffe_pb2.Phase.Name(shown)))


def _suggested_phase(error):
    """(phase, stages) a PhaseError suggests, or (None, ())."""
    while error is not None:
        if getattr(error, "phase", None) is not None:
            return error.phase, tuple(getattr(error, "stages", ()))
        error = error.__cause__
    return None, ()


def _human(n, unit=""):
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= div:
            return "%.2f%s%s" % (n / div, suffix, unit)
    return "%d%s" % (n, unit)


CARRIED = "~"
CARRIED_NOTE = CARRIED + " shape carried:"     # the footnote's start, one per carried type


def format_summary(rows, total):
    """A fixed-width text table, one line per layer and a total line; a layer whose shapes a rule
    carried (caffepy.zoo.shape_rules) has its type marked ``~``, and a footnote per type and rule
    follows the table (``~ shape carried: TYPE (layers): rule``)."""
    shapes = [", ".join("x".join(str(d) for d in s) or "scalar" for s in r.top_shapes) for r in rows]
    types = [r.type + (CARRIED if r.carried else "") for r in rows]
    wn = max([len(r.name) for r in rows] + [5])
    wt = max([len(t) for t in types] + [4])
    ws = max([len(s) for s in shapes] + [10])
    head = "%-*s  %-*s  %-*s  %12s  %10s  %10s" % (wn, "layer", wt, "type", ws, "top shapes",
                                                   "params", "FLOPs", "memory")
    lines = [head, "-" * len(head)]
    for r, t, s in zip(rows, types, shapes):
        lines.append("%-*s  %-*s  %-*s  %12s  %10s  %10s" % (
            wn, r.name, wt, t, ws, s, "{:,}".format(r.params), _human(r.flops),
            _human(r.memory, "B")))
    lines.append("-" * len(head))
    lines.append("%-*s  %-*s  %-*s  %12s  %10s  %10s" % (
        wn, "total", wt, "", ws, "%d layers" % len(rows), "{:,}".format(total.params),
        _human(total.flops), _human(total.memory, "B")))
    notes = collections.OrderedDict()
    for r in rows:
        if r.carried:
            notes.setdefault((r.type, r.carried), []).append(r.name)
    for (kind, rule), names in notes.items():
        shown = ", ".join(names[:3]) + (", +%d" % (len(names) - 3) if len(names) > 3 else "")
        lines.append("%s %s (%s): %s" % (CARRIED_NOTE, kind, shown, rule))
    return "\n".join(lines)
