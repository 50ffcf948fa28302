"""Top-down positions for the page's graph: Graphviz ``dot`` when there is one, else layers.

:func:`layout` takes node boxes (width, height in points) and edges (index pairs) and returns
``{"w", "h", "nodes": [[x, y], ...], "edges": [[x0, y0, x1, y1, ...] or [], ...], "engine"}``:
node centres with y growing downwards, and per edge the points of dot's cubic B-spline (start,
then three points per segment) or ``[]`` where the page draws its own curve. Engines, in order:
a ``dot`` executable (``$CAFFEPY_DOT`` or PATH, run as ``dot -Tjson``), PyGraphviz >= 2 (bundled
Graphviz), then :func:`layered` (longest-path ranks, one barycentre sweep), which needs nothing.
"""
import json
import subprocess

from ..draw.render import _dot_executable

POINTS_PER_INCH = 72.0
RANK_GAP = 28
NODE_GAP = 14
DOT_TIMEOUT = 60


def _dot_source(sizes, edges):
    out = ["digraph g {", ' graph [rankdir=TB, nodesep=0.2, ranksep=0.3, splines=spline];',
           ' node [shape=box, fixedsize=true, label=""];', " edge [arrowhead=none];"]
    for i, (w, h) in enumerate(sizes):
        out.append(" n%d [width=%.3f, height=%.3f];" % (i, w / POINTS_PER_INCH, h / POINTS_PER_INCH))
    for a, b in edges:
        out.append(" n%d -> n%d;" % (a, b))
    out.append("}")
    return "\n".join(out) + "\n"


def _spline(pos):
    """dot's edge ``pos`` ("[e,x,y ]x,y x,y ...") as a flat list of ints (y not yet flipped)."""
    pts = []
    for tok in pos.split():
        if tok.startswith(("e,", "s,")):
            continue
        x, y = tok.split(",")[:2]
        pts.append((float(x), float(y)))
    return pts


def _from_dot_json(doc, n, edges):
    bb = [float(v) for v in doc["bb"].split(",")]
    height = bb[3]
    nodes = [[0, 0]] * n
    for obj in doc.get("objects", ()):
        name = obj.get("name", "")
        if name.startswith("n") and name[1:].isdigit() and "pos" in obj:
            x, y = (float(v) for v in obj["pos"].split(","))
            nodes[int(name[1:])] = [round(x, 1), round(height - y, 1)]
    paths = [[] for _ in edges]
    index = {}
    for k, e in enumerate(edges):
        index.setdefault(tuple(e), []).append(k)
    by_gvid = {o["_gvid"]: o["name"] for o in doc.get("objects", ()) if "_gvid" in o}
    for e in doc.get("edges", ()):
        key = (int(by_gvid[e["tail"]][1:]), int(by_gvid[e["head"]][1:]))
        slots = index.get(key)
        if slots and "pos" in e:
            paths[slots.pop(0)] = [v for x, y in _spline(e["pos"]) for v in (round(x), round(height - y))]
    return {"w": round(bb[2]), "h": round(height), "nodes": nodes, "edges": paths}


def _run_dot(source):
    exe = _dot_executable()
    if not exe:
        return None
    try:
        proc = subprocess.run([exe, "-Tjson"], input=source.encode("utf-8"), capture_output=True,
                              timeout=DOT_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout.decode("utf-8"))


def _run_pygraphviz(source):
    try:
        import pygraphviz
        if int(pygraphviz.__version__.split(".")[0]) < 2:
            return None
    except (ImportError, ValueError):
        return None
    from ..draw.render import _QuietStderr
    try:
        with _QuietStderr():
            graph = pygraphviz.AGraph(string=source)
            return json.loads(graph.draw(format="json", prog="dot").decode("utf-8"))
    except Exception:           # any failure of the bundled engine: the Python layout still works
        return None


def _order(n, preds):
    """A topological order of the nodes (Kahn's); where a cycle stops it (blocks of a collapsed
    graph can form one), the lowest-numbered waiting node goes next."""
    import heapq
    waiting = [len(set(p for p in preds[i] if p != i)) for i in range(n)]
    succs = [[] for _ in range(n)]
    for i in range(n):
        for p in set(preds[i]):
            if p != i:
                succs[p].append(i)
    ready = [i for i in range(n) if waiting[i] == 0]
    heapq.heapify(ready)
    done, out = [False] * n, []
    while len(out) < n:
        if not ready:
            heapq.heappush(ready, next(i for i in range(n) if not done[i]))
        i = heapq.heappop(ready)
        if done[i]:
            continue
        done[i] = True
        out.append(i)
        for s in succs[i]:
            waiting[s] -= 1
            if waiting[s] == 0 and not done[s]:
                heapq.heappush(ready, s)
    return out


def layered(sizes, edges):
    """A layout with no Graphviz: rank = longest path from a source (edges closing a cycle are
    left out); within a rank, nodes are ordered by the mean x of their predecessors and packed
    left to right; edges are drawn by the page (empty point lists)."""
    n = len(sizes)
    preds = [[] for _ in range(n)]
    for a, b in edges:
        if a != b:
            preds[b].append(a)
    rank = [-1] * n
    for i in _order(n, preds):
        rank[i] = 1 + max([rank[p] for p in preds[i] if rank[p] >= 0 and p != i] or [-1])
    rows = {}
    for i in range(n):
        rows.setdefault(rank[i], []).append(i)
    x = [0.0] * n
    y = [0.0] * n
    top, width = 0.0, 0.0
    for r in sorted(rows):
        members = sorted(rows[r], key=lambda i: (sum(x[p] for p in preds[i]) / len(preds[i])
                                                 if preds[i] else 0.0, i))
        row_h = max(sizes[i][1] for i in members)
        left = 0.0
        for i in members:
            x[i] = left + sizes[i][0] / 2
            left += sizes[i][0] + NODE_GAP
        want = sum(x[p] for i in members for p in preds[i]) / max(1, sum(len(preds[i]) for i in members))
        shift = max(0.0, want - (left - NODE_GAP) / 2) if r else 0.0
        for i in members:
            x[i] += shift
            y[i] = top + row_h / 2
        width = max(width, left - NODE_GAP + shift)
        top += row_h + RANK_GAP
    return {"w": round(width), "h": round(max(top - RANK_GAP, 0)),
            "nodes": [[round(x[i], 1), round(y[i], 1)] for i in range(n)],
            "edges": [[] for _ in edges], "engine": "layered"}


def layout(sizes, edges, engine=None):
    """Positions for nodes of ``sizes`` [(w, h)] joined by ``edges`` [(from, to)] (see module doc).
    ``engine``: None (the best available), "dot" or "layered"."""
    edges = [tuple(e) for e in edges]
    if not sizes:
        return {"w": 0, "h": 0, "nodes": [], "edges": [], "engine": "none"}
    if engine != "layered":
        source = _dot_source(sizes, edges)
        for name, run in (("dot", _run_dot), ("pygraphviz", _run_pygraphviz)):
            doc = run(source)
            if doc is not None and "bb" in doc:
                out = _from_dot_json(doc, len(sizes), edges)
                out["engine"] = name
                return out
    return layered(sizes, edges)
