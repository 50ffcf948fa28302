"""How ``auto`` picks inference mode's engine (caffepy.infer.engine): the exact path's values that
every candidate is checked against, the timing, and the cache of the choices.

**The check.** :class:`Reference` runs the exact path (every layer's forward) once on random
inputs (``caffepy.onnx.export.random_inputs``), records what the source layers (data layers,
no bottoms) wrote, and keeps every output and kept blob; :meth:`Reference.errors` runs a
candidate's forward on the same inputs, the source layers' batches replayed, and returns each
blob's relative error (max |a - b| / max |b|). Afterwards the inputs hold their values again and
the data layers' cursors are put back.

**The timing** (:func:`median_time`): ``WARMUP`` (3) untimed passes, then up to ``RUNS`` (7)
timed ones; the warm-up stops once it has taken ``BUDGET`` (2) seconds (after its first pass),
and no timed pass starts once the timed ones have taken ``BUDGET`` seconds (at least one is
timed). A runtime so costs at most ``WARMUP + RUNS`` passes, or about twice ``BUDGET`` plus two
passes, per round. caffepy's steps try each of their thread settings in their first passes
(caffepy.infer.threads; a setting that oversubscribes a busy machine can take several times the
best one), so their warm-up is at least ``EXPLORING`` (5) passes whatever the budget, and the
timed passes see the setting they settle on. The median is the candidate's time in a round.

**Two rounds** (:func:`decide`). The candidates are timed one after the other, so a burst of load
from another process during one candidate's passes would make it look slower than it is (a
GoogLeNet whose openvino engine takes 21.5 ms timed 43 ms and lost to caffepy's 35 ms), and the
choice is cached. So after the first round every candidate that passed and took at most
``CONTEND`` (2) times the fastest one's time is timed again, in the reverse order, and its time is
the lesser of its two medians: load that lasts less than a round cannot decide the choice.

**The cache.** A choice is stored under a key (:func:`key`): the SHA-256 of the net's
parameters as text, its input shapes and kept blobs, the machine (CPU model, the ISA flags that
change which kernels run, the thread limit), the versions of caffepy, onnxruntime and openvino,
and caffepy's switches that change its steps' speed (``CAFFEPY_THREADS``, ``CAFFEPY_NUMBA``).
The file is ``$XDG_CACHE_HOME/caffepy/infer_engines.json`` (``~/.cache`` without it; the
environment variable ``CAFFEPY_ENGINE_CACHE`` names another file), JSON, replaced atomically.
A file that does not parse or is not this format is ignored after one WARNING, and is written
anew with the next choice; from an entry only an engine name of the known list is used (the
times beside it are shown, never trusted).
"""
import contextlib
import hashlib
import json
import logging
import os
import platform
import statistics
import tempfile
import time


FORMAT = "caffepy-infer-engines/1"
FILE_ENV = "CAFFEPY_ENGINE_CACHE"
WARMUP = 3
RUNS = 7
EXPLORING = 5       # caffepy's steps' least warm-up: a first pass, one per thread setting
BUDGET = 2.0        # seconds of warm-up, and again of timed passes, per candidate and round
CONTEND = 2.0       # a candidate within this factor of the fastest is timed in the second round
ISA = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
       "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "asimd",
       "asimddp", "sve", "bf16", "i8mm")

_log = logging.getLogger(__name__)
_warned = set()


# -- the check ---------------------------------------------------------------------------------
class Reference(object):
    """The exact path's outputs and kept blobs on one random batch (see module doc)."""

    def __init__(self, net, keep=(), seed=0):
        from ..onnx.export import random_inputs
        self.net = net
        self.watch = list(dict.fromkeys(list(net.outputs) + sorted(keep)))
        self.inputs = {n: net.blobs[n] for n in net.inputs}
        self.sources = [i for i, bottom in enumerate(net.bottom_vecs) if not bottom]
        self.feeds = random_inputs(net, seed)
        self.replay = {}
        with self.fed():
            for i, layer in enumerate(net.layers):
                layer.forward(net.bottom_vecs[i], net.top_vecs[i])
                if i in self.sources:
                    self.replay[i] = [t.data.copy() for t in net.top_vecs[i]]
            self.want = {b: net.blobs[b].data.copy() for b in self.watch}

    @contextlib.contextmanager
    def fed(self):
        """Inside: the inputs hold the random batch; after: their own values again and the
        data layers' cursors where they were."""
        net = self.net
        saved = {n: b.data.copy() for n, b in self.inputs.items()}
        states = {i: net.layers[i].get_data_state() for i in self.sources
                  if hasattr(net.layers[i], "get_data_state")}
        try:
            for name, value in self.feeds.items():
                self.inputs[name].reshape(value.shape)
                self.inputs[name].data[...] = value
            yield
        finally:
            for i, state in states.items():
                if state is not None:
                    net.layers[i].set_data_state(state)
            for name, value in saved.items():
                self.inputs[name].reshape(value.shape)
                self.inputs[name].data[...] = value

    def errors(self, forward):
        """{watched blob: relative error} of ``forward(replay)`` against the exact path."""
        from ..onnx.check import relative_error
        with self.fed():
            forward(self.replay)
            return {b: relative_error(self.net.blobs[b].data, self.want[b]) for b in self.watch}


def worst(errors, rtol):
    """Why ``errors`` fail the check (the worst blob; NaN counts as worst), or None when every
    one is within rtol."""
    bad = {b: e for b, e in errors.items() if not e <= rtol}
    if not bad:
        return None
    b = max(bad, key=lambda n: float("inf") if bad[n] != bad[n] else bad[n])
    return ("blob '%s' differs from the exact path by %.3g relative (> %g) on random inputs"
            % (b, errors[b], rtol))


# -- the timing --------------------------------------------------------------------------------
def median_time(forward, warmup=WARMUP, runs=RUNS, budget=BUDGET, least=1,
                clock=time.perf_counter):
    """Seconds of one ``forward()``: the median of the timed passes (see module doc); the first
    ``least`` warm-up passes run whatever the budget."""
    start = clock()
    for k in range(max(warmup, least)):
        if k >= least and clock() - start > budget:
            break
        forward()
    start, took = clock(), []
    while len(took) < runs and (not took or clock() - start <= budget):
        t = clock()
        forward()
        took.append(clock() - t)
    return statistics.median(took)


def decide(k, measures, use_cache=True):
    """(engine, {name: ms, None for a failed check}, cached) for cache key ``k``.
    ``measures``: {name: function returning the candidate's seconds, or None when it failed its
    check}, each called once per round. A choice stored under ``k`` naming one of them is
    returned without measuring any; otherwise each is measured in two rounds (module doc), the
    fastest that passed wins and is stored (engine None when none passed: nothing is stored)."""
    if use_cache:
        hit = lookup(k, tuple(measures))
        if hit is not None:
            return hit[0], hit[1], True
    seconds = {n: m() for n, m in measures.items()}
    for n in contenders(seconds)[::-1]:
        again = measures[n]()
        seconds[n] = None if again is None else min(seconds[n], again)
    best = pick(seconds)
    ms = {n: as_ms(t) for n, t in seconds.items()}
    if best is not None:
        store(k, best, ms)
    return best, ms, False


def contenders(seconds):
    """The names (in ``seconds``' order) timed again in the second round: those that passed and
    took at most ``CONTEND`` times the fastest; none when that is the fastest alone."""
    ok = {n: t for n, t in seconds.items() if t is not None}
    if not ok:
        return []
    best = min(ok.values())
    close = [n for n in ok if ok[n] <= CONTEND * best]
    return close if len(close) > 1 else []


def pick(times):
    """The fastest of {name: seconds, or None when the candidate failed its check}: an engine
    that failed is never picked. None when none passed."""
    ok = {n: t for n, t in times.items() if t is not None}
    return min(ok, key=ok.get) if ok else None


# -- the key -----------------------------------------------------------------------------------
def _cpu():
    """(CPU model, sorted ISA flags of ``ISA`` it has)."""
    model, flags = None, set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                k = k.strip().lower()
                if k == "model name" and model is None:
                    model = v.strip()
                elif k in ("flags", "features") and not flags:
                    flags = set(v.split())
    except OSError:
        pass
    return model or platform.processor() or platform.machine(), sorted(flags.intersection(ISA))


def versions():
    """{package: version} of what decides the engines' speed (None where not installed), from
    the installed distributions' metadata (nothing imported)."""
    from importlib import metadata
    from .. import __version__
    out = {"caffepy": __version__}
    for name in ("onnxruntime", "openvino"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def key(net, keep, nthreads, versions_=None, threads=None):
    """The cache key of planning ``net`` (its current input shapes) with ``keep`` here;
    ``threads``: caffepy's per-pass thread choice ("auto" / "fixed", else ``CAFFEPY_THREADS``).
    ``CAFFEPY_NUMBA`` (caffepy's kernels on or off) counts too."""
    from google.protobuf import text_format
    model, flags = _cpu()
    what = {
        "net": hashlib.sha256(text_format.MessageToString(net.net_param).encode()).hexdigest(),
        "inputs": [[n, list(net.blobs[n].shape)] for n in net.inputs],
        "keep": sorted(keep),
        "cpu": model, "isa": flags, "threads": int(nthreads),
        "versions": versions() if versions_ is None else versions_,
        "switches": [threads or os.environ.get("CAFFEPY_THREADS", "auto"),
                     os.environ.get("CAFFEPY_NUMBA", "1")],
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


# -- the cache file ----------------------------------------------------------------------------
def path():
    """The cache file (see module doc)."""
    own = os.environ.get(FILE_ENV)
    if own:
        return own
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "caffepy", "infer_engines.json")


def _load(file):
    """The entries of ``file`` ({} when absent; {} after one WARNING when it is not ours)."""
    try:
        with open(file, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        return _foreign(file, "%s: %s" % (type(e).__name__, e))
    if not isinstance(data, dict) or data.get("format") != FORMAT \
            or not isinstance(data.get("entries"), dict):
        return _foreign(file, "not a %s file" % FORMAT)
    return data["entries"]


def _foreign(file, why):
    if file not in _warned:
        _warned.add(file)
        _log.warning("inference engine cache %s ignored (%s); it is written anew",
                     file, " ".join(why.split())[:200])
    return {}


def lookup(k, known):
    """(engine name, {name: ms}) stored under key ``k``, or None; only a name in ``known``
    counts, and only numbers are kept of the times."""
    entry = _load(path()).get(k)
    if not isinstance(entry, dict) or entry.get("engine") not in known:
        return None
    ms = entry.get("ms")
    ms = {n: v for n, v in ms.items() if n in known and (v is None or isinstance(v, (int, float)))
          and not isinstance(v, bool)} if isinstance(ms, dict) else {}
    return entry["engine"], ms


def store(k, engine, ms):
    """Write the choice under ``k`` (the other entries kept), atomically; a cache that cannot be
    written is skipped with one WARNING."""
    file = path()
    entries = _load(file)
    entries[k] = {"engine": engine, "ms": {n: (None if v is None else round(float(v), 4))
                                           for n, v in ms.items()}}
    text = json.dumps({"format": FORMAT, "entries": entries}, indent=1, sort_keys=True)
    try:
        folder = os.path.dirname(os.path.abspath(file))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".infer_engines.", dir=folder)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, file)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as e:
        if file not in _warned:
            _warned.add(file)
            _log.warning("inference engine cache %s not written: %s", file, e)


def as_ms(seconds):
    return None if seconds is None else round(seconds * 1e3, 4)
