"""How fast and how lean one LLM training step is simulated at 16,384 GPUs, measured as whole processes.

The case is Llama 3 405B in the layout Meta trained it on 16,384 H100s (Llama 3 paper, Table 4: TP8 CP1
PP16 DP128, sequence 8,192, global batch 2,048 sequences), here with full recompute so that it fits the
memory model, on the `dgx-h100` preset. Each run is a fresh Python process (`python -m
fabriclab.bench.speed.llm_step --child WHAT GPUS`), so its wall time counts the imports and its peak
resident memory (`ru_maxrss`) is its own:

* **ours**: `simulate_llm` (groups, library model per group shape, the pipeline schedule, the split) and
  the busiest links of the step (every group's traffic routed on the whole cluster), what `fabriclab
  whatif llm` computes;
* **peer, trace replay**: the same step exported as per-stage rank graphs (what `--chakra` writes for
  ASTRA-sim) and replayed op by op by `whatif/graph_run` (every op's communication costed by the library
  model, then each rank's critical path), the way a trace-driven simulator consumes an execution trace. Its
  step time differs by design: ranks are timed alone, a receive does not wait for its send, so it leaves
  out the pipeline's waits;
* **ours at 1,024 GPUs**: the same model on 64 x fewer GPUs (DP 8), to show how the cost grows with scale;
* **ours, ECMP x 8**: the same step on `roce-h100` (ECMP hashing, DCQCN), over 8 draws of the hashes
  (`nccl/routing.py`): the median and 90th percentile a `whatif llm --seeds 8` answer costs.

Runs alternate (ours, peer, small) `repeats` times; the figures are medians. Try it: `fabriclab bench
llm-step` (or `python -m fabriclab.bench.speed.llm_step`).
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time

MODEL, SEQ, GBS = "llama3-405b", 8192, 2048
LAYOUT = dict(tp=8, pp=16, cp=1, mbs=1, recompute="full")  # Llama 3 paper, Table 4 (16K GPUs, 8K sequences)
GPUS, SMALL_GPUS = 16384, 1024
WHAT = ("ours", "peer", "small", "ecmp")
ECMP_SEEDS = 8
CHILD_TIMEOUT_S = 300.0
LLM_STEP_BUDGET_S = 10.0  # whole process on the project's 2-core machine: a what-if answers while one waits


def _job(gpus: int):
    from fabriclab.fabric.presets import cluster_preset
    from fabriclab.workload.parallel import ParallelConfig
    from fabriclab.workload.transformer import load_model

    gbs = GBS * gpus // GPUS
    return load_model(MODEL), ParallelConfig(num_gpus=gpus, gbs=gbs, seq=SEQ, **LAYOUT), cluster_preset("dgx-h100")


def child(what: str, gpus: int) -> dict:
    """One measured run in this process (module doc); the step time it finds and its peak memory."""
    from fabriclab.whatif.llm.run import simulate_llm

    spec, par, cluster = _job(gpus)
    if what == "ecmp":
        from fabriclab.fabric.presets import cluster_preset
        from fabriclab.nccl.routing import draws, median_p90

        steps = [simulate_llm(spec, par, c).step_time_s for c in draws(cluster_preset("roce-h100"), ECMP_SEEDS)]
        median, p90 = median_p90(steps)
        return {"step_time_s": float(median), "detail": f"{ECMP_SEEDS} draws, p90 {float(p90):.4g} s",
                "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    answer = simulate_llm(spec, par, cluster)
    if what == "peer":
        from fabriclab.whatif.graph_run import run_graphs
        from fabriclab.whatif.llm.export import stage_graphs

        step_s, detail = run_graphs(stage_graphs(answer), cluster, num_gpus=gpus, recost=True).step_s, "replayed"
    else:
        from fabriclab.whatif.llm.links import busiest_links

        links = busiest_links(answer)
        step_s, detail = answer.step_time_s, f"busiest {links[0].kind} {links[0].share_of_step:.1%} of step"
    return {"step_time_s": step_s, "detail": detail,
            "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def _measure(what: str, gpus: int) -> dict:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "fabriclab.bench.speed.llm_step", "--child", what, str(gpus)],
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"the {what} run at {gpus} GPUs failed: {done.stderr.strip().splitlines()[-1:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "wall_s": wall}


def run(*, repeats: int = 3, progress=lambda text: None) -> dict:
    """The four runs, alternating, `repeats` times each; medians and the ratios (module doc)."""
    runs: dict[str, list[dict]] = {w: [] for w in WHAT}
    for i in range(repeats):
        for what in WHAT:
            progress(f"round {i + 1}/{repeats}: {what}")
            runs[what].append(_measure(what, SMALL_GPUS if what == "small" else GPUS))
    rows = []
    for what in WHAT:
        got = runs[what]
        rows.append({"run": what, "gpus": SMALL_GPUS if what == "small" else GPUS,
                     "wall_s": statistics.median(r["wall_s"] for r in got),
                     "max_rss_bytes": statistics.median(r["max_rss_bytes"] for r in got),
                     "step_time_s": got[0]["step_time_s"], "detail": got[0]["detail"],
                     "walls_s": [r["wall_s"] for r in got]})
    by = {r["run"]: r for r in rows}
    return {"model": MODEL, "layout": {**LAYOUT, "seq": SEQ, "gbs": GBS}, "repeats": repeats, "rows": rows,
            "peer_over_ours": by["peer"]["wall_s"] / by["ours"]["wall_s"],
            "growth_16k_over_1k": by["ours"]["wall_s"] / by["small"]["wall_s"],
            "ecmp_over_ours": by["ecmp"]["wall_s"] / by["ours"]["wall_s"]}


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], int(sys.argv[3]))))
    else:
        print(json.dumps(run(progress=lambda t: print(t, file=sys.stderr)), indent=1))
