"""The operator's view of a distributed run: rank logs, the route table, progress lines, plots.

- **Rank logs**: under MPI, ``--log L`` writes ``L.rank<N>`` on rank N; only rank 0 prints the
  solver parameters (caffepy.log).
- **Route table** (rank 0, at start; :func:`route_lines`): one line per learnable param: its
  count, route (``dense``: sliced over the server shards; ``sfb``: sufficient-factor broadcast,
  stepped by every worker; ``table``: a sharded embedding table, rows over all shards), and each
  server shard holding it with its range and host. The same facts go to
  ``visualization/net.json`` as the optional ``cluster`` object (docs/netjson.md), which
  ``caffepy draw`` draws as worker groups and server shards. Where ranks sit on hosts (MPI, or
  ``dist.train(hosts=...)``), a line per worker group names its per-host sums: which stub sums
  which workers on which host (one push per host and slice to the servers).
- **Progress** (:class:`GroupProgress`): the first worker of each group logs, every ``display``
  steps, ``Iteration N (group g of G): loss = L, lr = R, S steps/s, ETA h:mm:ss``; with
  ``caffepy train --tensorboard DIR`` the same values as ``group<g>/loss``, ``group<g>/lr`` and
  ``group<g>/steps_per_s`` (caffepy.solvers.tensorboard).
- :func:`parse_group_log` reads those lines back (``caffepy plot`` draws one curve per group).
"""
import datetime
import glob
import os
import re
import time

from ..log import fmt, info
from ..solvers import lr_policies

_RE_GROUP = re.compile(r"Iteration (\d+) \(group (\d+) of (\d+)\): loss = (\S+), lr = (\S+), "
                       r"(\S+) steps/s")


def cluster_summary(topo, plan, names, counts, hosts, engine):
    """The cluster and every param's route, as net.json's ``cluster`` object."""
    def host(ep):
        # in process: all in this one, unless given a host per (emulated) rank
        r = topo.process_of(ep) if engine == "mpi" or topo.hosts else 0
        return {"rank": r, "host": hosts[r] if r < len(hosts) else hosts[0]}

    groups = [{"group": g, "workers": [dict(host(w), id=w) for w in topo.workers_of_group(g)],
               "server_group": topo.server_group_of(g),
               "stubs": [dict(host(st), stub=topo.describe(st), workers=topo.workers_of_stub(st))
                         for st in topo.stubs_of_group(g)]} for g in range(topo.G)]
    servers = []
    for sg in range(topo.SG):
        for j in range(topo.P):
            ep = topo.server(sg, j)
            servers.append(dict(host(ep), id=ep - topo.W - topo.G, server_group=sg, shard=j))
    sfb = set(plan.sfb) if plan else set()
    tables = set(plan.tables) if plan else set()
    routes = []
    for p, name in enumerate(names):
        if p in sfb:
            route, shards = "sfb", []
        elif p in tables:
            route = "table"
            shards = [{"shard": j, "rows": "%d::%d" % (j, topo.P)} for j in range(topo.P)]
        else:
            route = "dense"
            shards = [{"shard": j, "offset": off, "count": size} for off, size, j in topo.slices[p]]
        routes.append({"param": name, "count": int(counts[p]), "route": route, "shards": shards})
    return {"engine": engine, "consistency": topo.consistency, "worker_groups": groups,
            "workers_per_group": topo.K, "server_groups": topo.SG, "servers_per_group": topo.P,
            "servers": servers, "routes": routes, "hosts": bool(topo.hosts)}


def route_lines(summary):
    """The route table: a header and one line per param (shards of server group 0)."""
    where = {s["shard"]: "%s:%d" % (s["host"], s["rank"]) for s in summary["servers"]
             if s["server_group"] == 0}
    width = max([len(r["param"]) for r in summary["routes"]] + [5])
    out = ["Parameter routes (%d worker groups x %d, %d server groups x %d shards):"
           % (len(summary["worker_groups"]), summary["workers_per_group"],
              summary["server_groups"], summary["servers_per_group"]),
           "  %-*s %10s  %-5s  %s" % (width, "param", "count", "route", "server shards (host:rank)")]
    for r in summary["routes"]:
        if r["route"] == "sfb":
            shards = "none: every worker steps its replica from broadcast factors"
        elif r["route"] == "table":
            shards = ", ".join("%d rows %s @%s" % (s["shard"], s["rows"], where[s["shard"]])
                               for s in r["shards"])
        else:
            shards = ", ".join("%d [%d:%d) @%s" % (s["shard"], s["offset"], s["offset"] + s["count"],
                                                   where[s["shard"]]) for s in r["shards"])
        out.append("  %-*s %10d  %-5s  %s" % (width, r["param"], r["count"], r["route"], shards))
    if summary.get("hosts"):
        out.append("Per-host sums (each stub sums its host's workers of the group; one push per "
                   "host and slice to the servers):")
        for g in summary["worker_groups"]:
            out.append("  group %d: %s" % (g["group"], "; ".join(
                "%s @%s:%d sums workers %s" % (st["stub"], st["host"], st["rank"],
                                               ",".join(str(w) for w in st["workers"]))
                for st in g["stubs"])))
    return out


def display_lr(param, it):
    """The learning rate of iteration ``it`` without advancing anyone's lr-policy state."""
    state = lr_policies.LrState(sum(1 for v in param.stepvalue if it >= v))
    return lr_policies.learning_rate(param, it, state)


class GroupProgress(object):
    """Progress of one worker group, logged by its first worker every ``display`` steps (and
    written to ``board``, a :class:`caffepy.solvers.tensorboard.Board`, when one is set)."""

    def __init__(self, param, group, groups, start_step, board=None):
        self.param, self.group, self.groups = param, group, groups
        self.start, self.t0 = start_step, time.time()
        self.board = board

    def _values(self, c):
        done = c + 1 - self.start
        rate = done / max(time.time() - self.t0, 1e-9)
        return rate, display_lr(self.param, c)

    def line(self, c, loss, values=None):
        rate, lr = values or self._values(c)
        left = max(self.param.max_iter - c - 1, 0) / rate
        eta = str(datetime.timedelta(seconds=int(round(left))))
        return "Iteration %d (group %d of %d): loss = %s, lr = %s, %.3g steps/s, ETA %s" % (
            c, self.group, self.groups, fmt(loss), fmt(lr), rate, eta)

    def log(self, source, c, loss):
        """Log the line of step ``c`` and write ``group<g>/loss``, ``/lr``, ``/steps_per_s``."""
        values = self._values(c)
        info(source, self.line(c, loss, values))
        if self.board is not None:
            g = "group%d/" % self.group
            self.board.scalars({g + "loss": loss, g + "lr": values[1],
                                g + "steps_per_s": values[0]}, c)
            self.board.flush()


def log_files(path):
    """``path`` and, for ``L`` or ``L.rank<N>``, every ``L.rank*`` beside it."""
    base = re.sub(r"\.rank\d+$", "", path)
    ranks = sorted(glob.glob(glob.escape(base) + ".rank*"))
    files = ([path] if os.path.exists(path) and path not in ranks else []) + ranks
    return files


def parse_group_log(path):
    """``{group: [row]}`` from the group progress lines of a log (and its sibling rank logs);
    rows have NumIters, loss, LearningRate, StepsPerSecond."""
    out = {}
    for name in log_files(path):
        with open(name, errors="replace") as f:
            for line in f:
                m = _RE_GROUP.search(line)
                if not m:
                    continue
                out.setdefault(int(m.group(2)), []).append(
                    {"NumIters": int(m.group(1)), "loss": float(m.group(4)),
                     "LearningRate": float(m.group(5)), "StepsPerSecond": float(m.group(6))})
    for rows in out.values():
        rows.sort(key=lambda r: r["NumIters"])
    return out
