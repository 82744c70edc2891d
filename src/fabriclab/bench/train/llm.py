"""`fabriclab bench train-llm`: tokens/s of the transformer trainer beside its peers, in one run.

* TP=1, PP=1: our trainer on one rank (flat buffers, our Adam, the schedule's loop) against a plain
  PyTorch loop of the same model (torch.optim.Adam), in alternating rounds in one process; goal >= 0.95x.
* TP=2 (no sequence parallelism, so both do Megatron's all-reduces): our trainer on 2 ranks against the
  same model tensor-parallel by DTensor (`runtime/llm/dtensor_tp.py`), alternating in one 2-rank launch.

Every round checks the peers' losses agree (1e-4 relative: float32 sums in another order). tokens/s =
global batch x sequence / the median step time of the round (rank 0's, after a barrier); the ratio
reported is the median over rounds.

Try it: `fabriclab bench train-llm --model gpt-tiny --gbs 16 --steps 10 --rounds 3`.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace

from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import load_model

LOSS_REL = 1e-4
GOAL_ONE_RANK = 0.95


@dataclass(frozen=True, kw_only=True)
class LlmBenchConfig:
    """The benchmark's run."""

    model: str = "gpt-tiny"
    """Dense transformer (the DTensor peer has no experts)."""
    gbs: int = 16
    """Global batch (sequences per step)."""
    mbs: int = 4
    """Micro-batch size."""
    seq: int | None = None
    """Sequence length (default: the model's)."""
    steps: int = 10
    """Timed steps per peer and round."""
    warmup: int = 3
    """Untimed steps before them."""
    rounds: int = 3
    """Rounds of both peers, alternating."""
    tp: bool = True
    """Also TP=2 against DTensor."""

    def train_config(self, num_gpus: int = 1, tp: int = 1):
        from fabriclab.runtime.llm.trainer import LlmTrainConfig

        spec = load_model(self.model)
        par = ParallelConfig(num_gpus=num_gpus, tp=tp, mbs=self.mbs, gbs=self.gbs, seq=self.seq or spec.seq_length,
                             sequence_parallel=False, zero=0)
        return LlmTrainConfig(spec=spec, par=par, steps=self.steps, warmup=self.warmup)


def _tokens_per_s(config, step_times: list[float]) -> float:
    return config.par.gbs * config.par.seq / statistics.median(step_times)


def _agree(a: list[float], b: list[float]) -> bool:
    return all(abs(x - y) <= LOSS_REL * abs(y) for x, y in zip(a, b))


def _round_row(config, r: int, ours: tuple[list, list], peer: tuple[list, list]) -> dict:
    """One round's row from (step times, losses) of ours and of the peer."""
    row = {"round": r, "ours_tokens_per_s": _tokens_per_s(config, ours[0]),
           "peer_tokens_per_s": _tokens_per_s(config, peer[0]), "losses_agree": _agree(ours[1], peer[1])}
    row["ratio"] = row["ours_tokens_per_s"] / row["peer_tokens_per_s"]
    return row


def one_rank(bench: LlmBenchConfig, on_round=None) -> dict:
    from fabriclab.runtime.llm.reference import plain_loop, run_single

    config, rows = bench.train_config(), []
    for r in range(bench.rounds):
        ours, plain = run_single(config), plain_loop(config)
        row = _round_row(config, r, (ours["step_times_s"], ours["losses"]), (plain["step_times_s"], plain["losses"]))
        rows.append(row)
        if on_round:
            on_round("TP=1 vs plain loop", row)
    return _summary(rows, "plain PyTorch loop (torch.optim.Adam)", GOAL_ONE_RANK)


def tp2(bench: LlmBenchConfig, on_round=None) -> dict:
    from fabriclab.runtime.launch import LaunchConfig, launch

    config = bench.train_config(num_gpus=2, tp=2)
    results = launch(_tp_rank, (bench, config), config=LaunchConfig(num_ranks=2, timeout_s=300)).results[0]
    rows = []
    for r, (ours, peer) in enumerate(results):
        row = _round_row(config, r, (ours["times"], ours["losses"]), (peer["times"], peer["losses"]))
        rows.append(row)
        if on_round:
            on_round("TP=2 vs DTensor", row)
    return _summary(rows, "DTensor tensor parallelism (parallelize_module, loss_parallel)", None)


def _summary(rows: list[dict], peer: str, goal: float | None) -> dict:
    return {"peer": peer, "rounds": rows, "ratio": statistics.median(r["ratio"] for r in rows),
            "ours_tokens_per_s": statistics.median(r["ours_tokens_per_s"] for r in rows),
            "peer_tokens_per_s": statistics.median(r["peer_tokens_per_s"] for r in rows),
            "losses_agree": all(r["losses_agree"] for r in rows), "goal_ratio": goal}


def _tp_rank(ctx, bench: LlmBenchConfig, config) -> list:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from fabriclab.runtime.llm.data import MicroBatches, global_batch
    from fabriclab.runtime.llm.dtensor_tp import PlainGpt, parallelize, train_step
    from fabriclab.runtime.llm.trainer import rank_main

    mesh = init_device_mesh("cpu", (2,))
    par, spec, adam = config.par, config.spec, config.adam
    out = []
    for _ in range(bench.rounds):
        steps = rank_main(ctx, config)["steps"]
        ours = {"times": [s["end"] - s["start"] for s in steps if s["timed"]], "losses": [s["loss"] for s in steps]}
        model = parallelize(PlainGpt(spec, par.seq, config.seed, torch.float32), mesh)
        opt = torch.optim.Adam(model.parameters(), lr=adam.lr, betas=(adam.beta1, adam.beta2), eps=adam.eps)
        peer = {"times": [], "losses": []}
        for step in range(config.warmup + config.steps):
            data = MicroBatches(global_batch(config.seed, step, par.gbs, par.seq, spec.vocab_size), dp_index=0, dp=1,
                                mbs=par.mbs, device="cpu")
            dist.barrier()
            t0 = time.perf_counter()
            peer["losses"].append(train_step(model, opt, data, par.num_microbatches, parallel=True))
            if step >= config.warmup:
                peer["times"].append(time.perf_counter() - t0)
        out.append((ours, peer))
    return out


def run_bench(bench: LlmBenchConfig, on_round=None) -> dict:
    out = {"one_rank": one_rank(bench, on_round)}
    if bench.tp:
        out["tp2"] = tp2(replace(bench), on_round)
    return out
