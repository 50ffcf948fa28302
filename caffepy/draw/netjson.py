"""The net-structure JSON dump (schema ``caffepy.netjson``, version 1; see docs/netjson.md).

:func:`net_json` builds the document from a NetParameter (or a path / text) and, when given a
built :class:`caffepy.net.Net`, fills in blob and parameter shapes. :func:`write_net_json` writes it
atomically; :func:`read_net_json` loads and validates one; :func:`annotate_partition` adds the
distributed placement (worker group, worker, server shard) chosen by the distributed solver.
Nothing here imports Graphviz.
"""
import json
import os

from ..errors import CaffeError
from ..proto import caffe_pb2

SCHEMA = "caffepy.netjson"
VERSION = 1
PLACEMENT_FIELDS = ("worker_group", "worker", "server_shard")
PHASES = ("TRAIN", "TEST")

FAMILIES = ("convolution", "pooling", "inner_product", "neuron", "normalization", "loss", "data",
            "other")
_FAMILY_TYPES = {
    "convolution": "Convolution Deconvolution Im2col DepthwiseConvolution ConvolutionDepthwise",
    "pooling": "Pooling SPP ROIPooling PSROIPooling",
    "inner_product": "InnerProduct Embed",
    "neuron": "ReLU PReLU ELU Sigmoid TanH AbsVal BNLL Power Exp Log Threshold Dropout Softmax "
              "Clip Swish GELU ReLU6 Bias",
    "normalization": "BatchNorm BN LRN MVN Normalize Scale",
    "loss": "SoftmaxWithLoss EuclideanLoss HingeLoss InfogainLoss MultinomialLogisticLoss "
            "SigmoidCrossEntropyLoss ContrastiveLoss Accuracy",
    "data": "Data ImageData HDF5Data MemoryData DummyData Input WindowData VideoData",
}
TYPE_FAMILY = {t: fam for fam, types in _FAMILY_TYPES.items() for t in types.split()}


def layer_family(layer_type):
    """The drawing family of a layer type (unknown ``*Loss`` types count as loss)."""
    fam = TYPE_FAMILY.get(layer_type)
    if fam is None:
        fam = "loss" if layer_type.endswith("Loss") else "other"
    return fam


# -- phases --------------------------------------------------------------------------------------
def phase_name(phase):
    """'TRAIN' / 'TEST' / 'ALL' from caffe_pb2.TRAIN / TEST, a name, or None."""
    if phase is None:
        return "ALL"
    if isinstance(phase, str):
        name = phase.upper()
        if name not in PHASES + ("ALL",):
            raise CaffeError("unknown phase '%s' (use TRAIN, TEST or ALL)" % phase)
        return name
    return caffe_pb2.Phase.Name(int(phase))


def layer_phases(lp):
    """The set of phase names a layer runs in, judging its include/exclude rules by phase only."""
    phases = set(PHASES)
    inc = [r for r in lp.include if r.HasField("phase")]
    if inc:
        phases = {caffe_pb2.Phase.Name(r.phase) for r in inc}
        if any(not r.HasField("phase") for r in lp.include):
            phases = set(PHASES)
    for r in lp.exclude:
        if r.HasField("phase"):
            phases.discard(caffe_pb2.Phase.Name(r.phase))
    if lp.HasField("phase"):
        phases &= {caffe_pb2.Phase.Name(lp.phase)}
    return phases


def _phase_label(phases):
    return "ALL" if set(phases) >= set(PHASES) else ("/".join(sorted(phases)) or "NONE")


# -- layer attributes shown in labels ------------------------------------------------------------
def _spatial(p, what, default):
    """kernel / stride / pad of a conv or pooling param as a list (``_h``/``_w`` win)."""
    if p.HasField(what + "_h") or p.HasField(what + "_w"):
        return [getattr(p, what + "_h"), getattr(p, what + "_w")]
    size_name = "kernel_size" if what == "kernel" else what
    v = getattr(p, size_name)
    if hasattr(v, "__len__"):
        return list(v) or ([] if what == "kernel" else [default])
    return [v] if (p.HasField(size_name) or what != "kernel") else []


def layer_attrs(lp):
    """The few hyper-parameters a drawing shows for a layer (JSON-ready)."""
    t = lp.type
    a = {}
    if t in ("Convolution", "Deconvolution") and lp.HasField("convolution_param"):
        p = lp.convolution_param
        a = {"num_output": p.num_output, "kernel": _spatial(p, "kernel", 0),
             "stride": _spatial(p, "stride", 1), "pad": _spatial(p, "pad", 0)}
        if p.group != 1:
            a["group"] = p.group
        if len(p.dilation) and any(d != 1 for d in p.dilation):
            a["dilation"] = list(p.dilation)
    elif t == "Pooling" and lp.HasField("pooling_param"):
        p = lp.pooling_param
        a = {"pool": caffe_pb2.PoolingParameter.PoolMethod.Name(p.pool)}
        if p.global_pooling:
            a["global"] = True
        else:
            a.update(kernel=_spatial(p, "kernel", 0), stride=_spatial(p, "stride", 1),
                     pad=_spatial(p, "pad", 0))
    elif t == "InnerProduct" and lp.HasField("inner_product_param"):
        a = {"num_output": lp.inner_product_param.num_output}
    elif t == "Eltwise" and lp.HasField("eltwise_param"):
        a = {"operation": caffe_pb2.EltwiseParameter.EltwiseOp.Name(lp.eltwise_param.operation)}
    elif t == "Dropout" and lp.HasField("dropout_param"):
        a = {"ratio": round(lp.dropout_param.dropout_ratio, 6)}
    for field in ("data_param", "image_data_param", "hdf5_data_param", "memory_data_param",
                  "window_data_param"):
        if lp.HasField(field) and getattr(lp, field).batch_size:
            a["batch_size"] = getattr(lp, field).batch_size
    return a


def _proto_shape(bp):
    """Shape of a BlobProto / BlobShape (legacy num/channels/height/width included)."""
    if hasattr(bp, "dim"):
        return [int(d) for d in bp.dim]
    if bp.HasField("shape"):
        return [int(d) for d in bp.shape.dim]
    return [bp.num, bp.channels, bp.height, bp.width]


def _count(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _declared_top_shapes(lp):
    """Top shapes a prototxt states outright (Input, DummyData), else {}."""
    shapes = []
    if lp.type == "Input" and lp.HasField("input_param"):
        shapes = [_proto_shape(s) for s in lp.input_param.shape]
    elif lp.type == "DummyData" and lp.HasField("dummy_data_param"):
        shapes = [_proto_shape(s) for s in lp.dummy_data_param.shape]
    if len(shapes) == 1 and len(lp.top) > 1:
        shapes = shapes * len(lp.top)
    return {name: shapes[i] for i, name in enumerate(lp.top) if i < len(shapes)}


# -- building the document -----------------------------------------------------------------------
def _strip_splits(net_param):
    """Drop the Split layers a Net inserted; map their tops back to the split blob."""
    rename, layers = {}, []
    for lp in net_param.layer:
        if lp.type == "Split" and lp.name.endswith("_split") and len(lp.bottom) == 1:
            for t in lp.top:
                rename[t] = rename.get(lp.bottom[0], lp.bottom[0])
            continue
        layers.append(lp)
    return layers, rename


def _net_shapes(net):
    blobs = {name: list(b.shape) for name, b in net.blobs.items()}
    params = {name: [list(b.shape) for b in bl] for name, bl in net.params.items()}
    return blobs, params


def net_json(source, phase=None, net=None):
    """The JSON document (a dict) for a net.

    Args:
        source: a NetParameter, a path or prototxt text, or a built Net (then ``net`` is implied).
        phase: caffe_pb2.TRAIN / TEST, 'TRAIN' / 'TEST' / 'ALL', or None (all layers).
        net: a built Net whose blob and parameter shapes fill the document.
    """
    if hasattr(source, "net_param") and hasattr(source, "blobs"):
        net, source = source, source.net_param
        if phase is None:
            phase = net.phase
    if isinstance(source, caffe_pb2.NetParameter):
        param = source
    else:
        from ..proto.io import read_net
        param = read_net(source)
    want = phase_name(phase)
    layers, rename = _strip_splits(param)
    blob_shapes, param_shapes = _net_shapes(net) if net is not None else ({}, {})

    nodes, links, blob_nodes, layer_ids = [], [], {}, set()

    def blob_node(name, phases):
        name = rename.get(name, name)
        node = blob_nodes.get(name)
        if node is None:
            node = {"id": "blob:" + name, "kind": "blob", "name": name, "phase": None,
                    "shape": blob_shapes.get(name), "_phases": set()}
            blob_nodes[name] = node
            nodes.append(node)
        node["_phases"] |= phases
        return node

    for i, name in enumerate(param.input):
        shape = None
        if i < len(param.input_shape):
            shape = _proto_shape(param.input_shape[i])
        elif len(param.input_dim) >= 4 * (i + 1):
            shape = list(param.input_dim[4 * i:4 * i + 4])
        node = blob_node(name, set(PHASES))
        node["shape"] = node["shape"] or shape

    for lp in layers:
        phases = layer_phases(lp)
        if want != "ALL" and want not in phases:
            continue
        lid = "layer:" + lp.name
        k = 1
        while lid in layer_ids:
            lid, k = "layer:%s#%d" % (lp.name, k), k + 1
        layer_ids.add(lid)
        declared = _declared_top_shapes(lp)
        p_shapes = param_shapes.get(lp.name)
        if p_shapes is None and len(lp.blobs):
            p_shapes = [_proto_shape(b) for b in lp.blobs]
        n_params = max(len(p_shapes or ()), len(lp.param))
        params = []
        for j in range(n_params):
            spec = lp.param[j] if j < len(lp.param) else caffe_pb2.ParamSpec()
            shape = p_shapes[j] if p_shapes is not None and j < len(p_shapes) else None
            params.append({"name": spec.name or "%s:%d" % (lp.name, j), "shape": shape,
                           "count": _count(shape) if shape is not None else None,
                           "lr_mult": spec.lr_mult, "decay_mult": spec.decay_mult})
        bottoms = [rename.get(b, b) for b in lp.bottom]
        tops = list(lp.top)
        top_shapes = []
        for t in tops:
            s = blob_shapes.get(t) or declared.get(t)
            top_shapes.append(s)
        known = [p["count"] for p in params]
        shapes_known = net is not None or len(lp.blobs) > 0
        node = {"id": lid, "kind": "layer", "name": lp.name, "type": lp.type,
                "family": layer_family(lp.type), "phase": _phase_label(phases),
                "bottoms": bottoms, "tops": tops, "top_shapes": top_shapes,
                "in_place": bool(set(bottoms) & set(tops)), "attrs": layer_attrs(lp),
                "params": params,
                "param_count": (sum(known) if None not in known else None) if shapes_known else None}
        nodes.append(node)
        for b in bottoms:
            bn = blob_node(b, phases)
            links.append({"source": bn["id"], "target": lid, "blob": bn["name"], "shape": bn["shape"]})
        for t, s in zip(tops, top_shapes):
            bn = blob_node(t, phases)
            if s is not None and bn["shape"] is None:
                bn["shape"] = s
            links.append({"source": lid, "target": bn["id"], "blob": t, "shape": s or bn["shape"]})

    for node in blob_nodes.values():
        node["phase"] = _phase_label(node.pop("_phases"))
    for link in links:
        if link["shape"] is None:
            link["shape"] = blob_nodes[link["blob"]]["shape"]
    return {"schema": SCHEMA, "version": VERSION, "name": param.name, "phase": want,
            "nodes": nodes, "links": links}


def annotate_partition(doc, placement):
    """Add distributed placement to ``doc`` in place; returns the names that matched nothing.

    ``placement`` maps a layer name or a parameter name (a ParamSpec name, or ``layer:index``) to
    ``{"worker_group": int, "worker": int, "server_shard": int}`` (any subset; None clears).
    A layer's blobs take its worker group when all their producers agree.
    """
    by_name = {}
    for node in doc["nodes"]:
        if node["kind"] == "layer":
            by_name.setdefault(node["name"], []).append(node)
            for p in node.get("params", ()):
                by_name.setdefault(p["name"], []).append(p)
    unmatched = []
    for key, where in placement.items():
        extra = set(where) - set(PLACEMENT_FIELDS)
        if extra:
            raise CaffeError("placement for '%s': unknown field(s) %s (allowed: %s)"
                             % (key, ", ".join(sorted(extra)), ", ".join(PLACEMENT_FIELDS)))
        for f, v in where.items():
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise CaffeError("placement for '%s': %s must be a non-negative int, got %r"
                                 % (key, f, v))
        targets = by_name.get(key)
        if not targets:
            unmatched.append(key)
        for t in targets or ():
            t.update(where)
    node_by_id = {n["id"]: n for n in doc["nodes"]}
    groups = {}
    for link in doc["links"]:
        src = node_by_id.get(link["source"])
        if src is not None and src["kind"] == "layer" and src.get("worker_group") is not None:
            groups.setdefault(link["target"], set()).add(src["worker_group"])
    for node in doc["nodes"]:
        g = groups.get(node["id"])
        if node["kind"] == "blob" and g and len(g) == 1:
            node["worker_group"] = next(iter(g))
    return unmatched


def dumps(doc):
    return json.dumps(doc, indent=1, sort_keys=False) + "\n"


def write_net_json(net_or_param, path, phase=None, placement=None, cluster=None):
    """Write the JSON for a Net, NetParameter or prototxt path to ``path`` atomically; returns doc.

    The training command calls ``write_net_json(net, os.path.join(workspace, "visualization",
    "net.json"))`` once the train net is built (shapes included); the distributed solver passes
    ``placement`` (see :func:`annotate_partition`) and ``cluster`` (worker groups, server shards
    and each param's route: caffepy.dist.report.cluster_summary; docs/netjson.md).
    """
    from ..proto.io import atomic_write
    doc = net_json(net_or_param, phase=phase)
    if placement:
        annotate_partition(doc, placement)
    if cluster:
        doc["cluster"] = cluster
    atomic_write(path, dumps(doc).encode("utf-8"))
    return doc


def validate(doc, where="<json>"):
    """Check a loaded document against schema version 1; raise a one-line CaffeError."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise CaffeError("%s: not a caffepy net JSON (schema must be '%s')" % (where, SCHEMA))
    if doc.get("version") != VERSION:
        raise CaffeError("%s: net JSON version %r is not supported (this caffepy reads version %d)"
                         % (where, doc.get("version"), VERSION))
    nodes, links = doc.get("nodes", []), doc.get("links", [])
    if not isinstance(nodes, list) or not isinstance(links, list):
        raise CaffeError("%s: nodes and links must be lists" % where)
    ids = set()
    for i, n in enumerate(nodes):
        if not isinstance(n, dict) or not all(k in n for k in ("id", "kind", "name")):
            raise CaffeError("%s: node %d lacks id, kind or name" % (where, i))
        if not isinstance(n["id"], (str, int)) or not isinstance(n.get("phase", ""), str):
            raise CaffeError("%s: node %d has an id or phase that is not a string" % (where, i))
        if n["kind"] not in ("layer", "blob"):
            raise CaffeError("%s: node '%s' has kind %r (layer or blob)" % (where, n["id"], n["kind"]))
        ids.add(n["id"])
    for i, link in enumerate(links):
        if not isinstance(link, dict):
            raise CaffeError("%s: link %d is not an object" % (where, i))
        for end in ("source", "target"):
            if not isinstance(link.get(end), (str, int)) or link.get(end) not in ids:
                raise CaffeError("%s: link %d %s %r is not a node id" % (where, i, end, link.get(end)))
    return doc


def read_net_json(path):
    """Load and validate a net JSON file."""
    path = os.fspath(path)
    try:
        with open(path, "r", encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise CaffeError("%s: cannot read: %s" % (path, e.strerror or e))
    except ValueError as e:
        raise CaffeError("%s: not valid JSON: %s" % (path, " ".join(str(e).split())))
    except RecursionError:
        raise CaffeError("%s: not valid JSON: nested too deeply" % path)
    return validate(doc, path)


def select_phase(doc, phase):
    """A copy of ``doc`` keeping only the nodes of one phase ('ALL' keeps everything)."""
    want = phase_name(phase)
    if want == "ALL":
        return doc

    def keep(n):
        return n.get("phase", "ALL") in ("ALL", want) or want in str(n.get("phase", "")).split("/")
    nodes = [n for n in doc["nodes"] if keep(n)]
    ids = {n["id"] for n in nodes}
    links = [lk for lk in doc["links"] if lk["source"] in ids and lk["target"] in ids]
    out = dict(doc, nodes=nodes, links=links, phase=want)
    return out
