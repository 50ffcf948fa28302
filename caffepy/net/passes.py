"""Compiler passes from a NetParameter to the layer list a Net instantiates (Caffe's Net::Init, split up).

* :func:`filter_net` -- keep the layers whose ``include`` / ``exclude`` NetStateRules match the
  NetState (phase, level, stages), as Caffe's ``FilterNet`` / ``StateMeetsRule``; a net whose
  data layers exist only in the other phase fails with :class:`PhaseError` naming that phase.
* :func:`insert_splits` -- where one top feeds several bottoms (or feeds a bottom and carries a loss
  weight), insert a ``Split`` layer with Caffe's names ``<blob>_<layer>_<i>_split`` and tops
  ``<blob>_<layer>_<i>_split_<k>``, so every gradient is summed exactly once.
* :func:`make_state` -- the NetState from a phase, level and stages on top of the file's ``state``.
"""
import collections

from ..errors import NetError
from ..proto import caffe_pb2, digits


def make_state(net_param, phase=None, level=None, stages=()):
    state = caffe_pb2.NetState()
    state.CopyFrom(net_param.state)
    if phase is not None:
        state.phase = phase
    if level is not None:
        state.level = int(level)
    for s in stages or ():
        if s not in state.stage:
            state.stage.append(s)
    return state


def state_meets_rule(state, rule):
    """Whether a NetState satisfies one NetStateRule (phase, min/max level, stage, not_stage)."""
    if rule.HasField("phase") and rule.phase != state.phase:
        return False
    if rule.HasField("min_level") and state.level < rule.min_level:
        return False
    if rule.HasField("max_level") and state.level > rule.max_level:
        return False
    if any(s not in state.stage for s in rule.stage):
        return False
    if any(s in state.stage for s in rule.not_stage):
        return False
    return True


def layer_included(layer_param, state):
    if len(layer_param.include) and len(layer_param.exclude):
        raise NetError("layer '%s' (%s): specify either include rules or exclude rules, not both"
                       % (layer_param.name, layer_param.type))
    if len(layer_param.include):
        return any(state_meets_rule(state, r) for r in layer_param.include)
    return not any(state_meets_rule(state, r) for r in layer_param.exclude)


class PhaseError(NetError):
    """A net that cannot be built in the requested phase but can in ``phase`` (its data layers
    are only there), with ``stages`` added when its data layers are all given to stages (DIGITS'
    "train" / "val", LRCN's "test-on-val"); ``phase`` is None on copies made for messages (see
    ``__cause__``)."""

    def __init__(self, message, phase=None, stages=()):
        super(PhaseError, self).__init__(message)
        self.phase = phase
        self.stages = tuple(stages)


def filter_net(net_param, state):
    """A copy of ``net_param`` with ``state`` set and only the layers the state includes.

    If a kept layer reads a blob no kept layer writes, and the other phase (same level and
    stages) writes it before any layer reads it, raise :class:`PhaseError` naming the phase to
    build instead."""
    out = caffe_pb2.NetParameter()
    out.CopyFrom(net_param)
    del out.layer[:]
    out.state.CopyFrom(state)
    for lp in net_param.layer:
        if layer_included(lp, state):
            out.layer.add().CopyFrom(lp)
    _check_phase(net_param, out, state)
    return out


def _unknown_reads(layers):
    """(layer, bottom) for each bottom a layer of ``layers`` reads before any earlier one writes
    it, in order."""
    produced = set()
    for lp in layers:
        for name in lp.bottom:
            if name not in produced:
                yield lp, name
        produced.update(lp.top)


def _first_unknown_bottom(layers):
    return next(_unknown_reads(layers), (None, None))


def _unknown_bottoms(layers):
    """Every bottom a layer of ``layers`` reads before any earlier one writes it."""
    return {name for _, name in _unknown_reads(layers)}


def _stage_names(net_param):
    """The stage names the layers' include rules ask for, in file order."""
    return list(dict.fromkeys(s for lp in net_param.layer for r in lp.include for s in r.stage))


def _check_phase(net_param, filtered, state):
    lp, blob = _first_unknown_bottom(filtered.layer)
    if lp is None:
        return
    other = caffe_pb2.NetState()
    other.CopyFrom(state)
    other.phase = caffe_pb2.TEST if state.phase == caffe_pb2.TRAIN else caffe_pb2.TRAIN
    kept = [x for x in net_param.layer if layer_included(x, other)]
    # the other phase must produce the blob before its readers; what else it misses (the top of
    # a layer a lenient summary left out, a loss's label) is that phase's own error
    if blob in _unknown_bottoms(kept):
        if not state.stage:
            _check_stages(net_param, state, lp, blob)
        return
    makers = [x.name for x in kept if blob in x.top]
    if not makers:          # the other phase resolves it otherwise: wiring reports the blob
        return
    phase = caffe_pb2.Phase.Name(other.phase)
    raise PhaseError("layer '%s' (%s): bottom blob '%s' is produced only in phase %s (by layer "
                     "'%s'); build the net in phase %s (caffepy summary --phase %s, "
                     "caffe.Net(..., caffe.%s))" % (lp.name, lp.type, blob, phase, makers[0],
                                                    phase, phase, phase), phase=other.phase)


def _check_stages(net_param, state, lp, blob):
    """When the net is built without stages and its data layers are each given to a stage: raise
    :class:`PhaseError` naming the first stage (this phase first, then the other) with which
    every bottom is produced and ``blob`` too; DIGITS' stage of the phase is tried first."""
    for phase in (state.phase, caffe_pb2.TEST if state.phase == caffe_pb2.TRAIN
                  else caffe_pb2.TRAIN):
        ours = digits.STAGE_OF_PHASE.get(phase)
        for stage in sorted(_stage_names(net_param), key=lambda s: s != ours):
            trial = caffe_pb2.NetState()
            trial.CopyFrom(state)
            trial.phase = phase
            trial.stage.append(stage)
            kept = [x for x in net_param.layer if layer_included(x, trial)]
            if _first_unknown_bottom(kept)[0] is not None or \
                    not any(blob in x.top for x in kept):
                continue
            name = caffe_pb2.Phase.Name(phase)
            raise PhaseError("layer '%s' (%s): bottom blob '%s' is produced only with stage '%s' "
                             "(phase %s); build the net with that stage (caffe.Net(..., "
                             "caffe.%s, stages=['%s']))" % (lp.name, lp.type, blob, stage, name,
                                                             name, stage),
                             phase=phase, stages=[stage])


def split_layer_name(layer_name, blob_name, top_index):
    return "%s_%s_%d_split" % (blob_name, layer_name, top_index)


def split_blob_name(layer_name, blob_name, top_index, split_index):
    return "%s_%s_%d_split_%d" % (blob_name, layer_name, top_index, split_index)


def insert_splits(net_param):
    """A copy of ``net_param`` with Split layers inserted for fan-out (Caffe's InsertSplits)."""
    last_top = {}                             # blob name -> (layer index, top index)
    source_of = {}                            # (layer index, bottom index) -> (layer, top)
    consumers = collections.Counter()         # (layer, top) -> number of uses
    loss_weight = {}
    for i, lp in enumerate(net_param.layer):
        for j, name in enumerate(lp.bottom):
            if name not in last_top:
                e = NetError("layer '%s' (%s): unknown bottom blob '%s' (bottom index %d): no "
                             "earlier layer produces it" % (lp.name, lp.type, name, j))
                e.layer_name = lp.name
                raise e
            source_of[(i, j)] = last_top[name]
            consumers[last_top[name]] += 1
        for j, name in enumerate(lp.top):
            last_top[name] = (i, j)
        for j, w in enumerate(lp.loss_weight):
            if j < len(lp.top) and w != 0:
                consumers[(i, j)] += 1
                loss_weight[(i, j)] = w
    out = caffe_pb2.NetParameter()
    out.CopyFrom(net_param)
    del out.layer[:]
    next_split = collections.Counter()
    for i, lp in enumerate(net_param.layer):
        new = out.layer.add()
        new.CopyFrom(lp)
        for j, name in enumerate(lp.bottom):
            src = source_of[(i, j)]
            if consumers[src] > 1:
                src_layer = net_param.layer[src[0]].name
                new.bottom[j] = split_blob_name(src_layer, name, src[1], next_split[src])
                next_split[src] += 1
        for j, name in enumerate(lp.top):
            count = consumers[(i, j)]
            if count > 1:
                split = caffe_pb2.LayerParameter()
                split.name = split_layer_name(lp.name, name, j)
                split.type = "Split"
                split.bottom.append(name)
                for k in range(count):
                    split.top.append(split_blob_name(lp.name, name, j, k))
                w = loss_weight.get((i, j), 0.0)
                if w:
                    for k in range(count):
                        split.loss_weight.append(w if k == 0 else 0.0)
                    del new.loss_weight[:]
                    next_split[(i, j)] += 1
                out.layer.add().CopyFrom(split)
    return out


def check_in_place(lp, tops, in_place):
    """A layer computed in place must leave its blob's size alone: Caffe would read the bottom
    through the top's new shape (undefined results), so the net is refused at build time."""
    for j, shape, count in in_place:
        if tops[j].count != count:
            raise NetError("layer '%s' (%s) works in place on blob '%s' but changes its shape "
                           "from %s to %s: give the layer a top of its own"
                           % (lp.name, lp.type, lp.top[j], shape, tuple(tops[j].shape)))


def name_occurrence(param, state, name):
    """Which of the layers named ``name`` in ``param`` (0: the first) is the one ``state``
    includes, for an error's file:line (a net's phases often reuse names); 0 when unknown."""
    if state is None or name is None:
        return 0
    same = [lp for lp in param.layer if lp.name == name]
    for k, lp in enumerate(same):
        try:
            if layer_included(lp, state):
                return k
        except NetError:        # its own rules are wrong: that is another error
            return 0
    return 0
