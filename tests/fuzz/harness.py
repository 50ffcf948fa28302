"""Run one reader on one input in a forked child, with a time limit and a memory cap, and check the
outcome contract: success, or a one-line :class:`caffepy.errors.CaffeError` naming the file (or
the peer rank). Anything else -- another exception type, a crash, a hang, an allocation past the
cap -- is an escape.

Inputs are made by mutators that draw their choices from a :class:`Source`: hypothesis' ``data``
object in the tests (so failures shrink) or a ``random.Random`` in ``tools/fuzz.py``.
"""
import os
import pickle
import random
import resource
import select
import signal
import struct
import traceback

from caffepy.errors import CaffeError

TIME_LIMIT = float(os.environ.get("CAFFEPY_FUZZ_TIME_LIMIT", "10"))      # seconds per case
MEMORY_CAP = int(os.environ.get("CAFFEPY_FUZZ_MEMORY_MB", "384")) << 20  # bytes over the baseline


def examples(default=100):
    """Examples per reader: ``CAFFEPY_FUZZ_EXAMPLES`` or ``default``."""
    return int(os.environ.get("CAFFEPY_FUZZ_EXAMPLES", default))


class Outcome(object):
    def __init__(self, kind, etype="", message="", detail=""):
        self.kind, self.etype, self.message, self.detail = kind, etype, message, detail

    def __repr__(self):
        return "Outcome(%s, %s: %s)%s" % (self.kind, self.etype, self.message,
                                          "\n" + self.detail if self.detail else "")


def _vm_size():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError):
        return 0


def _child(fn, args, w):
    signal.signal(signal.SIGALRM, signal.SIG_DFL)      # a hang dies by SIGALRM: no handler to catch
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT)
    limit = _vm_size() + MEMORY_CAP
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        fn(*args)
        result = ("ok", "", "", "")
    except CaffeError as e:
        result = ("error", type(e).__name__, str(e), "")
    except BaseException as e:    # noqa: B902 -- every other type is what this harness looks for
        result = ("escape", type(e).__name__, str(e)[:2000], traceback.format_exc()[-4000:])
    signal.setitimer(signal.ITIMER_REAL, 0)
    data = pickle.dumps(result)
    os.write(w, struct.pack("<I", len(data)))
    view = memoryview(data)
    while view:
        view = view[os.write(w, view[:65536]):]
    os._exit(0)


def run_case(fn, *args):
    """Run ``fn(*args)`` in a forked child; the :class:`Outcome`."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            _child(fn, args, w)
        finally:
            os._exit(3)
    os.close(w)
    chunks = []
    with os.fdopen(r, "rb") as f:
        ready, _, _ = select.select([f], [], [], TIME_LIMIT + 30)
        if ready:
            chunks.append(f.read())
        else:
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    raw = b"".join(chunks)
    if len(raw) >= 4:
        return Outcome(*pickle.loads(raw[4:]))
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig in (signal.SIGALRM, signal.SIGKILL):
            return Outcome("hang", "timeout", "no result after %.0f s" % TIME_LIMIT)
        return Outcome("crash", signal.Signals(sig).name, "killed by a signal")
    return Outcome("crash", "exit", "exit status %d without a result" % os.WEXITSTATUS(status))


def problem(outcome, name):
    """Why ``outcome`` breaks the contract (a string), or None. ``name``: what the message must name
    (the file's path, or ``rank N``)."""
    if outcome.kind == "ok":
        return None
    if outcome.kind != "error":
        return "%s %s: %s%s" % (outcome.kind, outcome.etype, outcome.message,
                                "\n" + outcome.detail if outcome.detail else "")
    msg = outcome.message
    if "\n" in msg.strip():
        return "error message is not one line: %r" % msg
    if name and name not in msg:
        return "error message does not name %s: %r" % (name, msg)
    return None


def check(fn, name, *args):
    """Run and assert the contract (for the tests)."""
    out = run_case(fn, *args)
    why = problem(out, name)
    assert why is None, why
    return out


# -- where mutators draw their choices --------------------------------------------------------------
class Source(object):
    """Choices from a ``random.Random`` (``tools/fuzz.py``); :class:`HypothesisSource` for tests."""

    def __init__(self, rng=None):
        self.rng = rng or random.Random()

    def int(self, lo, hi):
        return self.rng.randint(lo, hi)

    def choice(self, seq):
        return seq[self.int(0, len(seq) - 1)]

    def bytes(self, n):
        return bytes(self.rng.getrandbits(8) for _ in range(n))

    def bool(self):
        return self.int(0, 1) == 1


class HypothesisSource(Source):
    def __init__(self, data):
        self.data = data

    def int(self, lo, hi):
        from hypothesis import strategies as st
        return self.data.draw(st.integers(lo, hi))

    def bytes(self, n):
        from hypothesis import strategies as st
        return self.data.draw(st.binary(min_size=n, max_size=n))


# -- byte-level mutation ------------------------------------------------------------------------------
INTERESTING_BYTES = (0, 1, 0x7F, 0x80, 0xFF, 0x0A, 0x22, 0x7B, 0x7D)
INTERESTING_INTS = (0, 1, -1, 2, 7, 255, 256, 65535, 2 ** 31 - 1, -2 ** 31, 2 ** 32 - 1, 2 ** 32,
                    10 ** 9, 10 ** 12, 2 ** 40, 2 ** 62, 2 ** 63 - 1, -2 ** 63, 2 ** 64 - 1)


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def mutate_bytes(src, data):
    """1-4 byte-level edits of ``data``: flips, interesting bytes, truncation, insertion, deletion,
    duplication, a huge varint, random bytes."""
    data = bytearray(data)
    for _ in range(src.int(1, 4)):
        op = src.int(0, 8)
        n = len(data)
        pos = src.int(0, n) if n else 0
        if op == 0 and n:
            data[min(pos, n - 1)] ^= 1 << src.int(0, 7)
        elif op == 1 and n:
            data[min(pos, n - 1)] = src.choice(INTERESTING_BYTES)
        elif op == 2:
            del data[pos:]
        elif op == 3:
            data[pos:pos] = src.bytes(src.int(1, 16))
        elif op == 4 and n:
            del data[pos:pos + src.int(1, 64)]
        elif op == 5 and n:
            end = min(n, pos + src.int(1, 256))
            data[pos:pos] = data[pos:end] * src.int(1, 4)
        elif op == 6:
            data[pos:pos + src.int(0, 10)] = varint(src.choice(INTERESTING_INTS))
        elif op == 7 and n:
            lo = min(pos, n - 1)
            data[lo:lo + 8] = struct.pack("<q", src.choice(INTERESTING_INTS[:-1]))
        else:
            data[pos:pos + src.int(0, 4)] = src.bytes(src.int(0, 4))
    return bytes(data)


def random_bytes(src):
    return src.bytes(src.int(0, 96))
