"""Resume onto another cluster shape: N x K workers and S server shards -> N' x K' and S'.

A checkpoint's manifest (format 3) records the shape that wrote it (worker groups, workers per
group, server groups and shards per group, consistency) and each batch layer's *total* batch
(worker groups x the per-group batch). ``--resume`` on another shape:

- **batch**: each batch layer's per-group batch becomes ``total / N'`` (then cut K' ways as
  always), so the total batch stays what it was; a total that does not split is one error.
- **servers**: params are rebuilt whole from the server files by name and offset and cut for the
  new servers (:func:`caffepy.dist.checkpoint.full_params`); sharded tables are re-sharded the same
  way; each slice's version continues from the checkpoint's; SSP clocks start at the step.
- **data**: worker w of W reads items w, w + W, ... of one global order (the data layers'
  ``solver_rank`` / ``solver_count``), so a step of total batch T consumes global items
  [t T, (t + 1) T) whatever the shape. After step k every item before k T has been read and none
  after: each new worker is positioned at k T (Data, HDF5Data: the saved state with the largest
  ``offset``, which is k T; MemoryData: its rows of the global order), so no item is skipped or
  repeated within the epoch. Other layers' states cannot be re-mapped (one WARNING each: worker w
  takes worker w mod W's state).
- **random generators**: a worker's generator and its data layers' transform generators are
  re-derived from (``random_seed``, step, worker[, layer]), deterministically.

What is exact: under BSP a step's update is the mean over the same T items whatever the shape;
only the order of the floating-point sums differs (workers' sums in the stub, group means at the
server), so a run that changes shape ends within rounding of the run that did not (bit-identical
when each worker's share of a step is the same). Random draws (dropout, random crops and mirrors)
are not the ones the unchanged run would have made. ASYNC and SSP are not deterministic runs to
begin with: a resumed run converges like one that was not interrupted.
"""
import zlib

import numpy as np

from ..errors import CaffeError
from ..log import info, warning
from .topology import _BATCH_FIELDS, consistency_name


def batch_layers(net_param):
    """[(layer name, batch)] of the layers of ``net_param`` whose batch sub_batch_net_param cuts."""
    out = []
    for lp in net_param.layer:
        for field in _BATCH_FIELDS:
            if lp.HasField(field):
                out.append((lp.name, int(getattr(lp, field).batch_size)))
        for kind, shapes in (("Input", lp.input_param.shape),
                             ("DummyData", lp.dummy_data_param.shape)):
            if lp.type == kind and len(shapes) and len(shapes[0].dim):
                out.append((lp.name, int(shapes[0].dim[0])))
    return out


def set_group_batch(net_param, batches):
    """Give the batch layers of ``net_param`` (in order) the per-group batches ``batches``."""
    it = iter(batches)
    for lp in net_param.layer:
        for field in _BATCH_FIELDS:
            if lp.HasField(field):
                getattr(lp, field).batch_size = next(it)
        for kind, shapes in (("Input", lp.input_param.shape),
                             ("DummyData", lp.dummy_data_param.shape)):
            if lp.type == kind and len(shapes) and len(shapes[0].dim):
                b = next(it)
                for shape in shapes:
                    if len(shape.dim):
                        shape.dim[0] = b
    return net_param


class Shape(object):
    """A cluster's shape and each batch layer's total batch (``batches``: [(name, total)])."""

    def __init__(self, G, K, SG, P, consistency, batches, recorded=True):
        self.G, self.K, self.SG, self.P = int(G), int(K), int(SG), int(P)
        self.consistency, self.batches, self.recorded = consistency, list(batches), recorded

    @property
    def W(self):
        return self.G * self.K

    @classmethod
    def of(cls, cluster, net_param):
        G = cluster.nworker_groups
        return cls(G, cluster.nworkers_per_group, cluster.nserver_groups, cluster.nservers_per_group,
                   consistency_name(cluster), [(n, G * b) for n, b in batch_layers(net_param)])

    @classmethod
    def of_manifest(cls, m, now):
        """The shape of a manifest; before format 3 only the worker and server counts were
        recorded: the rest is taken from ``now`` (the running shape) where it fits: the same
        worker groups (so the same total batch) and server groups when the counts divide."""
        if m.nworker_groups > 0:
            return cls(m.nworker_groups, m.nworkers_per_group, m.nserver_groups,
                       m.nservers_per_group, m.consistency or now.consistency,
                       list(zip(m.batch_layer, m.total_batch)))
        W, S = m.nworkers or now.W, m.nservers or now.SG * now.P
        G = now.G if W % now.G == 0 else W
        K, SG = W // G, now.SG if S % now.SG == 0 else 1
        per_group = [(n, t // now.G) for n, t in now.batches]
        return cls(G, K, SG, S // SG, now.consistency, [(n, G * b) for n, b in per_group],
                   recorded=False)

    def record(self, m):
        """Write this shape into a DistManifest."""
        m.nworker_groups, m.nworkers_per_group = self.G, self.K
        m.nserver_groups, m.nservers_per_group = self.SG, self.P
        m.consistency = self.consistency
        for name, total in self.batches:
            m.batch_layer.append(name)
            m.total_batch.append(total)

    def same(self, other):
        return (self.G, self.K, self.SG, self.P) == (other.G, other.K, other.SG, other.P)

    def describe(self):
        def n(x, word):
            return "%d %s%s" % (x, word, "" if x == 1 else "s")
        text = "%s x %s, " % (n(self.G, "group"), n(self.K, "worker"))
        if self.SG > 1:
            text += "%s x " % n(self.SG, "server group")
        return text + n(self.P, "server shard")


def plan_batches(old, now, where):
    """Per-group batches for the running shape ``now`` that keep ``old``'s totals, or None (the
    net's batch layers differ from the recorded ones: batches as the net says)."""
    if [n for n, _ in old.batches] != [n for n, _ in now.batches]:
        if old.batches:
            warning("elastic.py", "%s: the checkpoint's batch layers (%s) are not the net's (%s): "
                    "the net's batches are kept" % (where, ", ".join(n for n, _ in old.batches),
                                                     ", ".join(n for n, _ in now.batches)))
        return None
    out = []
    for name, total in old.batches:
        if total % now.G or (total // now.G) % now.K:
            raise CaffeError("%s: layer '%s': the total batch %d does not split into %d groups x %d "
                             "workers" % (where, name, total, now.G, now.K))
        out.append(total // now.G)
    return out


def change_line(old, now, tables=False):
    """The one line that says what a resume onto another shape changed."""
    parts = ["Resume: shape changed: %s -> %s" % (old.describe(), now.describe())]
    if old.batches and now.batches:
        total = old.batches[0][1]
        parts.append(" (per-worker batch %d -> %d, total %d kept)"
                     % (total // old.W, total // now.W, total))
    if old.consistency != now.consistency:
        parts.append(", %s -> %s" % (old.consistency, now.consistency))
    done = []
    if (old.SG, old.P) != (now.SG, now.P):
        done.append("shards re-sliced")
        if tables:
            done.append("tables re-sharded")
    if old.W != now.W:
        done.append("data positions re-mapped")
    if not old.recorded:
        done.append("the checkpoint's shape inferred (format < 3 records worker and server "
                    "counts only)")
    return "".join(parts) + ("; " + ", ".join(done) if done else "")


def derived_state(state, seed, step, worker, salt=0):
    """A fresh bit-generator state of the kind ``state`` is, derived from (seed, step, worker,
    salt): the same numbers for the same resume."""
    cls = getattr(np.random, state.get("bit_generator", "PCG64"), np.random.PCG64)
    return cls(np.random.SeedSequence([max(int(seed), 0), int(step), int(worker), salt])).state


def _is_generator_state(v):
    return isinstance(v, dict) and "bit_generator" in v


class Remap(object):
    """The worker states of a checkpoint written by ``old_w`` workers, handed to ``new_w``."""

    def __init__(self, states, old_w, new_w, step, seed):
        from ..data import state as data_state
        self.old_w, self.new_w, self.step, self.seed = old_w, new_w, step, seed
        self.by_layer = {}       # layer -> [(old worker, state dict)]
        for w in sorted(states):
            for st in states[w].layer_state:
                self.by_layer.setdefault(st.layer, []).append((w, data_state.decode(st)))
        self.warned = set()

    def restore(self, net, w, source):
        """Position worker ``w``'s data layers and re-derive its generators."""
        from .. import common
        from ..data import state as data_state
        names = net._layer_names
        for name, saved in self.by_layer.items():
            if name not in names:
                raise CaffeError("%s: saved data state for layer '%s', which the net has no longer"
                                 % (source, name))
            layer = net.layers[names.index(name)]
            if getattr(layer, "set_data_state", None) is None:
                raise CaffeError("%s: layer '%s' cannot take back its saved data state"
                                 % (source, name))
            layer.set_data_state(self._layer_state(layer, name, saved, w, source))
        gen = np.random.default_rng(np.random.SeedSequence([max(int(self.seed), 0), self.step, w]))
        data_state.set_rng(common.rng(), gen.bit_generator.state)

    def _layer_state(self, layer, name, saved, w, source):
        salt = zlib.crc32(name.encode("utf-8"))
        first = dict(saved[0][1])
        if "offset" in first:       # Data / HDF5Data: one global cursor, w reads w, w + W, ...
            state = dict(max(saved, key=lambda s: int(s[1]["offset"]))[1])
            if _is_generator_state(state.get("transform")):
                state["transform"] = derived_state(state["transform"], self.seed, self.step, w, salt)
            return state
        if set(first) == {"pos"} and hasattr(layer, "n"):      # MemoryData: rows w, w + W, ...
            pos = {int(s["pos"]) for _, s in saved}
            if len(pos) != 1:
                raise CaffeError("%s: layer '%s': the workers' saved positions differ (%s)"
                                 % (source, name, ", ".join(map(str, sorted(pos)))))
            g = self.old_w * pos.pop()          # the next row of the global order
            if g % self.new_w:
                raise CaffeError("%s: layer '%s': global row %d does not split among %d workers"
                                 % (source, name, g, self.new_w))
            new = (g // self.new_w) % max(1, int(layer.n))
            if new + int(layer.batch_size) > int(layer.n):
                raise CaffeError("%s: layer '%s': row %d + batch %d runs past the worker's %d rows"
                                 % (source, name, new, layer.batch_size, layer.n))
            return {"pos": new}
        if name not in self.warned:
            self.warned.add(name)
            warning("elastic.py", "%s: layer '%s' (%s): its data state cannot be re-mapped from %d "
                    "workers to %d: worker w takes worker w mod %d's" % (
                        source, name, layer.type, self.old_w, self.new_w, self.old_w))
        own = dict(saved)
        state = dict(own.get(w % self.old_w, saved[0][1]))
        for key, v in state.items():
            if _is_generator_state(v):
                state[key] = derived_state(v, self.seed, self.step, w, salt)
        return state


def log_batch(old):
    """The shape is the checkpoint's but the net's batch is not: the checkpoint's total wins."""
    info("trainer.py", "Resume: the net's batch differs from the checkpoint's; the per-group batch "
         "is set to keep its total (%s)" % ", ".join("%s %d" % b for b in old.batches))


def log_change(old, now, tables):
    info("trainer.py", change_line(old, now, tables))
    if old.G != now.G and now.consistency != "BSP" and old.batches:
        total = old.batches[0][1]

        def n(g):
            return "%d update%s of batch %d" % (g, "" if g == 1 else "s", total // g)
        warning("elastic.py", "%s applies each group's gradient as its own update: worker groups "
                "%d -> %d changes a step from %s -> %s (the run goes on, not as the unchanged one "
                "would)" % (now.consistency, old.G, now.G, n(old.G), n(now.G)))
