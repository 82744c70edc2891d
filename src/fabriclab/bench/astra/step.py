"""ASTRA-sim beside `whatif llm`: one LLM step in both tools, and each of the step's collectives in both.

fabriclab simulates the step (`whatif/llm/run.simulate_llm`), exports every rank's graph (`rank_graphs` of
`whatif/llm/export.py`), and ASTRA-sim runs those graphs with the compute replayed from their durations
(`run.py`): the two step times differ by how each tool times the communication and the pipeline. Each distinct collective of the step (its
communicator's first group, type, bytes per call) also runs alone in ASTRA-sim beside fabriclab's time per
call, so a gap in the step can be traced to the collectives.

Try it: `fabriclab bench astra-sim --model llama3-8b --gpus 16 --tp 2 --pp 2`.
"""

from __future__ import annotations

import time
from pathlib import Path

from fabriclab.bench.astra.run import CollectiveCase, collective_seconds, run_graphs_in_astra
from fabriclab.fabric.cluster import ClusterModel
from fabriclab.workload.graph import RankGraph

# The collectives ASTRA-sim simulates (it replays a broadcast from its duration: astra-sim Workload.cc).
RUNS = ("allreduce", "allgather", "reduce_scatter", "alltoall", "sendrecv")


def every_rank_graphs(answer) -> tuple[list[RankGraph], str]:
    """Every rank's graph of a simulated step, and which export gave them (`stage_graphs`, one rank per stage,
    where the export has no `rank_graphs`: `run.check_graphs` then names the ranks without a graph)."""
    from fabriclab.whatif.llm import export

    if hasattr(export, "rank_graphs"):
        return list(export.rank_graphs(answer)), "rank_graphs"
    return list(export.stage_graphs(answer)), "stage_graphs"


def collective_cases(answer, graphs: list[RankGraph]) -> list[tuple[dict, CollectiveCase | None]]:
    """Each collective of the step (`answer.result.comm`) with the case ASTRA-sim times: its communicator's
    group of the first rank that has one (the exported groups, else `whatif/llm/groups.communicator_groups`);
    None where ASTRA-sim has nothing to simulate (one rank, no bytes, a broadcast)."""
    from fabriclab.whatif.llm.groups import communicator_groups

    out = []
    for entry in answer.result.comm:
        name = entry["communicator"]
        group = next((g.communicators[name] for g in graphs if name in (g.communicators or {})), None)
        ranks = tuple(int(r) for r in (group if group is not None else communicator_groups(answer.par, name)[0]))
        if entry["collective"] == "sendrecv":
            ranks = ranks[:2]
        size = int(entry["size_bytes"])
        runs = entry["collective"] in RUNS and len(ranks) > 1 and size > 0
        out.append((entry, CollectiveCase(collective=entry["collective"], ranks=ranks, size_bytes=size) if runs
                    else None))
    return out


def compare_step(job, cluster: ClusterModel, binary: Path, *, options=None, efficiency: float | None = None,
                 timeout_s: float = 600.0, folder: Path | None = None, collectives: bool = True,
                 roofline: bool = False) -> dict:
    """The step of `job` (an `LlmJob`: spec and parallel configuration) on `cluster` in fabriclab and in
    ASTRA-sim, each collective in both, and both tools' wall times (see the module docstring); `roofline`:
    ASTRA-sim costs the compute itself (its roofline at the peak x fabriclab's efficiency and the GPU's
    memory bandwidth, from each node's FLOPs and bytes) instead of replaying fabriclab's durations."""
    from fabriclab.whatif.llm.run import simulate_llm

    if roofline and efficiency is None:  # ASTRA-sim's roofline has one rate: both tools get the same flat one
        from fabriclab.whatif.llm.run import ASSUMED_EFFICIENCY

        efficiency = ASSUMED_EFFICIENCY
    start = time.perf_counter()
    answer = simulate_llm(job.spec, job.par, cluster, efficiency=efficiency,
                          **({"options": options} if options is not None else {}))
    ours_wall = time.perf_counter() - start
    start = time.perf_counter()
    graphs, source = every_rank_graphs(answer)
    export_s = time.perf_counter() - start
    peak = answer.peak_flops * answer.efficiency.value if roofline else None
    run = run_graphs_in_astra(graphs, cluster, binary, timeout_s=timeout_s, folder=folder, peak_flops=peak)
    rows, case_wall = [], 0.0
    replays = _replays(answer)
    if collectives:
        pairs = collective_cases(answer, graphs)
        times, case_wall = collective_seconds([c for _, c in pairs if c is not None], cluster, job.par.num_gpus,
                                              binary, timeout_s=timeout_s)
        rows = [_row(entry, case, times.get(case)) for entry, case in pairs]
        theirs = {(r["communicator"], r["collective"], r["size_bytes"]): r["astra_s"] for r in rows
                  if r["astra_s"] is not None}
        from fabriclab.whatif.llm.replay import replay_step

        replays["their_collectives_step_s"] = replay_step(answer, one_collective_at_a_time=True, durations=theirs)
    step = answer.step_time_s
    serial = replays["one_collective_at_a_time_step_s"]
    return {"fabriclab": {"step_s": step, "wall_s": ours_wall, "export_wall_s": export_s, "graphs": source,
                          **replays,
                          "graph_critical_path_s": max(g.critical_path_s() for g in graphs),
                          "algorithms": sorted({e.get("algorithm", "") for e in answer.result.comm})},
            "astra_sim": {"step_s": run.step_s if run.finish_ns else None, "wall_s": run.wall_s,
                          "finished": len(run.finish_ns), "num_ranks": run.num_ranks, "unfinished": run.unfinished,
                          "note": run.note,
                          "collectives_wall_s": case_wall, "folder": run.folder and str(run.folder), "binary": str(binary),
                          "compute": "roofline" if roofline else "replayed"},
            "ratio": run.step_s / step if run.finish_ns and step > 0 else None,
            "ratio_one_at_a_time": run.step_s / serial if run.finish_ns and serial else None,
            "ratio_their_collectives": (run.step_s / replays["their_collectives_step_s"]
                                        if run.finish_ns and replays.get("their_collectives_step_s") else None),
            "collectives": rows, "summary": answer.summary()}


def _replays(answer) -> dict:
    """The exported graphs replayed (`whatif/llm/replay.py`): with NCCL's streams side by side, and under
    ASTRA-sim's rule of one collective per GPU at a time, both with fabriclab's own costs."""
    from fabriclab.whatif.llm.replay import replay_step

    return {"replay_step_s": replay_step(answer),
            "one_collective_at_a_time_step_s": replay_step(answer, one_collective_at_a_time=True)}


def _row(entry: dict, case: CollectiveCase | None, astra_s: float | None) -> dict:
    ours = float(entry["time_s"])
    return {"communicator": entry["communicator"], "collective": entry["collective"],
            "group_size": int(entry.get("group_size") or (len(case.ranks) if case else 0)),
            "ranks": list(case.ranks) if case else None, "size_bytes": int(entry["size_bytes"]),
            "calls_per_step": float(entry.get("calls_per_step", 0)), "ours_s": ours, "astra_s": astra_s,
            "ratio": astra_s / ours if astra_s is not None and ours > 0 else None,
            "algorithm": entry.get("algorithm", "")}
