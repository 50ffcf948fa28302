"""The page's data: one JSON document for a prototxt, a net.json or a training workspace.

    doc = from_prototxt("deploy.prototxt", inputs={"data": (1, 3, 224, 224)})
    doc = from_net_json("ws/visualization/net.json")
    doc = from_workspace("ws")          # its net.json, and the curves of its logs

The document: ``{"title", "source", "phases": {"TRAIN": graph, "TEST": graph}, "phase" (the one
shown first), "cluster" (a distributed run's, or null), "curves" (or null), "notes"}``. A graph
holds its layers (type, family, the layer's prototxt text, bottoms / tops with shapes, parameter
blobs, FLOPs, memory, the forks a type or field comes from, why a layer does not build), edges
(producer -> reader, with the blob), the inputs no layer produces, blocks (layers sharing a name
prefix: ``inception_3a/...``, ``res2a_branch...``), and two layouts (:mod:`caffepy.view.layout`):
every layer, and each block as one box. Shapes, parameters, FLOPs and memory come from
:func:`caffepy.zoo.summary.summarize` (built for shapes only); a net.json brings its own shapes and
placement. Nothing here reads a file a request names: the server serves this document only.
"""
import os
import re

from ..draw.netjson import layer_family, layer_phases, read_net_json
from ..errors import CaffeError
from ..proto import caffe_pb2
from . import forks, layout as _layout

PHASES = ("TRAIN", "TEST")
CHAR_W = 6.6            # points per label character at the page's 11px font
NODE_H = 30
BLOCK_H = 34
_RESNET = re.compile(r"^(?:res|bn|scale)(\d+[a-z]\w*?)(?:_branch\w*|_relu|_\w*)?$")


def block_of(name):
    """The block a layer name belongs to, or None: the part before the first ``/``
    (``inception_3a/1x1`` -> ``inception_3a``), or ResNet's unit (``bn2a_branch2b`` -> ``res2a``)."""
    if "/" in name.strip("/"):
        return name.strip("/").split("/", 1)[0]
    m = _RESNET.match(name)
    if m:
        return "res" + m.group(1)
    return None


def _label_width(*texts):
    return max(60, 14 + CHAR_W * max(len(t) for t in texts))


def _graph(layers, inputs):
    """Edges, blocks and both layouts for ``layers`` (dicts in prototxt order) and ``inputs``
    (blob names no layer produces), filled into the graph dict returned."""
    n = len(layers)
    node_of_input = {b: n + k for k, b in enumerate(inputs)}
    writer, edges = {}, []
    for i, lr in enumerate(layers):
        for b in lr["bottoms"]:
            src = writer.get(b, node_of_input.get(b))
            if src is not None:
                edges.append([src, i, b])
        for t in lr["tops"]:
            writer[t] = i
    blocks, where = [], {}
    for i, lr in enumerate(layers):
        key = block_of(lr["name"])
        if key is not None:
            where.setdefault(key, []).append(i)
    for key, members in where.items():
        if len(members) >= 2:
            for i in members:
                layers[i]["block"] = len(blocks)
            blocks.append({"name": key, "members": members})
    sizes = [(_label_width(lr["name"], lr["type"]), NODE_H) for lr in layers]
    sizes += [(_label_width(b), NODE_H - 8) for b in inputs]
    pairs = [(a, b) for a, b, _ in edges]
    graph = {"layers": layers, "inputs": inputs, "edges": edges, "blocks": blocks,
             "layout": _layout.layout(sizes, pairs), "sizes": [[round(w), h] for w, h in sizes]}
    if blocks:
        # collapsed: node k < len(blocks) is block k, then the layers outside blocks, then inputs
        cnode, csizes = [], [(_label_width(b["name"], "%d layers" % len(b["members"])), BLOCK_H)
                             for b in blocks]
        for i, lr in enumerate(layers):
            if lr.get("block") is not None:
                cnode.append(lr["block"])
            else:
                cnode.append(len(csizes))
                csizes.append(sizes[i])
        cnode += [len(csizes) + k for k in range(len(inputs))]
        csizes += sizes[n:]
        cedges, seen = [], set()
        for a, b, _ in edges:
            ca, cb = cnode[a], cnode[b]
            if ca != cb and (ca, cb) not in seen:
                seen.add((ca, cb))
                cedges.append((ca, cb))
        graph["collapsed"] = {"node_of": cnode, "edges": [list(e) for e in cedges],
                              "sizes": [[round(w), h] for w, h in csizes],
                              "layout": _layout.layout(csizes, cedges)}
    return graph


def _total(layers):
    """Sums over the layers; None for a column no layer knows (a net.json has no FLOPs)."""
    out = {}
    for k in ("param_count", "flops", "memory"):
        known = [lr[k] for lr in layers if lr.get(k) is not None]
        out[k] = sum(known) if known else None
    return out


# -- a prototxt ----------------------------------------------------------------------------------
def _shapes_of(net):
    """{layer name: (top shapes, [param shapes])} and {blob: shape} of a built Net."""
    per = {}
    for layer, name, top in zip(net.layers, net._layer_names, net.top_vecs):
        if layer.type != "Split":
            per[name] = ([list(t.shape) for t in top], [list(b.shape) for b in layer.blobs])
    return per, {name: list(b.shape) for name, b in net.blobs.items()}


def _phase_graph(param, path, phase, inputs, weights):
    from google.protobuf import text_format
    from ..zoo.summary import summarize
    kept = [lp for lp in param.layer if phase in layer_phases(lp)]
    notes, inferred, nets, rows, error, error_layer = [], [], [], [], None, None
    try:
        rows, _ = summarize(path, inputs=inputs, phase=getattr(caffe_pb2, phase), notes=notes,
                            weights=weights, inferred=inferred, nets=nets)
    except (CaffeError, ValueError, OSError) as e:
        error = " ".join(str(e).split())
        error_layer = getattr(e, "layer_name", None)
    by_row = {r.name: r for r in rows}
    per, blob_shapes = _shapes_of(nets[0]) if nets else ({}, {})
    why = {}
    for note in notes:
        m = re.match(r"layer '(.*?)' \(", note)
        if m:
            why[m.group(1)] = note
    layers = []
    for lp in kept:
        row = by_row.get(lp.name)
        tops, params = per.get(lp.name, (None, None))
        specs = list(lp.param)
        p_list = []
        for j, shape in enumerate(params or []):
            spec = specs[j] if j < len(specs) else caffe_pb2.ParamSpec()
            count = 1
            for d in shape:
                count *= d
            p_list.append({"name": spec.name or "%s:%d" % (lp.name, j), "shape": shape,
                           "count": count, "lr_mult": spec.lr_mult if spec.HasField("lr_mult") else 1,
                           "decay_mult": spec.decay_mult if spec.HasField("decay_mult") else 1})
        err = why.get(lp.name)
        if err is None and error is not None and (error_layer == lp.name or
                                                  "layer '%s'" % lp.name in error):
            err = error
        layers.append({
            "name": lp.name, "type": lp.type, "family": layer_family(lp.type),
            "bottoms": list(lp.bottom), "tops": list(lp.top),
            "top_shapes": tops if tops is not None else [blob_shapes.get(t) for t in lp.top],
            "bottom_shapes": [blob_shapes.get(b) for b in lp.bottom],
            "params": p_list, "param_count": row.params if row else None,
            "flops": row.flops if row else None, "memory": row.memory if row else None,
            "built_as": row.type if row and row.type != lp.type else None,
            "text": text_format.MessageToString(lp, as_utf8=True),
            "forks": forks.of_layer(lp), "error": err})
    inputs_ = _net_inputs(layers)
    graph = _graph(layers, inputs_)
    graph["input_shapes"] = [blob_shapes.get(b) for b in inputs_]
    graph["total"] = _total(layers)
    graph["notes"] = notes + inferred
    graph["error"] = error
    return graph


def from_prototxt(path, inputs=None, weights=None, phase=None):
    """The page's document for a net prototxt (both phases when their layers differ). Read for
    the structure only (caffepy.proto.harvest_policy.structure_only): fields known only from
    forks are named in a WARNING and in the layers' panels."""
    from ..proto.harvest_policy import structure_only
    with structure_only():
        return _from_prototxt(path, inputs, weights, phase)


def _from_prototxt(path, inputs, weights, phase):
    from ..proto.io import read_net
    param = read_net(path)
    names = {p: [lp.name for lp in param.layer if p in layer_phases(lp)] for p in PHASES}
    shown = (phase or "TEST").upper()
    wanted = PHASES if names["TRAIN"] != names["TEST"] else (shown,)
    phases = {p: _phase_graph(param, path, p, dict(inputs or {}), weights) for p in wanted}
    return {"title": param.name or os.path.basename(path), "file": os.path.basename(path),
            "source": "prototxt", "phases": phases, "phase": shown, "cluster": None,
            "curves": None, "notes": [] if len(wanted) == 2 else
            ["both phases have the same layers; showing %s" % shown]}


# -- a net.json ----------------------------------------------------------------------------------
def _from_doc_layers(nodes, phase):
    layers = []
    for n in nodes:
        if n.get("kind") != "layer":
            continue
        label = str(n.get("phase", "ALL"))
        if phase != "ALL" and label not in ("ALL", phase) and phase not in label.split("/"):
            continue
        params = [{"name": str(p.get("name", "")), "shape": p.get("shape"), "count": p.get("count"),
                   "lr_mult": p.get("lr_mult"), "decay_mult": p.get("decay_mult"),
                   "placement": {k: p[k] for k in ("worker_group", "worker", "server_shard")
                                 if p.get(k) is not None}}
                  for p in n.get("params", ()) if isinstance(p, dict)]
        layers.append({
            "name": str(n["name"]), "type": str(n.get("type", "?")),
            "family": layer_family(str(n.get("type", ""))),
            "bottoms": [str(b) for b in n.get("bottoms", ())], "tops": [str(t) for t in n.get("tops", ())],
            "top_shapes": list(n.get("top_shapes") or []), "bottom_shapes": [],
            "params": params, "param_count": n.get("param_count"), "flops": None, "memory": None,
            "attrs": n.get("attrs") or {}, "text": None, "forks": [], "error": None,
            "placement": {k: n[k] for k in ("worker_group", "worker", "server_shard")
                          if n.get(k) is not None}})
    shapes = {}
    for n in nodes:
        if n.get("kind") == "blob" and n.get("shape") is not None:
            shapes[str(n["name"])] = n["shape"]
    for lr in layers:
        lr["bottom_shapes"] = [shapes.get(b) for b in lr["bottoms"]]
        lr["top_shapes"] = [s if s is not None else shapes.get(t)
                            for s, t in zip(lr["top_shapes"] + [None] * len(lr["tops"]), lr["tops"])]
    return layers, shapes


def from_net_json(path, doc=None):
    """The page's document for a caffepy net.json (docs/netjson.md), cluster included."""
    doc = doc or read_net_json(path)
    want = str(doc.get("phase", "ALL"))
    phases = {}
    for p in (PHASES if want == "ALL" else (want,)):
        layers, shapes = _from_doc_layers(doc["nodes"], p if want == "ALL" else "ALL")
        if not layers and want == "ALL":
            continue
        graph = _graph(layers, _net_inputs(layers))
        graph["input_shapes"] = [shapes.get(b) for b in graph["inputs"]]
        graph["total"] = _total(layers)
        graph["notes"], graph["error"] = [], None
        phases[p] = graph
    if not phases:                          # a net.json without layers: an empty page
        phases["TEST"] = dict(_graph([], []), input_shapes=[], total=_total([]), notes=[], error=None)
    if len(phases) == 2 and [lr["name"] for lr in phases["TRAIN"]["layers"]] == \
            [lr["name"] for lr in phases["TEST"]["layers"]]:
        del phases["TRAIN"]
    prefer = ("TRAIN", "TEST") if doc.get("cluster") else ("TEST", "TRAIN")   # a run trains
    shown = next((p for p in prefer if p in phases), "TEST")
    return {"title": str(doc.get("name") or os.path.basename(path)), "file": os.path.basename(path),
            "source": "netjson", "phases": phases, "phase": shown,
            "cluster": doc.get("cluster"), "curves": None, "notes": []}


def _net_inputs(layers):
    """Blob names read before any layer writes them (the net's inputs)."""
    produced, out = set(), []
    for lr in layers:
        for b in lr["bottoms"]:
            if b not in produced and b not in out:
                out.append(b)
        produced.update(lr["tops"])
    return out


# -- a workspace ---------------------------------------------------------------------------------
def workspace_logs(folder):
    """The training logs of a workspace: ``*.log`` files in it (their ``.rank<N>`` files are read
    beside them)."""
    out = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".log") and os.path.isfile(os.path.join(folder, name)):
            out.append(os.path.join(folder, name))
    return out


def from_workspace(folder):
    """The page's document for a training workspace: ``visualization/net.json`` and its logs."""
    path = os.path.join(folder, "visualization", "net.json")
    if not os.path.exists(path):
        raise CaffeError("%s: no visualization/net.json (a distributed run's workspace has one; "
                         "give the net's .prototxt instead)" % folder)
    doc = from_net_json(path)
    doc["source"] = "workspace"
    doc["title"] = "%s (%s)" % (doc["title"], os.path.basename(os.path.abspath(folder)))
    return doc
