"""One training step of a transformer on a cluster: compute, every communicator's traffic, the schedule.

Per micro-batch and model chunk a pipeline pass costs its compute (`whatif/llm/compute.py`) plus the
communication Megatron-LM does not hide inside it:

* **TP**: with sequence parallelism two all-gathers and two reduce-scatters of the layer's activations
  (tokens x hidden, bf16) per layer and direction; without it two all-reduces. Exposed, unless TP overlap
  (Transformer Engine's userbuffers) hides them behind the linear layers.
* **CP**: the ring exchange of keys and values (cp - 1 steps per layer; backward also their gradients),
  overlapped with the attention core: only what the core does not cover is exposed.
* **EP**: per MoE layer an all-to-all to dispatch the routed tokens (top-k copies of tokens x hidden) and
  one to combine them, in forward and in backward; exposed.
* **PP**: the activation (forward) or its gradient (backward) sent to the next stage, tokens x hidden / TP
  (Megatron's scatter-gather), asynchronous: it delays the receiver only (`whatif/llm/schedule.py`).
* **DP** (sharded as ZeRO says): ZeRO-0 all-reduces gradients; 1 and 2 reduce-scatter them and all-gather
  the updated parameters (bf16); both overlapped as Megatron's `overlap_grad_reduce` and
  `overlap_param_gather` do: a chunk's reduction starts with its last backward (buckets follow the
  backward), a chunk's gather must end before its first forward ends. ZeRO-3 (FSDP) gathers every chunk's
  parameters for each forward and backward and reduce-scatters its gradients after each backward, hidden
  behind the pass's compute where it can. Dense gradients reduce over dp x cp ranks, experts' over
  (dp x cp) / ep. A stage's gathers and reductions share its network stream.

The optimizer step reads and writes its shard of parameters, gradients and Adam states once (memory
bound). Every collective is costed by the cluster's library model on its groups' shape
(`whatif/llm/comm.py`). The split of the step time is taken on the stage that ends last.

Try it: `fabriclab whatif llm --model gpt3-175b --cluster dgx-h100 --gpus 128 --tp 4 --pp 8 --vp 6 --gbs 256`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabriclab.whatif.llm.comm import CommModel
from fabriclab.whatif.llm.compute import ChunkFlops, Roofline, chunk_flops
from fabriclab.whatif.llm.schedule import F, PipelineRun, simulate
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import TransformerSpec

ACT_BYTES = 2  # bf16 activations and gradients on the wire
KINDS = ("compute", "tp", "cp", "ep", "pp", "dp", "optimizer", "bubble")
# Adam in mixed precision touches per parameter of its shard: fp32 master, m, v read and written (24 B),
# the fp32 gradient read (4 B), the bf16 parameter written (2 B).
OPTIMIZER_BYTES_PER_PARAM = 30


@dataclass(frozen=True, kw_only=True)
class StepOptions:
    """What the framework overlaps (Megatron-LM's switches)."""

    tp_overlap: bool = False
    """TP communication hidden behind the linear layers (`--tp-comm-overlap`)."""
    overlap_grad_reduce: bool = True
    """DP gradient reduction overlapped with the last backward (`--overlap-grad-reduce`)."""
    overlap_param_gather: bool = True
    """ZeRO parameter all-gather overlapped with the first forward (`--overlap-param-gather`)."""


@dataclass
class PassCost:
    """One pass (forward or backward of a chunk, one micro-batch) on one GPU."""

    compute_s: float
    exposed_s: dict[str, float] = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        return self.compute_s + sum(self.exposed_s.values())


@dataclass
class StepResult:
    """A simulated step."""

    step_time_s: float
    split_s: dict[str, float]
    """The step on its slowest stage: compute, exposed TP / CP / EP / PP / DP, optimizer, bubble (sums to the
    step time)."""
    comm: list[dict]
    """Per communicator and collective: group shape, bytes per call, calls per step, time per call, algorithm."""
    pipeline: PipelineRun
    critical_stage: int
    passes: dict
    """(stage, chunk, F or B) -> PassCost."""
    dp_intervals: list[list[tuple[str, float, float]]]
    """Per stage: (name, start, end) of its DP gathers and reductions."""
    optimizer_s: float


class StepModel:
    """The costs of one (model, parallel configuration, cluster, roofline); `run()` simulates the step."""

    def __init__(self, spec: TransformerSpec, par: ParallelConfig, cluster, rate: Roofline,
                 options: StepOptions = StepOptions(), *, memory_bandwidth_Bps: float,
                 comm: CommModel | None = None) -> None:
        self.spec, self.par, self.rate, self.options = spec, par, rate, options
        self.comm = comm if comm is not None else CommModel(cluster, par)
        self.chunks = chunk_flops(spec, par)
        self.memory_bandwidth_Bps = memory_bandwidth_Bps
        self.tokens = par.mbs * par.seq / par.cp
        self.act = self.tokens * spec.hidden_size * ACT_BYTES
        self.log: dict[tuple[str, str, int], dict] = {}
        self.logging = False

    def _call(self, communicator: str, collective: str, size: float, count: float) -> float:
        """Time of one call, logged with how often a step makes it."""
        t = self.comm.time(communicator, collective, size)
        if not self.logging or size <= 0 or self.comm.shapes[communicator].num_gpus == 1:
            return t
        entry = self.log.setdefault((communicator, collective, round(size)),
                                    {"communicator": communicator, "collective": collective, "size_bytes": size,
                                     "calls_per_step": 0.0, "time_s": t})
        entry["calls_per_step"] += count
        return t

    def pass_cost(self, stage: int, chunk: int, kind: int) -> PassCost:
        par, spec = self.par, self.spec
        c: ChunkFlops = self.chunks[chunk * par.pp + stage]
        fwd = self.rate.forward_s(c)
        compute = fwd if kind == F else self.rate.backward_s(c, par.recompute)
        scale = 1 if kind == F else 2  # backward: twice the math
        exposed: dict[str, float] = {}
        reps = par.num_microbatches  # this pass runs once per micro-batch
        if par.tp > 1:
            if par.sequence_parallel:
                t = 2 * (self._call("tp", "allgather", self.act, 2 * c.num_layers * reps)
                         + self._call("tp", "reduce_scatter", self.act, 2 * c.num_layers * reps))
            else:
                t = 2 * self._call("tp", "allreduce", self.act, 2 * c.num_layers * reps)
            t *= c.num_layers
            linear_s = c.linear / self.rate.linear_flops_per_s * scale
            exposed["tp"] = max(0.0, t - linear_s) if self.options.tp_overlap else t
        if par.cp > 1:
            kv = 2 * self.tokens * spec.num_kv_heads * spec.head_dim * ACT_BYTES / par.tp
            per_step = self._call("cp", "sendrecv", kv * scale, (par.cp - 1) * c.num_layers * reps)
            t = (par.cp - 1) * per_step * c.num_layers
            core_s = c.attention / self.rate.attention_flops_per_s * scale
            exposed["cp"] = max(0.0, t - core_s)
        if par.ep > 1 and c.num_moe_layers:
            size = self.tokens * spec.experts_per_token * spec.hidden_size * ACT_BYTES / par.tp
            exposed["ep"] = 2 * c.num_moe_layers * self._call("ep", "alltoall", size, 2 * c.num_moe_layers * reps)
        if par.zero == 3 and par.dp * par.cp > 1:
            dense, expert = self.chunk_params(stage, chunk)
            t = self._gather(dense, expert, reps) + (self._reduce(dense, expert, reps) if kind != F else 0.0)
            exposed["dp"] = max(0.0, t - compute)
        return PassCost(compute_s=compute, exposed_s=exposed)

    def chunk_params(self, stage: int, chunk: int) -> tuple[float, float]:
        """(dense, expert) parameters one GPU holds of a chunk (before ZeRO sharding)."""
        spec, par = self.spec, self.par
        c = self.chunks[chunk * par.pp + stage]
        dense_layer = spec.attention_params() + spec.mlp_params()
        moe_layer = spec.attention_params() + (spec.shared_expert_params() + spec.router_params() if spec.is_moe else 0)
        dense = ((c.num_layers - c.num_moe_layers) * dense_layer + c.num_moe_layers * moe_layer) / par.tp
        if stage == 0 and chunk == 0:
            dense += spec.embedding_params() / par.tp
        if stage == par.pp - 1 and chunk == par.vp - 1:
            dense += spec.output_params() / par.tp
        experts = (c.num_moe_layers * spec.num_experts / par.ep * spec.expert_params() / par.tp
                   if spec.is_moe else 0.0)
        return dense, experts

    def _gather(self, dense: float, expert: float, count: float) -> float:
        return (self._call("dpcp", "allgather", dense * ACT_BYTES, count)
                + self._call("edp", "allgather", expert * ACT_BYTES, count))

    def _reduce(self, dense: float, expert: float, count: float) -> float:
        op = "allreduce" if self.par.zero == 0 else "reduce_scatter"
        return (self._call("dpcp", op, dense * ACT_BYTES, count)
                + self._call("edp", op, expert * ACT_BYTES, count))

    def optimizer_s(self) -> float:
        """The Adam step over the largest stage's shard, memory bound."""
        par = self.par
        most = max(sum(sum(self.chunk_params(s, v)) for v in range(par.vp)) for s in range(par.pp))
        shard = most / (par.dp * par.cp) if par.zero >= 1 else most
        return shard * OPTIMIZER_BYTES_PER_PARAM / self.memory_bandwidth_Bps

    def run(self, *, p2p: bool = True) -> StepResult:
        from fabriclab.whatif.llm.account import account

        return account(self, p2p=p2p)


def p2p_time(model: StepModel) -> float:
    par = model.par
    if par.pp == 1:
        return 0.0
    size = model.act / (par.tp if par.sequence_parallel else 1)
    calls = 2 * par.num_microbatches * par.vp * (par.pp - 1) / par.pp  # sends per stage per step (F and B)
    return model._call("pp", "sendrecv", size, calls)


def run_pipeline(model: StepModel, p2p_s: float, passes: dict) -> tuple[PipelineRun, list]:
    """The schedule with the DP stream of every stage (ZeRO 0-2): gathers before a chunk's first forward
    ends, reductions from its last backward on."""
    par = model.par
    zero_stream = par.zero < 3 and par.dp * par.cp > 1
    gathers = [[0.0] * par.vp for _ in range(par.pp)]
    reduces = [[0.0] * par.vp for _ in range(par.pp)]
    if zero_stream:
        for s in range(par.pp):
            for v in range(par.vp):
                dense, expert = model.chunk_params(s, v)
                if par.zero >= 1:
                    gathers[s][v] = model._gather(dense, expert, 1)
                reduces[s][v] = model._reduce(dense, expert, 1)
    stream_free = [0.0] * par.pp
    intervals: list[list[tuple[str, float, float]]] = [[] for _ in range(par.pp)]
    gather_end = [[0.0] * par.vp for _ in range(par.pp)]
    for s in range(par.pp):  # gathers in the order of first use, from the step's start
        for v in range(par.vp):
            if gathers[s][v] > 0:
                t0 = stream_free[s]
                stream_free[s] = gather_end[s][v] = t0 + gathers[s][v]
                intervals[s].append((f"dp.allgather.chunk{v}", t0, gather_end[s][v]))
    overlap_ag = model.options.overlap_param_gather

    def ready(s, c, kind, m, t0, t1):
        if kind == F and m == 0 and gathers[s][c] > 0:
            return max(t1, gather_end[s][c]) if overlap_ag else t1 + max(0.0, gather_end[s][c] - t0)
        return t1

    fwd = [[passes[(s, v, F)].total_s for v in range(par.vp)] for s in range(par.pp)]
    bwd = [[passes[(s, v, 1)].total_s for v in range(par.vp)] for s in range(par.pp)]
    run = simulate(par.pp, par.vp, par.num_microbatches, fwd, bwd, p2p_s, ready_s=ready)
    last = par.num_microbatches - 1
    for s in range(par.pp):
        for i, (kind, c, m) in enumerate(run.ops[s]):
            if kind == 1 and m == last and reduces[s][c] > 0:
                begin = run.start_s[s][i] if model.options.overlap_grad_reduce else run.end_s[s][i]
                t0 = max(stream_free[s], begin)
                end = max(t0 + reduces[s][c], run.end_s[s][i] + reduces[s][c] / max(1, model.chunks[c * par.pp + s].num_layers))
                stream_free[s] = end
                intervals[s].append((f"dp.{'allreduce' if par.zero == 0 else 'reduce_scatter'}.chunk{c}", t0, end))
    return run, intervals
