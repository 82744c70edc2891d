"""How fast the simulator is, on the cases fabriclab sets speed targets for, and beside SimGrid.

Each case is timed with our default engine (`auto`) and, where the general event-driven engine can
finish in reasonable time, with that engine too in the same run, so the ratio is measured rather than
quoted. With `--peer simgrid` each case also runs in SimGrid 3.32 (the simulator of Zhang, Li, Tanimura,
Nakada), as a whole process beside ours, alternating (`simgrid_peer.py`), and both simulated times must
agree to 1e-9. Cluster predictions at 100,000 GPUs and their growth are `predict.py`'s.

Try it: `fabriclab bench sim --peer simgrid --cases butterfly-2048`.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from dataclasses import dataclass
from fractions import Fraction

from fabriclab.fabric.scenario import TopologySpec, build_topology
from fabriclab.sim.collective import simulate

SIZE_BYTES = 2**30
AGREE_REL = 1e-9
# SimGrid must take this many times our wall time: as long at 2,048 hosts, 10x at 16,384.
PEER_GOALS = {2048: 1.0, 16384: 10.0}


@dataclass(frozen=True, kw_only=True)
class SpeedCase:
    """One timed simulation."""

    name: str
    """Label in the table."""
    algo: str
    """Algorithm spec."""
    hosts: int
    """Hosts of the fat tree (16 per leaf, bisection 1/4, 4 GB/s, 0.2 us)."""
    target_s: float
    """fabriclab's own speed target for this engine."""
    levels: int = 2
    """Fat-tree levels (3: pods of 16 leaves)."""
    peer_algo: str = ""
    """The same schedule in the SimGrid peer (`simgrid_peer.cpp`)."""
    compare_general: bool = False
    """Also time the general engine in the same run."""

    @property
    def topology(self) -> TopologySpec:
        return TopologySpec(kind="fat-tree", hosts=self.hosts, levels=self.levels, hosts_per_leaf=16,
                            bisection=Fraction(1, 4), bandwidth_Bps=4e9, latency_s=0.2e-6)


def _cases() -> tuple[SpeedCase, ...]:
    out = [SpeedCase(name="ring-256", algo="ring", hosts=256, target_s=1.0, peer_algo="ring", compare_general=True),
           SpeedCase(name="butterfly-512", algo="butterfly", hosts=512, target_s=1.0, peer_algo="butterfly-near",
                     compare_general=True)]
    for hosts in (2048, 16384):
        out += [SpeedCase(name=f"ring-{hosts}", algo="ring", hosts=hosts, target_s=1.0 if hosts < 4096 else 5.0,
                          peer_algo="ring")]
        if hosts == 2048:  # 256 servers; at 16,384 hosts its 67 M transfers are past this machine
            out += [SpeedCase(name="ps-2048", algo="ps", hosts=2048, target_s=5.0, peer_algo="ps:256")]
        out += [SpeedCase(name=f"butterfly-{hosts}", algo="butterfly", hosts=hosts, target_s=5.0,
                          peer_algo="butterfly-near"),
                SpeedCase(name=f"butterfly-far-{hosts}", algo="butterfly:order=far", hosts=hosts, target_s=5.0,
                          peer_algo="butterfly-far"),
                SpeedCase(name=f"rd-{hosts}", algo="recursive-doubling", hosts=hosts, target_s=5.0,
                          peer_algo="recursive-doubling"),
                SpeedCase(name=f"ring-3level-{hosts}", algo="ring", hosts=hosts, levels=3, target_s=5.0,
                          peer_algo="ring"),
                SpeedCase(name=f"butterfly-3level-{hosts}", algo="butterfly", hosts=hosts, levels=3, target_s=5.0,
                          peer_algo="butterfly-near")]
    return tuple(out)


CASES = _cases()
# `--peer simgrid` without --cases: the cases of the goals (2,048 and 16,384 hosts).
PEER_CASES = tuple(c.name for c in CASES if c.hosts in PEER_GOALS)


def _timed(name: str, engine: str) -> dict:
    """Run one case in a fresh process, so its peak memory is its own and imports are not timed."""
    import subprocess

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
    topo = build_topology(case.topology)
    t0 = time.perf_counter()
    result = simulate("allreduce", case.algo, topo, case.hosts, SIZE_BYTES, engine=engine)
    wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
    return {"wall_s": wall, "simulated_s": result.time_s, "peak_MB": peak_mb, "exact": result.exact,
            "engine": result.engine}


def run_case(case: SpeedCase) -> dict:
    ours = _timed(case.name, "auto")
    row = {"case": case.name, "algo": case.algo, "hosts": case.hosts, "simulated_s": ours["simulated_s"],
           "wall_s": ours["wall_s"], "peak_MB": ours["peak_MB"], "exact": ours["exact"],
           "engine": ours["engine"], "target_s": case.target_s, "meets_target": ours["wall_s"] < case.target_s,
           "general_wall_s": None, "speedup_vs_general": None}
    if case.compare_general:
        general = _timed(case.name, "general")
        row["general_wall_s"] = general["wall_s"]
        row["speedup_vs_general"] = general["wall_s"] / ours["wall_s"]
        row["general_agrees"] = abs(general["simulated_s"] - ours["simulated_s"]) <= 1e-9 * general["simulated_s"]
    return row


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1], sys.argv[2])))
