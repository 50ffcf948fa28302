"""This machine's peak FP32 rate: an FMA loop in the widest vectors the JIT compiles for it.

Each thread runs ``K`` independent multiply-add chains, ``acc[j] = acc[j] * a + b`` (2 FLOPs per
element per step), compiled by numba (LLVM, ``fastmath``: fused multiply-adds) for the host CPU.
``K`` floats are held in vector registers (64 floats = 8 AVX2 registers, enough chains to cover
the FMA latency on two FMA ports without spilling); the loop is timed on 1 thread and on every
thread, several repeats, and the best rate of each is the peak (the machine is shared: the
slowest repeats measure the neighbours, not the core). The compiled loop's vector registers and
FMA instructions are read from its assembly and printed with the rate, so a figure says which
ISA it is for (LLVM may prefer 256-bit vectors on AVX-512 machines: the line then says ymm).

    python benchmarks/bench_peak.py [--steps 2000000] [--repeats 5] [--threads N] [--json OUT]

BENCHMARKS.md divides each net's forward FLOPs (``caffepy summary``) by its measured time and
reports the share of this peak.
"""
import argparse
import json
import os
import re
import time

import numpy as np

CHAINS = (64, 80)       # floats per thread: 8 or 10 AVX2 registers of independent chains


def _kernels(k):
    import numba
    from numba import njit, prange

    @njit(fastmath=True)
    def chains(steps, a, b):
        acc = np.empty(k, np.float32)
        for j in range(k):
            acc[j] = j * np.float32(1e-3)
        for _ in range(steps):
            for j in range(k):
                acc[j] = acc[j] * a + b
        return acc.sum()

    @njit(fastmath=True, parallel=True)
    def on_threads(steps, a, b, threads):
        out = np.empty(threads, np.float32)
        for i in prange(threads):
            out[i] = chains(steps, a, b)
        return out.sum()

    return chains, on_threads, numba


def _isa(chains):
    """(register class, FMA instructions) of the compiled loop, from its assembly."""
    asm = "\n".join(chains.inspect_asm().values())
    fmas = re.findall(r"\bvfmadd\w*\s+%?([xyz]mm)", asm)
    widest = max(fmas, key=lambda r: "xyz".index(r[0])) if fmas else "none"
    return widest, len(fmas)


def measure(steps=2_000_000, repeats=5, threads=None):
    """{"single": GFLOP/s, "all": GFLOP/s, "threads": n, "register": "ymm", ...}: the best of
    ``repeats`` timings for each chain count."""
    a, b = np.float32(0.999999), np.float32(1e-7)
    best = {"single": 0.0, "all": 0.0}
    info = {}
    for k in CHAINS:
        chains, on_threads, numba = _kernels(k)
        n = threads or numba.config.NUMBA_NUM_THREADS
        chains(10, a, b)
        on_threads(10, a, b, n)
        for _ in range(repeats):
            t = time.perf_counter()
            chains(steps, a, b)
            best["single"] = max(best["single"], 2.0 * k * steps / (time.perf_counter() - t) / 1e9)
            t = time.perf_counter()
            on_threads(steps, a, b, n)
            best["all"] = max(best["all"], 2.0 * k * steps * n / (time.perf_counter() - t) / 1e9)
        register, fmas = _isa(chains)
        info = {"threads": n, "register": register, "fma_instructions": fmas,
                "lanes": {"xmm": 4, "ymm": 8, "zmm": 16}.get(register, 1)}
    return dict(best, **info)


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=2_000_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", default=None, metavar="OUT")
    args = p.parse_args(argv)
    r = measure(args.steps, args.repeats, args.threads)
    r.update(cpu=_cpu_model(), cores=os.cpu_count(), date=time.strftime("%Y-%m-%d %H:%M UTC",
                                                                          time.gmtime()))
    print("%s, %d cores: FMA loop in %s (%d lanes FP32): 1 thread %.1f GFLOP/s, %d threads "
          "%.1f GFLOP/s (best of %d)" % (r["cpu"], r["cores"], r["register"], r["lanes"],
                                         r["single"], r["threads"], r["all"], args.repeats))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
