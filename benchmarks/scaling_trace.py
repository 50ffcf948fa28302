"""bench_scaling.py --trace: the per-step timeline of the distributed roles' messages.

:func:`install_trace` wraps the roles' methods in a rank (worker pushes, the server's gradient
handling and answers, the stub's answers, the MPI engine's hand-over of complete messages) and
records (time, event, who, param, step or version); :func:`timeline` turns the ranks' records into
per-worker medians over the timed steps, in ms from the worker's backward start.
"""
import statistics
import time


def _timed_push(events, push, counts_cpu):
    """A worker's ``push(p, c)`` that records when it started ("push") and, where
    ``counts_cpu(self, p)``, the thread CPU it took ("pushcpu")."""
    def timed(self, p, c):
        t, cpu = time.time(), time.thread_time()
        try:
            return push(self, p, c)
        finally:
            events.append((t, "push", self.ep.id, p, c))
            if counts_cpu(self, p):
                events.append((time.thread_time() - cpu, "pushcpu", self.ep.id, p, c))
    return timed


def install_trace():
    """--trace: record when each gradient is pushed, reaches the server, is answered, and when the
    answer reaches the stub (times from time.time(), comparable across the box's hosts), by
    wrapping the roles' methods; a list of (time, event, who, param, step or version)."""
    from caffepy.dist.server import Server
    from caffepy.dist.stub import Stub
    from caffepy.dist.worker import Worker
    events = []
    push, on_grad, answer, on_param = Worker.push, Server._on_grad, Server._answer, Stub._on_param

    def s_grad(self, h, bufs):
        events.append((time.time(), "sgrad", self.topo.group_of_stub(h.src), h.param, h.step))
        return on_grad(self, h, bufs)

    def s_answer(self, s, groups):
        events.append((time.time(), "answer", -1, s.p, s.version))
        return answer(self, s, groups)

    def st_param(self, h, bufs):
        events.append((time.time(), "sparam", self.g, h.param, h.version))
        return on_param(self, h, bufs)
    Worker.push, Server._on_grad, Server._answer, Stub._on_param = (
        _timed_push(events, push, lambda self, p: True), s_grad, s_answer, st_param)
    from caffepy.dist import routing, sfb, transport as T
    from caffepy.dist.mpi import MpiEngine
    r_push, hand = routing.RoutedMixin.push, MpiEngine._hand_over

    def e_hand(self, inc):      # messages complete at the receiving rank
        t, topo = time.time(), self.topology
        for h, _ in inc.messages:
            if h.kind == T.GRAD and topo.is_stub(h.src):
                events.append((t, "arrGRAD", topo.group_of_stub(h.src), h.param, h.step))
            elif h.kind == T.PARAM and topo.is_stub(h.dst):
                events.append((t, "arrPARAM", topo.group_of_stub(h.dst), h.param, h.version))
            elif h.kind == sfb.SFB_FACTORS:
                events.append((t, "arrSFB", h.dst, h.param, h.step))
        return hand(self, inc)
    routing.RoutedMixin.push = _timed_push(events, r_push,
                                           lambda self, p: p in getattr(self, "sfb_of", ()))
    MpiEngine._hand_over = e_hand
    return events


def timeline(events, a):
    """--trace: per worker w, medians over the timed steps c of when things happened, in ms from
    the start of w's backward of step c: its backward's end (bwd1), each param's push, the
    arrival of group w's gradient at the server's rank (arrGRAD) and its handling by the server
    (sgrad), the server's answer (version c+1), the answer's arrival at w's rank (arrPARAM) and
    its handling by stub w (sparam), the peer's SFB factors' arrival at w's rank (arrSFB), and
    the start of w's forward of step c+1 (fwd)."""
    at = {}
    for t, kind, who, p, n in events:
        at.setdefault((kind, who, p, n), t)
    params = sorted({p for _, kind, _, p, _ in events if kind == "push"})
    lines = []
    for w in (0, 1):
        rows = {}
        for c in range(a.warmup, a.warmup + a.steps):
            b0 = at.get(("bwd0", w, -1, c))
            if b0 is None:
                continue
            def rel(key):
                t = at.get(key)
                if t is not None:
                    rows.setdefault(key[0] + (" p%d" % key[2] if key[2] != -1 else ""),
                                    []).append(1e3 * (t - b0))
            rel(("bwd1", w, -1, c))
            rel(("fwd", w, -1, c + 1))
            for p in params:
                rel(("push", w, p, c))
                rel(("sgrad", w, p, c))
                rel(("answer", -1, p, c + 1))
                rel(("sparam", w, p, c + 1))
                rel(("arrGRAD", w, p, c))
                rel(("arrPARAM", w, p, c + 1))
                rel(("arrSFB", w, p, c))
        pushcpu = {}
        for t, kind, who, p, n in events:
            if kind == "pushcpu" and who == w and a.warmup <= n < a.warmup + a.steps:
                pushcpu[n] = pushcpu.get(n, 0.0) + 1e3 * t
        lines.append("worker %d: CPU of its pushes %.2f ms/step (median)" % (
            w, statistics.median(pushcpu.values()) if pushcpu else 0.0))
        lines.append("worker %d (ms from its backward's start): " % w + "; ".join(
            "%s %.1f" % (k, statistics.median(v)) for k, v in sorted(rows.items(), key=lambda kv: statistics.median(kv[1]))))
    return lines
