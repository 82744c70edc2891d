"""How fast the simulator is, on the cases fabriclab sets speed targets for.

Each case is timed with our default engine (`auto`) and, where the general event-driven engine can
finish in reasonable time, with that engine too in the same run, so the ratio is measured rather than
quoted. SimGrid 3.32 (the simulator of Zhang, Li, Tanimura, Nakada) was timed on this machine by the
project for the 2048-host cases; those figures are quoted beside ours and marked as quoted. Cluster
predictions at 100,000 GPUs and their growth are `predict.py`'s.

Try it: `fabriclab bench sim`.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from fractions import Fraction

from fabriclab.fabric.scenario import TopologySpec, build_topology
from fabriclab.sim.collective import simulate

# SimGrid 3.32 timed on this project's 2-core machine, quoted: ring 89-114 s, PS ~190 s and ~1 GB.
SIMGRID_QUOTED_S = {"ring-2048": "89-114 s", "ps-2048": "~190 s, ~1 GB"}


@dataclass(frozen=True, kw_only=True)
class SpeedCase:
    """One timed simulation."""

    name: str
    """Label in the table."""
    algo: str
    """Algorithm spec."""
    hosts: int
    """Hosts of the 2-level fat tree (16 per leaf, bisection 1/4, 4 GB/s, 0.2 us)."""
    target_s: float
    """fabriclab's own speed target for this engine."""
    compare_general: bool = False
    """Also time the general engine in the same run."""


CASES = (
    SpeedCase(name="ring-256", algo="ring", hosts=256, target_s=1.0, compare_general=True),
    SpeedCase(name="butterfly-512", algo="butterfly", hosts=512, target_s=1.0, compare_general=True),
    SpeedCase(name="ring-2048", algo="ring", hosts=2048, target_s=1.0),
    SpeedCase(name="ps-2048", algo="ps", hosts=2048, target_s=5.0),
    SpeedCase(name="butterfly-2048", algo="butterfly", hosts=2048, target_s=5.0),
    # Its rounds come as two runs that reach a steady state early (`sim/levels.py`): it grows with the hosts.
    SpeedCase(name="ring-16384", algo="ring", hosts=16384, target_s=5.0),
    SpeedCase(name="butterfly-16384", algo="butterfly", hosts=16384, target_s=60.0),
)


def _timed(name: str, engine: str) -> dict:
    """Run one case in a fresh process, so its peak memory is its own and imports are not timed."""
    out = subprocess.run([sys.executable, "-m", "fabriclab.bench.speed.sim", name, engine],
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"simulator speed case {name} failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _case(name: str) -> SpeedCase:
    for case in CASES:
        if case.name == name:
            return case
    raise ValueError(f"unknown case {name!r}: use {', '.join(c.name for c in CASES)}")


def measure(name: str, engine: str) -> dict:
    """The child's side: build the topology, then time only the simulation."""
    case = _case(name)
    topo = build_topology(TopologySpec(kind="fat-tree", hosts=case.hosts, hosts_per_leaf=16,
                                       bisection=Fraction(1, 4), bandwidth_Bps=4e9, latency_s=0.2e-6))
    t0 = time.perf_counter()
    result = simulate("allreduce", case.algo, topo, case.hosts, 2**30, engine=engine)
    wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
    return {"wall_s": wall, "simulated_s": result.time_s, "peak_MB": peak_mb, "exact": result.exact,
            "engine": result.engine}


def run_case(case: SpeedCase) -> dict:
    ours = _timed(case.name, "auto")
    row = {"case": case.name, "algo": case.algo, "hosts": case.hosts, "simulated_s": ours["simulated_s"],
           "wall_s": ours["wall_s"], "peak_MB": ours["peak_MB"], "exact": ours["exact"],
           "engine": ours["engine"], "target_s": case.target_s, "meets_target": ours["wall_s"] < case.target_s,
           "general_wall_s": None, "speedup_vs_general": None,
           "simgrid_quoted": SIMGRID_QUOTED_S.get(case.name)}
    if case.compare_general:
        general = _timed(case.name, "general")
        row["general_wall_s"] = general["wall_s"]
        row["speedup_vs_general"] = general["wall_s"] / ours["wall_s"]
        row["general_agrees"] = abs(general["simulated_s"] - ours["simulated_s"]) <= 1e-9 * general["simulated_s"]
    return row


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1], sys.argv[2])))
