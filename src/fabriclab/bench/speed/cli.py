"""How fast the command line answers: each command timed as a whole process, beside its budget.

Every command runs as a user runs it (`python -m fabriclab ...`, a fresh interpreter each time, its
record added to a throw-away results store), once to warm the page cache and then `runs` times; the
median is compared with its start-up budget and with the peer measured beside it in the same
run: `python -c pass`, the start-up no Python command can beat on this machine. The CPU time (user +
system) is reported beside, with the load average: on a machine shared with other jobs the wall time
grows with the load, the CPU time much less.

Budgets (fabriclab's start-up goals, on this 2-core machine): `fabriclab --help` 0.5 s; the 2048-host ring
all-reduce on a fat tree with bisection 1/4 (Zhang, Li, Tanimura, Nakada's largest 2-level case)
1.0 s; one what-if point 0.6 s.

Try it: `fabriclab bench cli`.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class CliCase:
    """One command line and its budget."""

    name: str
    """Label in the table."""
    argv: tuple[str, ...]
    """Arguments after `python -m fabriclab` (empty for the peer, which runs `python -c pass`)."""
    budget_s: float | None
    """Most seconds the whole process may take (median); None for the peer."""


PEER = CliCase(name="python -c pass (peer)", argv=(), budget_s=None)
CASES = (
    CliCase(name="fabriclab --help", argv=("--help",), budget_s=0.5),
    CliCase(name="simulate: ring, 2048 hosts", budget_s=1.0,
            argv=("simulate", "collective", "--algo", "ring", "--topology", "fat-tree", "--hosts", "2048",
                  "--bisection", "1/4", "--link", "4GB/s", "--latency", "0.2us", "--size", "1GB")),
    CliCase(name="whatif: one point", budget_s=0.6,
            argv=("whatif", "--profile", "resnet50", "--workers", "16", "--bandwidth", "25Gbps")),
)


def time_process(argv: list[str], env: dict[str, str], timeout_s: float = 120.0) -> tuple[float, float]:
    """(seconds from start to exit, CPU seconds user + system) of one process; a failure is a
    RuntimeError with its stderr. The CPU time shows what the command costs on a busy machine too."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout_s)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run(cases: tuple[CliCase, ...] = CASES, runs: int = 5) -> list[dict]:
    """One row per case (the peer first): median, min and max seconds, budget, ratio to the peer."""
    if runs < 1:
        raise ValueError(f"runs {runs}: give at least 1")
    rows = []
    with tempfile.TemporaryDirectory(prefix="fabriclab-bench-cli-") as tmp:
        env = dict(os.environ, FABRICLAB_STORE=os.path.join(tmp, "results.db"), COLUMNS="100")
        for case in (PEER, *cases):
            argv = [sys.executable, "-c", "pass"] if not case.argv else [sys.executable, "-m", "fabriclab",
                                                                        *case.argv]
            time_process(argv, env)  # warm the page cache
            measured = [time_process(argv, env) for _ in range(runs)]
            times = [wall for wall, _ in measured]
            rows.append({"command": case.name, "argv": " ".join(argv[1:]), "runs": runs,
                         "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
                         "cpu_s": statistics.median(cpu for _, cpu in measured), "budget_s": case.budget_s,
                         "loadavg_1min": os.getloadavg()[0]})
    peer = rows[0]["median_s"]
    for row in rows:
        row["vs_peer"] = row["median_s"] / peer
        row["within_budget"] = None if row["budget_s"] is None else row["median_s"] <= row["budget_s"]
    return rows
