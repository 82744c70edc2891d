"""How fast a cluster prediction is at 100,000 GPUs, and how it grows: fabriclab's scale targets.

A prediction (`fabriclab simulate collective --cluster dgx-h100 --gpus 100000 --sizes 1KB:1GB`) runs the
flow simulator for every channel count NCCL uses in the sweep and for every rate its ranges move
(`nccl/links.py`, in classes). Each measurement runs in a fresh process, so its peak memory (ru_maxrss,
the interpreter's ~40 MB included) is its own and imports are not timed:

* `sweep`: the whole prediction of one collective (sizes 1KB:1GB, ranges included), engine `auto`;
* `links`: the flow simulations one prediction needs at the cluster's own channels (ring and tree for
  all-reduce, point-to-point for all-to-all), engine `auto` or `general` (every transfer a task of
  `sim/engine.py`, the oracle).

`run_prediction` times the 100,000-GPU sweep and compares the two engines at the largest GPU count of a
ladder that the general engine finishes within its budget (a larger count is not tried once one fails),
with the ratio and whether the answers agree to 1e-9. `scale_rows` gives the growth table of docs/benchmarks.md.
Targets on this 2-core machine: a sweep at 100,000 GPUs in under 60 s and 4 GB, and the same at 1,000,000
GPUs spread over buildings (`dgx-h100-campus`, `fabric/buildings.py`), timed against 100,000 GPUs of one
building in the same run (time and memory should grow no faster than the GPUs: 10x).

Try it: `fabriclab bench sim --cases alltoall-100000`.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from dataclasses import dataclass

CLUSTER = "dgx-h100"
CAMPUS = "dgx-h100-campus"
SIZES = [1 << i for i in range(10, 31)]  # 1KB:1GB, powers of two, as nccl-tests -b 1K -e 1G -f 2
SCALE_GPUS = (1024, 8192, 16384, 65536, 100000)
SCALE_COLLECTIVES = ("allreduce", "alltoall")
TARGET_S, TARGET_MB = 60.0, 4096.0


@dataclass(frozen=True, kw_only=True)
class PredictionCase:
    """One collective predicted at scale, and the GPU counts the general engine is tried at."""

    name: str
    """Label in the table, and its `--cases` name."""
    collective: str
    """What is predicted (`allreduce` simulates rings and trees, `alltoall` point-to-point)."""
    gpus: int
    """GPUs of `CLUSTER` (servers of 8 GPUs and 8 NICs, rail-optimised)."""
    general_gpus: tuple[int, ...]
    """GPU counts to try the general engine at, smallest first."""
    general_budget_s: float = 60.0
    """Seconds the general engine may take at one count."""
    cluster: str = CLUSTER
    """The cluster preset predicted on."""
    peer_gpus: int = 0
    """GPUs of the peer timed in the same run: the same sweep on `CLUSTER` (one building); 0: none."""


CASES = (
    PredictionCase(name="allreduce-100000", collective="allreduce", gpus=100000,
                   general_gpus=(16384, 32768, 65536, 100000)),
    PredictionCase(name="alltoall-100000", collective="alltoall", gpus=100000, general_gpus=(256, 512, 1024)),
    # a million GPUs over buildings of 65,536 (`fabric/buildings.py`), against 100,000 in one building
    PredictionCase(name="allreduce-1000000", collective="allreduce", gpus=1000000, general_gpus=(),
                   cluster=CAMPUS, peer_gpus=100000),
    PredictionCase(name="alltoall-1000000", collective="alltoall", gpus=1000000, general_gpus=(),
                   cluster=CAMPUS, peer_gpus=100000),
)


def _algorithms(collective: str) -> list[tuple[str, str]]:
    return [("ring", collective), ("tree", collective)] if collective == "allreduce" else [("p2p", collective)]


def measure(what: str, collective: str, gpus: int, engine: str, cluster_name: str = CLUSTER) -> dict:
    """The child's side: one sweep or one prediction's link simulations, timed, with the peak memory."""
    from fabriclab.fabric.presets import cluster_preset
    from fabriclab.nccl.links import link_seconds_per_byte
    from fabriclab.nccl.sweep import predict_sweep

    cluster = cluster_preset(cluster_name)
    t0 = time.perf_counter()
    if what == "sweep":
        rows = predict_sweep(cluster, gpus, SIZES, collective).rows
        values = [rows[-1]["time_us"]]
    else:
        values = [link_seconds_per_byte(cluster, gpus, a, c, engine=engine) for a, c in _algorithms(collective)]
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "peak_MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "values": values}


def timed(what: str, collective: str, gpus: int, engine: str = "auto", timeout_s: float = 900.0,
          cluster: str = CLUSTER) -> dict | None:
    """`measure` in a fresh process; None when it ran past `timeout_s` or was refused (too many transfers)."""
    argv = [sys.executable, "-m", "fabriclab.bench.speed.predict", what, collective, str(gpus), engine, cluster]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        if "the general engine takes at most" in out.stderr:
            return None
        raise RuntimeError(f"prediction speed case {what} {collective} {gpus} failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_prediction(case: PredictionCase) -> dict:
    """One row: the sweep at `case.gpus`, and both engines at the largest count the general one finishes."""
    sweep = timed("sweep", case.collective, case.gpus, cluster=case.cluster)
    links = timed("links", case.collective, case.gpus, cluster=case.cluster)
    peer = timed("sweep", case.collective, case.peer_gpus) if case.peer_gpus else None
    row = {"case": case.name, "collective": case.collective, "cluster": case.cluster, "gpus": case.gpus,
           "sweep_wall_s": sweep["wall_s"], "peak_MB": sweep["peak_MB"], "links_wall_s": links["wall_s"],
           "meets_target": sweep["wall_s"] < TARGET_S and sweep["peak_MB"] < TARGET_MB,
           "peer": None if peer is None else f"{case.peer_gpus:,} GPUs of {CLUSTER}",
           "peer_wall_s": None if peer is None else peer["wall_s"],
           "peer_peak_MB": None if peer is None else peer["peak_MB"],
           "vs_peer": None if peer is None else sweep["wall_s"] / peer["wall_s"],
           "general_gpus": None, "general_wall_s": None, "general_peak_MB": None, "ours_wall_s": None,
           "ours_peak_MB": None, "speedup_vs_general": None, "general_agrees": None}
    for gpus in case.general_gpus:
        general = timed("links", case.collective, gpus, "general", timeout_s=case.general_budget_s)
        if general is None:
            break
        ours = timed("links", case.collective, gpus)
        row.update(general_gpus=gpus, general_wall_s=general["wall_s"], general_peak_MB=general["peak_MB"],
                   ours_wall_s=ours["wall_s"], ours_peak_MB=ours["peak_MB"],
                   speedup_vs_general=general["wall_s"] / ours["wall_s"],
                   general_agrees=all(abs(a - b) <= 1e-9 * abs(a) for a, b in zip(general["values"], ours["values"])))
    return row


def scale_rows(gpus: tuple[int, ...] = SCALE_GPUS, collectives: tuple[str, ...] = SCALE_COLLECTIVES) -> list[dict]:
    """Wall time and peak memory of a whole prediction (sweep) at every GPU count, per collective."""
    rows = []
    for n in gpus:
        row: dict = {"gpus": n}
        for collective in collectives:
            m = timed("sweep", collective, n)
            row[f"{collective}_wall_s"], row[f"{collective}_peak_MB"] = m["wall_s"], m["peak_MB"]
        rows.append(row)
    return rows


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], *sys.argv[5:6])))
