"""The same model trained by a plain PyTorch loop (one process, torch.optim.Adam, no flat buffers, no
schedule): the oracle of the trainer's 1-rank run and the peer of its speed benchmark.

Try it: `fabriclab bench train-llm --model gpt-tiny --steps 10`.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import torch

from fabriclab.runtime.llm.comm import Comm
from fabriclab.runtime.llm.data import MicroBatches, global_batch
from fabriclab.runtime.llm.meter import Meter
from fabriclab.runtime.llm.model import stage_chunks


def plain_loop(config, *, device: str = "cpu", threads: int | None = 1) -> dict:
    """Losses and step times of `config` (every parallel size 1) trained by a plain loop; `threads`: torch
    intra-op threads (1, as every launched rank runs: several on a loaded box spin against each other)."""
    if threads is not None:
        torch.set_num_threads(threads)
    par, spec, adam = config.par, config.spec, config.adam
    from fabriclab.runtime.llm.trainer import DTYPES

    one = Comm("tp", None, 1, 0, Meter())
    (model,) = stage_chunks(spec, seq=par.seq, pp=1, vp=1, stage=0, seed=config.seed, dtype=DTYPES[config.dtype],
                            tp=one, ep=one, sp=False, device=device)
    opt = torch.optim.Adam(model.parameters(), lr=adam.lr, betas=(adam.beta1, adam.beta2), eps=adam.eps)
    losses, times = [], []
    m = par.num_microbatches
    for step in range(config.warmup + config.steps):
        data = MicroBatches(global_batch(config.seed, step, par.gbs, par.seq, spec.vocab_size), dp_index=0, dp=1,
                            mbs=par.mbs, device=device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        total = 0.0
        for mb in range(m):
            loss = model(data.inputs(mb), data.targets(mb)) / m
            loss.backward()
            total += loss.item()
        opt.step()
        losses.append(total)
        if step >= config.warmup:
            times.append(time.perf_counter() - t0)
    return {"losses": losses, "step_times_s": times}


def run_single(config, *, threads: int | None = 1) -> dict:
    """The trainer on one rank in this process (no process group): every parallel size must be 1."""
    if threads is not None:
        torch.set_num_threads(threads)
    from fabriclab.runtime.llm.summary import summarize
    from fabriclab.runtime.llm.trainer import rank_main

    if config.par.num_gpus != 1:
        raise ValueError("run_single runs one rank: give a configuration of 1 GPU")
    ctx = SimpleNamespace(rank=0, world_size=1, device=torch.device(config.device))
    return summarize(config, {0: rank_main(ctx, config)})
