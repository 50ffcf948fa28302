"""Graphviz DOT for a net JSON document, and rendering it to PNG / SVG / PDF.

:func:`to_dot` follows Caffe's drawing (python/caffe/draw.py): layers are filled boxes, blobs are
grey octagons, an in-place layer points back at the blob it reads; on top of that layers are coloured
by family, labels are short (name, type, the key hyper-parameters), edges carry blob shapes when the
document has them, and ``group_by="worker"`` draws one cluster per worker group.

:func:`render` lays the DOT out with the first engine found: the ``graphviz`` package driving a
``dot`` executable (system Graphviz, or ``$CAFFEPY_DOT``), else PyGraphviz >= 2.0.4, whose wheels
bundle Graphviz's libraries and run the ``dot`` layout in-process (so ``pip install`` alone is
enough). With neither, ``.dot`` output still works and other formats fail with a one-line error.
"""
import os
import re
import shutil

from ..errors import CaffeError

FORMATS = ("png", "svg", "pdf", "dot")
RANKDIRS = ("LR", "TB", "BT", "RL")
INSTALL_HINT = ("pip install 'pygraphviz>=2.0.4' (Python >= 3.10; bundles Graphviz) "
                "or apt-get install graphviz (then pip install graphviz)")

FAMILY_COLOR = {
    "convolution": "#FF5050", "pooling": "#FF9900", "inner_product": "#CC33FF",
    "neuron": "#90EE90", "normalization": "#FFE08A", "loss": "#F4A6A6", "data": "#87CEEB",
    "other": "#6495ED",
}
BLOB_STYLE = {"shape": "octagon", "style": "filled", "fillcolor": "#E0E0E0"}
LAYER_STYLE = {"shape": "box", "style": "filled,rounded"}
ORDER_STYLE = {"style": "dashed", "color": "#888888", "constraint": "false", "arrowsize": "0.4"}
_CTRL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


def dot_quote(text):
    """A DOT double-quoted string showing ``text`` literally (quotes, backslashes, newlines)."""
    text = str(text).replace("\r\n", "\n").replace("\r", "\n")
    text = _CTRL.sub(" ", text)
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"%s"' % text


def _attrs(d):
    return ", ".join("%s=%s" % (k, dot_quote(v)) for k, v in d.items())


def shape_str(shape):
    return "x".join(str(d) for d in shape) if shape is not None else ""


def _dims(v):
    if not v:
        return ""
    if len(set(v)) == 1:
        return str(v[0])
    return "x".join(str(x) for x in v)


def _human(n):
    for unit, div in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return "%.3g%s" % (n / div, unit)
    return str(n)


def attr_line(node):
    """One short line of hyper-parameters: ``96 out, k11 s4`` / ``MAX k3 s2`` / ``batch 64``."""
    a = node.get("attrs") or {}
    parts = []
    if "pool" in a:
        parts.append(a["pool"] + (" global" if a.get("global") else ""))
    if "num_output" in a and "kernel" not in a:
        parts.append("%s out" % a["num_output"])
    if a.get("kernel"):
        k = "k%s" % _dims(a["kernel"])
        s, p = _dims(a.get("stride")), _dims(a.get("pad"))
        k += (" s%s" % s if s and s != "1" else "") + (" p%s" % p if p and p != "0" else "")
        parts.append(("%s out, " % a["num_output"] if "num_output" in a else "") + k)
    if a.get("group"):
        parts.append("g%s" % a["group"])
    if a.get("dilation"):
        parts.append("d%s" % _dims(a["dilation"]))
    for key, word in (("operation", ""), ("ratio", "ratio "), ("batch_size", "batch ")):
        if key in a:
            parts.append("%s%s" % (word, a[key]))
    return ", ".join(parts)


def layer_label(node, display_lrm=False):
    lines = [node["name"], "(%s)" % node.get("type", "?")]
    extra = attr_line(node)
    if extra:
        lines.append(extra)
    if node.get("param_count"):
        lines.append("%s params" % _human(node["param_count"]))
    if display_lrm and node.get("params"):
        lr = ", ".join("%g" % p.get("lr_mult", 1) for p in node["params"])
        dm = ", ".join("%g" % p.get("decay_mult", 1) for p in node["params"])
        lines.append("lr mult %s; decay %s" % (lr, dm))
    where = [("wg", node.get("worker_group")), ("w", node.get("worker")),
             ("shard", node.get("server_shard"))]
    if any(v is not None for _, v in where):
        lines.append(" ".join("%s%s" % (k, v) for k, v in where if v is not None))
    return "\n".join(lines)


def graph_depth(doc):
    """Length of the longest layer chain (to pick a vertical layout for deep nets)."""
    depth, best = {}, 0
    for n in doc["nodes"]:                    # layers are in prototxt (topological) order
        if n["kind"] != "layer":
            continue
        d = 1 + max([depth.get(b, 0) for b in n.get("bottoms", ())] or [0])
        for t in n.get("tops", ()):
            depth[t] = d
        best = max(best, d)
    return best


def to_dot(doc, rankdir="LR", display_lrm=False, group_by=None, label_edges=True):
    """The DOT source (str) for a net JSON document."""
    rankdir = str(rankdir).upper()
    if rankdir not in RANKDIRS:
        raise CaffeError("rankdir must be one of %s, got '%s'" % ("/".join(RANKDIRS), rankdir))
    if group_by not in (None, "worker"):
        raise CaffeError("group_by must be 'worker' or None, got '%s'" % group_by)
    ids = {n["id"]: "n%d" % i for i, n in enumerate(doc["nodes"])}
    out = ["digraph %s {" % dot_quote(doc.get("name") or "net"),
           "  graph [%s];" % _attrs({"rankdir": rankdir, "nodesep": "0.2", "ranksep": "0.3",
                                     "fontname": "Helvetica"}),
           "  node [%s];" % _attrs({"fontname": "Helvetica", "fontsize": "10", "margin": "0.08,0.04",
                                    "height": "0.3"}),
           "  edge [%s];" % _attrs({"fontname": "Helvetica", "fontsize": "8", "arrowsize": "0.6"})]
    clusters = {}
    for n in doc["nodes"]:
        if n["kind"] == "layer":
            style = dict(LAYER_STYLE, fillcolor=FAMILY_COLOR.get(n.get("family"), FAMILY_COLOR["other"]),
                         label=layer_label(n, display_lrm))
        else:
            label = n["name"] + ("\n" + shape_str(n["shape"]) if n.get("shape") else "")
            style = dict(BLOB_STYLE, label=label, ordering="out")
        line = "%s [%s];" % (ids[n["id"]], _attrs(style))
        group = n.get("worker_group") if group_by == "worker" else None
        clusters.setdefault(group, []).append(line)
    if group_by == "worker" and set(clusters) == {None}:
        raise CaffeError("--group-by worker: no node has a worker_group (draw a distributed net.json)")
    out += ["  " + line for line in clusters.pop(None, [])]
    for g in sorted(clusters):
        out.append("  subgraph %s {" % dot_quote("cluster_worker_group_%s" % g))
        out.append("    graph [%s];" % _attrs({"label": "worker group %s" % g, "style": "dashed"}))
        out += ["    " + line for line in clusters[g]]
        out.append("  }")
    kinds = {n["id"]: n for n in doc["nodes"]}
    for lk in doc["links"]:
        attrs = {}
        src = kinds.get(lk["source"])
        if src is not None and src["kind"] == "layer":
            if label_edges and lk.get("shape"):
                attrs["label"] = shape_str(lk["shape"])
            if lk["blob"] in src.get("bottoms", ()):
                attrs["constraint"] = "false"   # in place: point back at the blob read
            else:
                attrs["weight"] = "4"           # keep the main data path straight
        elif not kinds.get(lk["target"], {}).get("in_place"):
            attrs["weight"] = "4"
        out.append("  %s -> %s%s;" % (ids[lk["source"]], ids[lk["target"]],
                                      " [%s]" % _attrs(attrs) if attrs else ""))
    for a, b in _in_place_order(doc):
        out.append("  %s -> %s [%s];" % (ids[a], ids[b], _attrs(ORDER_STYLE)))
    if doc.get("cluster"):
        out += cluster_lines(doc["cluster"])
    out.append("}")
    return "\n".join(out) + "\n"


def cluster_lines(cluster):
    """DOT lines for net.json's ``cluster`` (a distributed run): one node per worker group (its
    workers and hosts), one per server shard (its param slices), push / pull edges between a group
    and the shards of its server group."""
    out = ["  subgraph %s {" % dot_quote("cluster_dist"),
           "    graph [%s];" % _attrs({"label": "cluster: %s, %s engine" % (
               cluster.get("consistency", "?"), cluster.get("engine", "?")), "style": "dashed"})]
    held = {}
    sfb = []
    for r in cluster.get("routes", ()):
        if r["route"] == "sfb":
            sfb.append(r["param"])
        for sh in r["shards"]:
            if "rows" in sh:
                where = "rows %s (table)" % sh["rows"]
            else:
                where = "[%d:%d)" % (sh["offset"], sh["offset"] + sh["count"])
            held.setdefault(sh["shard"], []).append("%s %s" % (r["param"], where))
    for g in cluster.get("worker_groups", ()):
        label = ["worker group %d" % g["group"]]
        label += ["worker %d @%s:%d" % (w["id"], w["host"], w["rank"]) for w in g["workers"]]
        if len(g.get("stubs", ())) > 1:         # per-host sums
            label += ["%s @%s:%d sums %s" % (st["stub"], st["host"], st["rank"],
                                             ",".join(str(w) for w in st["workers"]))
                      for st in g["stubs"]]
        if sfb:
            label.append("SFB: " + ", ".join(sfb))
        out.append("    %s [%s];" % (dot_quote("wg%d" % g["group"]),
                                     _attrs({"shape": "box3d", "label": "\n".join(label)})))
    for sv in cluster.get("servers", ()):
        label = ["server %d: shard %d (server group %d)" % (sv["id"], sv["shard"],
                                                             sv["server_group"]),
                 "@%s:%d" % (sv["host"], sv["rank"])] + held.get(sv["shard"], [])
        out.append("    %s [%s];" % (dot_quote("sv%d" % sv["id"]),
                                     _attrs({"shape": "cylinder", "label": "\n".join(label)})))
    for g in cluster.get("worker_groups", ()):
        for sv in cluster.get("servers", ()):
            if sv["server_group"] == g.get("server_group", 0):
                out.append("    %s -> %s [%s];" % (dot_quote("wg%d" % g["group"]),
                                                   dot_quote("sv%d" % sv["id"]),
                                                   _attrs({"dir": "both", "label": "push / pull"})))
    out.append("  }")
    return out


def _in_place_order(doc):
    """Pairs (layer id, next layer id) giving the run order of the layers that work in place on
    one blob, then its next reader: drawn as dashed 'then' arrows so the order stays visible."""
    last, pairs = {}, []
    for n in doc["nodes"]:
        if n["kind"] != "layer":
            continue
        for b in n.get("bottoms", ()):
            if b in last:
                if b in n.get("tops", ()) or len(n.get("bottoms", ())) == 1:
                    pairs.append((last[b], n["id"]))     # a reader of several blobs sits lower
                if b not in n.get("tops", ()):
                    del last[b]
        for t in n.get("tops", ()):
            if t in n.get("bottoms", ()):
                last[t] = n["id"]
            else:
                last.pop(t, None)
    return pairs


# -- rendering -----------------------------------------------------------------------------------
def _dot_executable():
    exe = os.environ.get("CAFFEPY_DOT")
    if exe:
        return exe if os.path.isfile(exe) else None
    return shutil.which("dot")


def find_engine():
    """'graphviz' (package + dot executable), 'pygraphviz' (bundled libs), or None."""
    if _dot_executable():
        try:
            import graphviz  # noqa: F401
            return "graphviz"
        except ImportError:
            pass
    try:
        import pygraphviz
        major = int(pygraphviz.__version__.split(".")[0])
        if major >= 2:
            return "pygraphviz"
    except (ImportError, ValueError):
        pass
    return None


def _render_graphviz(source, fmt):
    import graphviz
    exe = _dot_executable()
    env_path = os.environ.get("PATH", "")
    os.environ["PATH"] = os.path.dirname(os.path.abspath(exe)) + os.pathsep + env_path
    try:
        return graphviz.pipe("dot", fmt, source.encode("utf-8"), quiet=True)
    except graphviz.CalledProcessError as e:
        msg = (e.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise CaffeError("Graphviz dot failed: %s" % (msg[0] if msg else e))
    finally:
        os.environ["PATH"] = env_path


class _QuietStderr(object):
    """Hold C-level stderr while the in-process Graphviz runs; re-emit all but fontconfig noise."""

    def __enter__(self):
        import tempfile
        self._tmp = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._tmp.fileno(), 2)
        return self

    def __exit__(self, *exc):
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._tmp.seek(0)
        text = self._tmp.read().decode("utf-8", "replace")
        self._tmp.close()
        self.lines = [ln for ln in text.splitlines() if ln and not ln.startswith("Fontconfig")]
        for ln in self.lines:
            os.write(2, (ln + "\n").encode("utf-8"))
        return False


def _render_pygraphviz(source, fmt):
    import pygraphviz
    with _QuietStderr():
        try:
            graph = pygraphviz.AGraph(string=source)
            return graph.draw(format=fmt, prog="dot")
        except (pygraphviz.DotError, ValueError, OSError) as e:
            raise CaffeError("Graphviz (pygraphviz) failed: %s" % " ".join(str(e).split()))


def render(source, fmt):
    """Bytes of the DOT ``source`` rendered as ``fmt`` (png, svg, pdf; dot/gv/raw return the source)."""
    fmt = fmt.lower().lstrip(".")
    if fmt in ("dot", "gv", "raw"):
        return source.encode("utf-8")
    if fmt not in FORMATS:
        raise CaffeError("cannot draw to '.%s': use .png, .svg, .pdf or .dot" % fmt)
    engine = find_engine()
    if engine is None:
        raise CaffeError("cannot render .%s: no Graphviz layout engine found; %s; or write .dot"
                         % (fmt, INSTALL_HINT))
    if engine == "graphviz":
        return _render_graphviz(source, fmt)
    return _render_pygraphviz(source, fmt)
