"""The parallel transformer trainer: `run_llm_train(config)` trains `config.model` for `config.steps` steps
as `config.par` splits it (TP x PP x DP, EP inside DP, ZeRO 0-3) on local ranks or a cluster launch, and
returns every step's loss, time and where each rank's time went.

One rank's step: a barrier (outside the time), the pipeline's passes in the simulator's schedule
(`pipeline.py`), the gradient reduction (`dp.py`), Adam. With `--np 1` and every parallel size 1 it is a
plain training loop of the same model, the reference the equivalence tests compare against.

Try it: `fabriclab train --model gpt-tiny --np 8 --tp 2 --pp 2 --gbs 8 --steps 3`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist

from fabriclab.runtime.llm.comm import Comm
from fabriclab.runtime.llm.data import MicroBatches, global_batch
from fabriclab.runtime.llm.dp import AdamConfig, ChunkData
from fabriclab.runtime.llm.groups import build_groups
from fabriclab.runtime.llm.meter import Meter
from fabriclab.runtime.llm.model import check_model, stage_chunks
from fabriclab.runtime.llm.pipeline import Pipeline
from fabriclab.workload.parallel import ParallelConfig

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}


@dataclass(frozen=True, kw_only=True)
class LlmTrainConfig:
    """One training run of the parallel transformer trainer."""

    spec: object
    """The model (`workload.transformer.TransformerSpec`)."""
    par: ParallelConfig
    """How it is split; par.num_gpus is the number of ranks."""
    steps: int = 3
    """Timed training steps."""
    warmup: int = 0
    """Steps run before them, not timed (their losses are kept)."""
    seed: int = 0
    """Seed of the weights and the data."""
    dtype: str = "float32"
    """Math and parameter precision: float32, float64 (the equivalence tests) or bfloat16."""
    adam: AdamConfig = field(default_factory=AdamConfig)
    """The optimizer."""
    device: str = "cpu"
    """cpu, or cuda (one GPU per rank under NCCL; several ranks may share one under Gloo)."""
    backend: str | None = None
    """gloo, nccl, or None to follow the device."""
    timeout_s: float = 120.0
    """Longest wait for a peer at rendezvous or in any collective."""
    keep_spans: bool = False
    """Return every span of the last step (for the trace)."""

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"--dtype {self.dtype!r}: use one of {', '.join(DTYPES)}")
        if self.steps < 1 or self.warmup < 0:
            raise ValueError(f"--steps {self.steps} / --warmup {self.warmup}: give steps >= 1, warm-up >= 0")
        check_model(self.spec, self.par)
        backend = self.backend or ("nccl" if self.device == "cuda" else "gloo")
        if self.par.vp > 1 and self.par.pp == 2 and backend == "nccl":
            # with 2 stages each direction carries activations and gradients, matched by tag; NCCL has no tags
            raise ValueError("interleaved 1F1B (--vp > 1) on 2 stages needs tagged sends: use --pp >= 3 over NCCL, "
                             "or --backend gloo")


class _Hooks:
    """ZeRO-3's gathers before each pass and reductions after each backward."""

    def __init__(self, data: list[ChunkData], zero: int) -> None:
        self.data, self.zero = data, zero

    def before_pass(self, chunk: int, kind: int, mb: int) -> None:
        if self.zero == 3:
            for g in self.data[chunk].groups:
                g.gather_params(into_model=kind == 0 and mb == 0)

    def after_backward(self, chunk: int, mb: int) -> None:
        if self.zero == 3:
            self.data[chunk].sum_partial_over_tp()
            for g in self.data[chunk].groups:
                g.reduce_grads()


def rank_main(ctx, config: LlmTrainConfig) -> dict:
    """One rank's run (`runtime.launch` calls it on every rank)."""
    par, spec = config.par, config.spec
    dtype, device = DTYPES[config.dtype], ctx.device
    torch.manual_seed(config.seed)
    groups = build_groups(par, ctx.rank, timedelta(seconds=config.timeout_s))
    meter = Meter(sync=torch.cuda.synchronize if device.type == "cuda" else None)
    comms = {n: Comm(n if n in ("tp", "ep") else "dp", groups.group(n), groups.size(n), groups.index(n), meter)
             for n in ("tp", "pp", "dp", "ep", "edp")}
    stage = groups.index("pp")
    sp = par.sequence_parallel and par.tp > 1
    chunks = stage_chunks(spec, seq=par.seq, pp=par.pp, vp=par.vp, stage=stage, seed=config.seed, dtype=dtype,
                          tp=comms["tp"], ep=comms["ep"], sp=sp, device=device)
    data = [ChunkData(c, comms["dp"], comms["edp"], comms["tp"], par.zero, i) for i, c in enumerate(chunks)]
    act_shape = (par.mbs, par.seq // par.tp if sp else par.seq, spec.hidden_size)
    dp_index = par.coordinates()["dp"][ctx.rank]
    steps = []
    for step in range(config.warmup + config.steps):
        tokens = global_batch(config.seed, step, par.gbs, par.seq, spec.vocab_size)
        batches = MicroBatches(tokens, dp_index=int(dp_index), dp=par.dp, mbs=par.mbs, device=device)
        pipe = Pipeline(chunks, pp=par.pp, vp=par.vp, stage=stage, ranks=groups.members["pp"],
                        num_microbatches=par.num_microbatches, act_shape=act_shape, dtype=dtype, device=device,
                        meter=meter, data=batches, hooks=_Hooks(data, par.zero))
        if ctx.world_size > 1:
            dist.barrier()
        meter.reset()
        start = time.perf_counter()
        for d in data:
            for g in d.groups:
                g.attach_grads()
        loss, sends, recvs = pipe.run()
        _finish_step(data, par, config.adam, step + 1, meter)
        end = time.perf_counter()
        steps.append({"loss": loss, "start": start, "end": end, "time_s": dict(meter.time_s),
                      "bytes": dict(meter.bytes), "calls": dict(meter.calls), "sends": sends, "recvs": recvs,
                      "spans": meter.spans if config.keep_spans and step == config.warmup + config.steps - 1
                      else None, "timed": step >= config.warmup, "inside": _inside_passes(meter.spans),
                      "collectives": {t: [(n, a, b) for th, n, a, b in meter.spans if th == t]
                                      for t in ("tp", "ep", "dp")}})
    coords = {k: int(v[ctx.rank]) for k, v in par.coordinates().items()}
    return {"rank": ctx.rank, "coords": coords, "last_stage": stage == par.pp - 1, "steps": steps,
            "params": sum(p.numel() for c in chunks for p in c.parameters())}


def _finish_step(data: list[ChunkData], par: ParallelConfig, adam: AdamConfig, step: int, meter: Meter) -> None:
    t0 = time.perf_counter()
    if par.zero < 3:
        for d in reversed(data):
            d.sum_partial_over_tp()
            for g in d.groups:
                g.reduce_grads()
    t1 = time.perf_counter()
    for d in data:
        for g in d.groups:
            g.adam(adam, step, par.dp)
    meter.add("optimizer", "optimizer step", t1, time.perf_counter())
    for d in data:
        for g in d.groups:
            g.publish()
    del t0


def _inside_passes(spans) -> dict[str, float]:
    """Communication time spent inside the passes (to take out of their compute), per thread."""
    passes = sorted((a, b) for t, _, a, b in spans if t == "compute")
    out: dict[str, float] = {}
    import bisect

    starts = [a for a, _ in passes]
    for thread, _, a, b in spans:
        if thread in ("compute", "optimizer"):
            continue
        i = bisect.bisect_right(starts, a) - 1
        if i >= 0 and passes[i][1] >= b:
            out[thread] = out.get(thread, 0.0) + (b - a)
    return out


def gathered_rank_main(ctx, config: LlmTrainConfig):
    """`rank_main` under a cluster launch (torchrun, Slurm): every rank's result goes to rank 0."""
    mine = rank_main(ctx, config)
    every = [None] * ctx.world_size if ctx.rank == 0 else None
    dist.gather_object(mine, every, dst=0)
    return dict(enumerate(every)) if ctx.rank == 0 else None


def run_llm_train(config: LlmTrainConfig, on_message=None) -> dict:
    """Launch the ranks (or join a cluster launch) and summarise the run (`summary.summarize`) in the
    reporting process; {} in the others."""
    from fabriclab.runtime.environment import detect_launch
    from fabriclab.runtime.launch import LaunchConfig, launch
    from fabriclab.runtime.llm.summary import summarize

    external = detect_launch()
    if external is not None and external.world_size != config.par.num_gpus:
        raise ValueError(f"--np {config.par.num_gpus} but the launch has {external.world_size} ranks: give --np "
                         f"{external.world_size}")
    launch_config = LaunchConfig(num_ranks=config.par.num_gpus, device=config.device, backend=config.backend,
                                 timeout_s=config.timeout_s)
    fn = rank_main if external is None else gathered_rank_main
    outcome = launch(fn, (config,), config=launch_config, on_message=on_message)
    if not outcome.is_reporter:
        return {}
    results = outcome.results if external is None else outcome.results[external.rank]
    return summarize(config, results) | {"placement": outcome.placement}
