#!/usr/bin/env python3
"""The census tables (census split only) and the coverage tiers (each split apart).

    python3 tools/census/tables.py            # rewrite the generated parts of docs/census.md
                                              # and the coverage curve in docs/zoo_coverage.md
    python3 tools/census/tables.py --print    # print it instead

What is counted is read from each census file's text (the cached copy, /work/census-data/files)
and from the measurement (results.json of tools/census/measure.py); a type, field or module counts
once per repository that has it in any of its census files. A file that a census repository holds
but that was kept under an earlier repository (duplicates.tsv) counts for both, as long as the copy
kept is itself a census file.

Held-out repositories (census_lib.is_heldout) are never read here: ``census_rows`` drops them
and ``check_census`` refuses any row of one, so no table can list their types, fields or errors.
Only ``tiers`` sees held-out records, and it reports counts and percentages only.
"""
import argparse
import collections
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import census_lib as L  # noqa: E402

sys.path.insert(0, L.ROOT)        # this tree's caffepy, not another one installed

DOC = os.path.join(L.ROOT, "docs", "census.md")
BEGIN, END = "<!-- census tables: begin -->", "<!-- census tables: end -->"
CURVE_DOC = os.path.join(L.ROOT, "docs", "zoo_coverage.md")
CURVE_BEGIN, CURVE_END = "<!-- census curve: begin -->", "<!-- census curve: end -->"
SCHEMA = os.path.join(os.path.dirname(L.ROOT), "shared", "caffe-schema", "caffe-schema.json")
TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|#[^\n]*|[{}:\[\],<>]|[-+\w.]+|\S')
IDENT = re.compile(r"^[A-Za-z_][\w.]*$")


class HeldOutError(Exception):
    pass

# ---------------------------------------------------------------------------- reading text


def events(text):
    """('msg', path, name) for each ``name {`` and ('val', path, name, value) for each scalar;
    path: the tuple of enclosing field names."""
    toks = [t for t in TOKEN.findall(text) if not t.startswith("#")]
    stack, out, i, n = [], [], 0, len(toks)
    while i < n:
        t = toks[i]
        if t in ("}", ">"):
            if stack:
                stack.pop()
            i += 1
            continue
        if IDENT.match(t) and i + 1 < n:
            nxt = toks[i + 1]
            if nxt == ":" and i + 2 < n and toks[i + 2] in ("{", "<"):
                nxt, i = "{", i + 1
            if nxt in ("{", "<"):
                out.append(("msg", tuple(stack), t))
                stack.append(t)
                i += 2
                continue
            if nxt == ":" and i + 2 < n:
                v = toks[i + 2]
                if v == "[":
                    j = i + 3
                    while j < n and toks[j] != "]":
                        if toks[j] != ",":
                            out.append(("val", tuple(stack), t, toks[j].strip("\"'")))
                        j += 1
                    i = j + 1
                    continue
                out.append(("val", tuple(stack), t, v.strip("\"'")))
                i += 3
                continue
        i += 1
    return out


def layer_types(evs):
    """[(type as written, form)]: form 'current' (layer {type: "X"}), 'V1' (layers {type: X}),
    'V0' (layers {layer {type: "x"}})."""
    out = []
    for e in evs:
        if e[0] == "val" and e[2] == "type":
            if e[1] == ("layer",):
                out.append((e[3], "current"))
            elif e[1] == ("layers",):
                out.append((e[3], "V1"))
            elif e[1] == ("layers", "layer"):
                out.append((e[3], "V0"))
    return out


def python_modules(evs):
    """'module.layer' of each python_param."""
    mods = []
    # one python_param per layer: pair module and layer in order of appearance
    pending = {}
    for e in evs:
        if e[0] == "msg" and e[2] == "python_param":
            if pending:
                mods.append("%s.%s" % (pending.get("module", "?"), pending.get("layer", "?")))
            pending = {"_": 1}
        elif e[0] == "val" and e[1] and e[1][-1] == "python_param" and e[2] in ("module", "layer"):
            pending[e[2]] = e[3]
    if pending:
        mods.append("%s.%s" % (pending.get("module", "?"), pending.get("layer", "?")))
    return mods


def input_forms(evs, types):
    out = set()
    for e in evs:
        if e[1] == () and e[2] in ("input", "input_shape", "input_dim"):
            out.add(e[2])
    names = {t for t, _ in types}
    if names & {"Input", "INPUT"}:
        out.add("Input layer")
    if any(t.lower().endswith("data") or t.endswith("_DATA") or t in ("images", "data")
           for t in names):
        out.add("data layer")
    return out

# ---------------------------------------------------------------------------- schema


class Schema(object):
    """BVLC's messages and enums (../shared/caffe-schema/caffe-schema.json)."""

    def __init__(self, path=SCHEMA):
        with open(path) as f:
            d = json.load(f)
        self.fields, self.enums = {}, {}
        for e in d.get("enums", []):
            self.enums[e["name"]] = set(e["values"])
        for m in d["messages"]:
            self.fields[m["name"]] = {f["name"]: f for f in m["fields"]}
            for e in m.get("enums", []):
                self.enums.setdefault(e["name"], set()).update(e["values"])
                self.enums[m["name"] + "." + e["name"]] = set(e["values"])

    def unknown(self, evs):
        """'Message.field' and 'Message.field = VALUE' BVLC's schema does not have."""
        out = set()
        for e in evs:
            msg = "NetParameter"
            for name in e[1]:
                f = self.fields.get(msg, {}).get(name)
                if f is None or f["type"] != "message":
                    msg = None
                    break
                msg = f["type_name"].split(".")[-1]
            if msg is None:
                continue                       # inside an unknown field: its top counts
            f = self.fields.get(msg, {}).get(e[2])
            if f is None:
                out.add("%s.%s" % (msg, e[2]))
            elif e[0] == "val" and f["type"] == "enum" and IDENT.match(e[3]) and \
                    e[3] not in ("true", "false"):
                tn = f["type_name"]
                values = self.enums.get(msg + "." + tn.split(".")[-1]) or \
                    self.enums.get(tn.split(".")[-1], set())
                if e[3] not in values:
                    out.add("%s.%s = %s" % (msg, e[2], e[3]))
        return out

# ---------------------------------------------------------------------------- implemented?


def caffepy_name(t, form):
    """The current type name caffepy would build for a type as written (None: no mapping)."""
    from caffepy.proto import caffe_pb2
    from caffepy.proto.upgrade import V1_TYPES
    from caffepy.proto.upgrade_v0 import V0_TYPES
    V1 = caffe_pb2.V1LayerParameter
    if form == "V0":
        if t == "padding":              # folded into the conv / pool it feeds by the V0 upgrade
            return "Convolution"
        v1 = V0_TYPES.get(t)
        return V1_TYPES.get(v1) if v1 is not None else None
    if form == "V1":
        if t in V1.LayerType.keys():
            return V1_TYPES.get(V1.LayerType.Value(t)) or t
        return None
    return t


def implemented(t, form):
    import caffepy
    from caffepy.layers.base import has_layer_type
    if os.path.dirname(os.path.dirname(os.path.abspath(caffepy.__file__))) != L.ROOT:
        raise RuntimeError("caffepy imported from %s, not this tree" % caffepy.__file__)
    name = caffepy_name(t, form)
    return bool(name) and has_layer_type(name)

# ---------------------------------------------------------------------------- rows


def census_rows():
    """(file rows, repo -> [file rows]) of the census split: kept files plus duplicates of kept
    census files, each row {repo, path, sha256}. Held-out repositories are left out."""
    kept = [r for r in L.read_table(L.MANIFEST, L.MANIFEST_COLUMNS)
            if r["split"] == "census" and not L.is_heldout(r["repo"])]
    census_sha = {r["sha256"] for r in kept}
    dups = [r for r in L.read_table(L.DUPLICATES, L.DUPLICATE_COLUMNS)
            if r["sha256"] in census_sha and not L.is_heldout(r["repo"])]
    rows = [{"repo": r["repo"], "path": r["path"], "sha256": r["sha256"], "kept": True}
            for r in kept] + [{"repo": r["repo"], "path": r["path"], "sha256": r["sha256"],
                               "kept": False} for r in dups]
    check_census(rows)
    return rows


def check_census(rows):
    bad = sorted({r["repo"] for r in rows if L.is_heldout(r["repo"])})
    if bad:
        raise HeldOutError("refusing to tabulate held-out repositories (%d)" % len(bad))


def analyse(rows, schema, cache=L.CACHE):
    """Per-file facts of census rows: types, unknown fields, python modules, input forms."""
    check_census(rows)
    facts = {}
    for r in rows:
        if r["sha256"] in facts:
            continue
        with open(L.cache_path(r["sha256"], cache), "rb") as f:
            text = f.read().decode("utf-8", "replace")
        evs = events(text)
        types = layer_types(evs)
        facts[r["sha256"]] = {"types": sorted(set(types)), "unknown": sorted(schema.unknown(evs)),
                              "python": sorted(set(python_modules(evs))),
                              "inputs": sorted(input_forms(evs, types))}
    return facts


def by_repos(rows, facts, key):
    """{item: (set of repos, number of files, first (repo, path))} over census rows."""
    repos, files, first = collections.defaultdict(set), collections.Counter(), {}
    for r in rows:
        for item in facts[r["sha256"]][key]:
            repos[item].add(r["repo"])
            files[item] += 1
            first.setdefault(item, (r["repo"], r["path"]))
    return {k: (repos[k], files[k], first[k]) for k in repos}

# ---------------------------------------------------------------------------- tiers


def tiers(results_path=None, tree=None):
    """Per split: measured files and the count of each tier (percentages only: no per-file
    detail, which keeps held-out files unseen)."""
    import measure
    tree = tree or measure.caffepy_tree()
    results = measure.load_results(results_path or measure.RESULTS)
    manifest = L.read_table(L.MANIFEST, L.MANIFEST_COLUMNS)
    return measure.summary(results, tree), collections.Counter(r["split"] for r in manifest)


def pct(a, b):
    return "%d / %d (%.1f%%)" % (a, b, 100.0 * a / b) if b else "0 / 0"

# ---------------------------------------------------------------------------- the document


def render(top=40):
    rows = census_rows()
    schema = Schema()
    facts = analyse(rows, schema)
    repos_all = {r["repo"] for r in rows}
    out = []
    summ, in_manifest = tiers()
    out += ["### Coverage tiers", "",
            "caffepy tree measured: `%s`. Percentages are of the files measured so far; the "
            "measurement walks the manifest in sampling order, so a partial measurement is the "
            "files of a random prefix of the walk." % summ["caffepy_tree"], "",
            "| split | files in manifest | measured | read | lenient | complete | deploy files "
            "with inputs | runnable (of those) |", "|---|---|---|---|---|---|---|---|"]
    for split in ("census", "heldout"):
        s = summ["splits"][split]
        out.append("| %s | %d | %d (%d repos) | %s | %s | %s | %d | %s |" % (
            split, in_manifest[split], s["files"], s["repositories"],
            pct(s["read"], s["files"]), pct(s["lenient"], s["files"]),
            pct(s["complete"], s["files"]), s["deploy_with_inputs"],
            pct(s["runnable"], s["deploy_with_inputs"])))
    cats = summ["splits"]["census"].get("failure_categories", {})
    out += ["", "Census split, the first tier each measured file fails and its category:", "",
            "| tier failed : category | files |", "|---|---|"]
    out += ["| %s | %d |" % (k, v) for k, v in sorted(cats.items(), key=lambda kv: -kv[1])]
    types = by_repos(rows, facts, "types")
    out += ["", "### Layer types by repositories (census split)", "",
            "%d census repositories with net files, %d census file rows (%d kept, %d duplicates "
            "of kept census files). `form`: current (`layer { type: \"X\" }`), V1 "
            "(`layers { type: X }`), V0 (`layers { layer { type: \"x\" } }`); `caffepy`: "
            "whether caffepy's registry builds it (V1 / V0 names through caffepy's upgrade "
            "tables)." % (len(repos_all), len(rows), sum(r["kept"] for r in rows),
                          sum(not r["kept"] for r in rows)), "",
            "| type | form | repos | files | caffepy |", "|---|---|---|---|---|"]
    ranked = sorted(types.items(), key=lambda kv: (-len(kv[1][0]), -kv[1][1], kv[0]))
    for (t, form), (rs, nf, _) in ranked:
        out.append("| `%s` | %s | %d | %d | %s |" % (t, form, len(rs), nf,
                                                     "yes" if implemented(t, form) else "**no**"))
    n_impl = sum(implemented(t, f) for (t, f) in types)
    out += ["", "%d distinct type names (as written), %d of them built by caffepy." % (
        len(types), n_impl)]
    out += ["", "### Unimplemented layer types used by 2 or more census repositories", "",
            "| rank | type | form | repos | files | example (repository: path) |",
            "|---|---|---|---|---|---|"]
    k = 0
    for (t, form), (rs, nf, (repo, path)) in ranked:
        if len(rs) >= 2 and not implemented(t, form):
            k += 1
            out.append("| %d | `%s` | %s | %d | %d | %s: `%s` |" % (k, t, form, len(rs), nf,
                                                                   repo, path))
    if not k:
        out.append("| - | none | | | | |")
    unknown = by_repos(rows, facts, "unknown")
    out += ["", "### Fields and enum values not in BVLC's schema, by repositories (census split)",
            "", "From ../shared/caffe-schema/caffe-schema.json (BVLC at 9b891540). Inside an "
            "unknown field only the field itself counts. First %d:" % top, "",
            "| field or value | repos | files | example |", "|---|---|---|---|"]
    for item, (rs, nf, (repo, path)) in sorted(unknown.items(),
                                               key=lambda kv: (-len(kv[1][0]), kv[0]))[:top]:
        out.append("| `%s` | %d | %d | %s: `%s` |" % (item, len(rs), nf, repo, path))
    out += ["", "%d distinct fields / values not in BVLC's schema." % len(unknown)]
    py = by_repos(rows, facts, "python")
    out += ["", "### Python layers (python_param module.layer) by repositories (census split)",
            "", "| module.layer | repos | files |", "|---|---|---|"]
    for item, (rs, nf, _) in sorted(py.items(), key=lambda kv: (-len(kv[1][0]), kv[0]))[:top]:
        out.append("| `%s` | %d | %d |" % (item, len(rs), nf))
    out += ["", "%d distinct modules in %d repositories." % (
        len(py), len(set().union(*[v[0] for v in py.values()])) if py else 0)]
    forms = by_repos(rows, facts, "inputs")
    none_files = sum(1 for r in rows if not facts[r["sha256"]]["inputs"])
    out += ["", "### Input declarations (census split)", "",
            "| declaration | repos | files |", "|---|---|---|"]
    for item, (rs, nf, _) in sorted(forms.items(), key=lambda kv: -len(kv[1][0])):
        out.append("| %s | %d | %d |" % (item, len(rs), nf))
    out.append("| none of these | | %d |" % none_files)
    return "\n".join(out) + "\n"


def render_curve():
    """The coverage curve (tools/census/curve.py) at the measured tree, census split."""
    import curve
    import measure
    rows = census_rows()
    facts = analyse(rows, Schema())
    tree = measure.caffepy_tree()
    records = {sha: r for (sha, t), r in measure.load_results(measure.RESULTS).items()
               if t == tree and r["split"] == "census"}
    return ("caffepy tree measured: `%s`.\n\n" % tree) + curve.render(rows, facts, records) + "\n"


def _replace(path, begin, end, text):
    with open(path) as f:
        doc = f.read()
    a, b = doc.index(begin) + len(begin), doc.index(end)
    with open(path, "w") as f:
        f.write(doc[:a] + "\n" + text + doc[b:])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--print", action="store_true")
    args = p.parse_args(argv)
    text, curve_text = render(), render_curve()
    if args.print:
        print(text)
        print(curve_text)
        return 0
    _replace(DOC, BEGIN, END, text)
    _replace(CURVE_DOC, CURVE_BEGIN, CURVE_END, curve_text)
    print("wrote the tables into %s and the curve into %s" % (DOC, CURVE_DOC))
    return 0


if __name__ == "__main__":
    sys.exit(main())
