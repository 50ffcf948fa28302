"""Hypervisor steal during a benchmark's child process (``/proc/stat``'s steal column).

On a shared VM a vCPU that another guest holds runs nothing: a step timed across such a window
takes up to twice its time, whatever the framework. :func:`run_measured` runs a command and
returns its output with the share of the machine's CPU time stolen while it ran
(stolen jiffies / (USER_HZ x seconds x CPUs)); benchmarks print it beside each round and can
repeat rounds past a limit (bench_cpu.py ``--max-steal``). Where ``/proc/stat`` has no steal
column (not Linux, or no paravirtual clock) the share is None.
"""
import os
import subprocess
import time

USER_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def steal_jiffies():
    """The machine's stolen jiffies so far (all CPUs), or None."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    return int(fields[8]) if fields and fields[0] == "cpu" and len(fields) > 8 else None


def run_measured(cmd):
    """(stdout of ``cmd``, the share of CPU time stolen while it ran or None)."""
    before, t0 = steal_jiffies(), time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    after, wall = steal_jiffies(), time.time() - t0
    if before is None or after is None or wall <= 0:
        return out, None
    return out, (after - before) / float(USER_HZ * wall * (os.cpu_count() or 1))
