"""The census's coverage curve: what share of the census files caffepy would read, complete and
run if it implemented only the k layer types that the most census repositories use.

Types are ranked by the number of census repositories whose files use them (then by files, then
by name), as written (current, V1 and V0 spellings apart, like the tables of tables.py). For a
rank k, a census file *counts* at k when every type it uses is among the first k and it reached
the tier at the measured tree (``complete``: ``summary --strict`` built it with no ``?``;
``runnable``: a deploy file with inputs ran forward). So the curve at k = all types is the measured
tier, and its shape shows how much of that each further type buys. The *tail* begins at the first
rank whose type only one census repository uses: from there on each type is one repository's.

Census split only (held-out files are never read here: tables.census_rows refuses them).
"""
import collections

CHECKPOINTS = (10, 20, 30, 40, 50, 60, 80, 100, 150, 200, 300)


def ranked_types(rows, facts):
    """[(type, form)] in rank order, with {type: number of repositories}."""
    repos, files = collections.defaultdict(set), collections.Counter()
    for r in rows:
        for t in facts[r["sha256"]]["types"]:
            repos[tuple(t)].add(r["repo"])
            files[tuple(t)] += 1
    order = sorted(repos, key=lambda t: (-len(repos[t]), -files[t], t))
    return order, {t: len(repos[t]) for t in repos}


def curve(rows, facts, records, checkpoints=CHECKPOINTS):
    """Rows (k, files complete at k, deploy files runnable at k) for the checkpoints up to the
    number of types, and the last k (all types); plus (files measured, deploy files measured,
    the tail's first rank or None, {type: repos}). ``rows``: kept census file rows;
    ``records``: {sha256: measure record at the tree}. Repositories count every row (duplicates
    of kept census files included); files count the kept rows once each."""
    order, nrepos = ranked_types(rows, facts)
    rank = {t: i + 1 for i, t in enumerate(order)}
    need = {}                      # sha256 -> the rank the file needs (its rarest type's rank)
    for r in rows:
        types = [tuple(t) for t in facts[r["sha256"]]["types"]]
        need[r["sha256"]] = max([rank[t] for t in types] or [0])
    measured = [r for r in rows if r.get("kept", True) and r["sha256"] in records]
    deploy = [r for r in measured if records[r["sha256"]].get("deploy_with_inputs")]
    ks = [k for k in checkpoints if k < len(order)] + [len(order)]
    out = []
    for k in ks:
        complete = sum(1 for r in measured
                       if records[r["sha256"]]["complete"] and need[r["sha256"]] <= k)
        runnable = sum(1 for r in deploy
                       if records[r["sha256"]].get("runnable") and need[r["sha256"]] <= k)
        out.append((k, complete, runnable))
    tail = next((i + 1 for i, t in enumerate(order) if nrepos[t] < 2), None)
    return out, (len(measured), len(deploy), tail, nrepos)


def render(rows, facts, records):
    """The markdown of the curve (a table and two lines)."""
    points, (n, nd, tail, nrepos) = curve(rows, facts, records)
    lines = ["| types implemented (by repositories) | complete | runnable (deploy files with "
             "inputs) |", "|---|---|---|"]
    for k, c, rr in points:
        lines.append("| %d | %d / %d (%.1f%%) | %d / %d (%.1f%%) |" % (
            k, c, n, 100.0 * c / max(n, 1), rr, nd, 100.0 * rr / max(nd, 1)))
    multi = sum(1 for v in nrepos.values() if v >= 2)
    lines += ["", "%d type names in census files, %d of them in 2 or more repositories; the tail "
              "(types of a single repository) begins at rank %s." % (
                  len(nrepos), multi, tail if tail is not None else "-")]
    return "\n".join(lines)
