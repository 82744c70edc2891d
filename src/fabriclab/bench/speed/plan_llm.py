"""How fast `fabriclab plan --model <LLM>` searches: Llama 3 405B on 16,384 GPUs, 8 cluster options.

The plan is the question at its largest: llama3-405b (global batch 2,048 x 8,192 tokens, bf16) on 16,384 GPUs
of dgx-h100 and hgx-h200, each with 400G and 800G NICs per GPU on a rail-optimised and a fat-tree network:
8 options x 501 parallel configurations = 4,008 enumerated, of which ~1,100 fit in memory. It runs twice:

* **default**: configurations in the order of their lower bound, simulated until the bound reaches the best
  step (`plan/llm/__init__.py`): the answer of the plan;
* **exhaustive**: every configuration that fits simulated (the full table): the target, 1,000 configurations
  at 16,384 GPUs in under `TARGET_S` on the project's 2-core machine.

Correctness on every run: both runs find the same best step per option. The peer, measured in the same run:
`PEER_CONFIGS` fitting configurations of one option simulated the naive way, one `whatif.llm.run.simulate_llm`
each (communicator groups built rank by rank, a new communication model and its library predictions per
configuration, the memory check inside), against `plan/llm/evaluator.Evaluator` on the same configurations
(fresh, so it pays for its shared models); the step times must agree (relative 1e-9). The ratio is the
peer's seconds per configuration over ours.

An MoE plan beside it (`moe_plan`): DeepSeek-V3 (global batch 4,096 x 4,096, bf16) on 1,024 and 2,048 GPUs of
gb200-nvl72 and dgx-h100, the plan's default search, `fabriclab plan --model deepseek-v3 --gpus 1024,2048
--clusters gb200-nvl72,dgx-h100`: its wall time and the process's peak memory against `MOE_TARGET_S` and
`MOE_TARGET_BYTES` (issue 46: 2 min 32 s and 1.4 GB before the kernels' times, the backward kernels and the
pipeline's sends were remembered across configurations).

Try it: `python -m fabriclab.bench.speed.plan_llm` (the CLI registers it as `fabriclab bench plan-llm`).
"""

from __future__ import annotations

import time
from fractions import Fraction

from fabriclab.fabric.presets import cluster_preset
from fabriclab.plan.llm import LlmPlanRequest, build_options, run_llm_plan
from fabriclab.plan.llm.evaluator import Evaluator
from fabriclab.plan.llm.space import enumerate_configs, fit_configs, memory_needs
from fabriclab.whatif.llm.run import simulate_llm
from fabriclab.workload.transformer import load_model

MODEL, GPUS, SEQ, GBS = "llama3-405b", 16384, 8192, 2048
CLUSTERS = ("dgx-h100", "hgx-h200")
NIC_RATES_BPS = (50e9, 100e9)  # 400 and 800 Gb/s per GPU
FABRICS = ("rail", "fat-tree")
TARGET_S = 60.0  # fabriclab's bound for 1,000 configurations at 16,384 GPUs on the project's 2-core machine
PEER_CONFIGS = 8
MOE_MODEL, MOE_GPUS, MOE_CLUSTERS = "deepseek-v3", (1024, 2048), ("gb200-nvl72", "dgx-h100")
MOE_TARGET_S, MOE_TARGET_BYTES = 30.0, 1e9  # issue 46's bound for that plan on the project's 2-core machine


def request(*, exhaustive: bool, gpus: int = GPUS, clusters: tuple[str, ...] = CLUSTERS) -> LlmPlanRequest:
    """The benchmark's plan (module doc)."""
    return LlmPlanRequest(model=MODEL, gpus=(gpus,), clusters=tuple((c, cluster_preset(c)) for c in clusters),
                          nic_rates_Bps=NIC_RATES_BPS, fabrics=FABRICS, bisections=(Fraction(1),), gbs=GBS, seq=SEQ,
                          exhaustive=exhaustive, max_configs=10**6)


def _run(exhaustive: bool, **kwargs) -> tuple[dict, dict]:
    t0 = time.perf_counter()
    result = run_llm_plan(request(exhaustive=exhaustive, **kwargs))
    wall = time.perf_counter() - t0
    s = result.stats
    row = {"run": "exhaustive" if exhaustive else "default", "gpus": kwargs.get("gpus", GPUS),
           "options": s["num_options"], "enumerated": s["num_enumerated"], "fit": s["num_fit"],
           "simulated": s["num_simulated"], "bounded": s["num_bounded"], "wall_s": wall,
           "fit_per_s": s["num_fit"] / wall, "simulated_per_s": s["num_simulated"] / wall}
    return row, {r["option"]: r["step_time_s"] for r in result.rows}


def peer(num: int = PEER_CONFIGS, gpus: int = GPUS) -> dict:
    """The naive peer against the Evaluator on `num` fitting configurations of the first option (module doc)."""
    spec, option = load_model(MODEL), build_options(request(exhaustive=True, gpus=gpus))[0]
    space = enumerate_configs(spec, gpus, option.cluster.server.gpus_per_server, gbs=GBS, seq=SEQ)
    fitted = fit_configs(space, memory_needs(spec, space), option.cluster.compute.gpu.memory_bytes).configs
    subset = fitted[:: max(1, len(fitted) // num)][:num]
    t0 = time.perf_counter()
    naive = [simulate_llm(spec, par, option.cluster).step_time_s for par, _ in subset]
    t1 = time.perf_counter()
    ev = Evaluator(spec, option.cluster)
    ours = [ev.simulate(par, memory).step_time_s for par, memory in subset]
    t2 = time.perf_counter()
    agree = all(abs(a - b) <= 1e-9 * a for a, b in zip(naive, ours))
    return {"option": option.label, "configs": len(subset), "naive_s_per_config": (t1 - t0) / len(subset),
            "ours_s_per_config": (t2 - t1) / len(subset), "ratio": (t1 - t0) / (t2 - t1), "agree": agree}


def moe_plan() -> dict:
    """The MoE plan (module doc): its counts, wall time and the process's peak resident memory so far (an upper
    bound on the plan's: Linux's ru_maxrss, in KiB)."""
    import resource

    t0 = time.perf_counter()
    result = run_llm_plan(LlmPlanRequest(model=MOE_MODEL, gpus=MOE_GPUS,
                                         clusters=tuple((c, cluster_preset(c)) for c in MOE_CLUSTERS)))
    wall, s = time.perf_counter() - t0, result.stats
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"model": MOE_MODEL, "gpus": list(MOE_GPUS), "clusters": list(MOE_CLUSTERS), "enumerated": s["num_enumerated"],
            "fit": s["num_fit"], "simulated": s["num_simulated"], "wall_s": wall, "peak_bytes": peak,
            "within_target": wall < MOE_TARGET_S and peak < MOE_TARGET_BYTES}


def run(*, gpus: int = GPUS, clusters: tuple[str, ...] = CLUSTERS, peer_configs: int = PEER_CONFIGS) -> dict:
    """Both runs, the agreement of their best steps, the peer, and the verdict against the target."""
    default, best_default = _run(False, gpus=gpus, clusters=clusters)
    exhaustive, best_exhaustive = _run(True, gpus=gpus, clusters=clusters)
    same = best_default.keys() == best_exhaustive.keys() and all(
        abs(best_default[k] - best_exhaustive[k]) <= 1e-12 * best_exhaustive[k] for k in best_default)
    return {"model": MODEL, "gpus": gpus, "gbs": GBS, "seq": SEQ, "clusters": list(clusters),
            "runs": [default, exhaustive], "moe": moe_plan(),
            "same_best": same, "peer": peer(peer_configs, gpus), "target_s": TARGET_S,
            "within_target": exhaustive["wall_s"] < TARGET_S and exhaustive["fit"] >= 1000}


def report(r: dict) -> str:
    """The benchmark's lines for people."""
    lines = [f"plan speed, {r['model']} on {r['gpus']:,} GPUs ({', '.join(r['clusters'])}; 400G/800G, rail/fat-tree):"]
    for row in r["runs"]:
        lines.append(f"  {row['run']:>10}: {row['enumerated']:,} enumerated, {row['fit']:,} fit, {row['simulated']:,} "
                     f"simulated, {row['bounded']:,} bounded in {row['wall_s']:.1f} s ({row['fit_per_s']:,.0f} "
                     f"configurations/s)")
    p = r["peer"]
    lines.append(f"  peer (simulate_llm per configuration, {p['configs']} configurations): "
                 f"{p['naive_s_per_config']:.3f} s/config vs ours {p['ours_s_per_config']:.3f}: {p['ratio']:.1f}x, "
                 f"agree: {p['agree']}")
    lines.append(f"  same best in both runs: {r['same_best']}; target < {r['target_s']:g} s for >= 1,000: "
                 f"{'within' if r['within_target'] else 'OVER'}")
    m = r["moe"]
    lines.append(f"  MoE plan, {m['model']} on {'/'.join(map(str, m['gpus']))} GPUs of {', '.join(m['clusters'])}: "
                 f"{m['enumerated']:,} enumerated, {m['fit']:,} fit, {m['simulated']:,} simulated in {m['wall_s']:.1f} s, "
                 f"peak {m['peak_bytes'] / 1e9:.2f} GB; target < {MOE_TARGET_S:g} s and "
                 f"{MOE_TARGET_BYTES / 1e9:g} GB: {'within' if m['within_target'] else 'OVER'}")
    return "\n".join(lines)


def main() -> dict:
    """Run and print; returns the result for a record."""
    r = run()
    print(report(r))
    return r


if __name__ == "__main__":
    main()
