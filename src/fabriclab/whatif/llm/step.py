"""One training step of a transformer on a cluster: the step program (`whatif/llm/program.py`) costed.

Every operation of the program gets its time: compute on the GPU's roofline (`whatif/llm/compute.py`),
every collective by the cluster's library model on its groups' shape (`whatif/llm/comm.py`). A pass (the
forward or backward of one model chunk for one micro-batch) runs its layers in order on the compute
stream; a communication op delays it by what its overlap leaves exposed, per layer: TP behind the layer's
linear math when TP overlap is on, the CP ring behind the attention core, EP behind the layer's compute
only with `ep_overlap`. ZeRO-3 (FSDP) runs a second stream per pass: the next unit's parameters are
gathered while the current one computes (prefetch of one unit), a unit's gradients reduce-scattered
after its backward; what the stream adds beyond the compute stream is the pass's exposed DP time.

The passes run in the pipeline schedule (`whatif/llm/schedule.py`: 1F1B, interleaved), a receiver waiting
for the activation's send. ZeRO 0-2 reduce their gradients in Megatron's buckets on each stage's DP
stream as the last micro-batch's backward frees them (`overlap_grad_reduce`), and gather the updated
parameters before a chunk's first forward ends (`overlap_param_gather`). The optimizer step reads and
writes its shard of parameters, gradients and Adam states once (memory bound). Every stage's split of
the step is kept (`whatif/llm/account.py`).

Try it: `fabriclab whatif llm --model gpt3-175b --cluster dgx-h100 --gpus 128 --tp 4 --pp 8 --vp 6 --gbs 256`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabriclab.whatif.llm.comm import CommModel
from fabriclab.whatif.llm.compute import Roofline
from fabriclab.whatif.llm.program import Call, LayerPass, ProgramOptions, StepProgram, Work, build_program
from fabriclab.whatif.llm.schedule import F, PipelineRun, simulate
from fabriclab.whatif.llm.stragglers import GPU_SPREAD
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import TransformerSpec

KINDS = ("compute", "tp", "cp", "ep", "pp", "dp", "optimizer", "bubble")
# Adam in mixed precision touches per parameter of its shard: fp32 master, m, v read and written (24 B),
# the fp32 gradient read (4 B), the bf16 parameter written (2 B).
OPTIMIZER_BYTES_PER_PARAM = 30
SPLIT_KEY = {"tp": "tp", "cp": "cp", "ep": "ep", "pp": "pp", "dpcp": "dp", "edp": "dp", "shard": "dp",
             "replica": "dp"}


@dataclass(frozen=True, kw_only=True)
class StepOptions:
    """What the framework overlaps and how it shards (Megatron-LM's and torchtitan's switches)."""

    tp_overlap: bool = False
    """TP communication hidden behind the linear layers (`--tp-comm-overlap`)."""
    overlap_grad_reduce: bool = True
    """DP gradient reduction overlapped with the last backward (`--overlap-grad-reduce`)."""
    overlap_param_gather: bool = True
    """ZeRO parameter all-gather overlapped with the first forward (`--overlap-param-gather`)."""
    fsdp_unit: int = 1
    """ZeRO-3: transformer layers per FSDP unit (0: the whole model chunk)."""
    bucket_params: int | None = None
    """ZeRO 0-2: parameters per gradient bucket (None: Megatron-Core's default; 0: one per chunk)."""
    shard_group: int = 0
    """ZeRO-3: ranks that shard a parameter (HSDP); 0: all of dp x cp."""
    ep_overlap: bool = False
    """EP all-to-alls hidden behind the layer's compute."""
    gpu_spread: float = GPU_SPREAD
    """Standard deviation of the GPUs' speed over their mean: the step runs at the slowest GPU's pace
    (`whatif/llm/stragglers.py`; applied to compute timed by the kernel model)."""

    def program(self) -> ProgramOptions:
        return ProgramOptions(fsdp_unit=self.fsdp_unit, shard_group=self.shard_group, ep_overlap=self.ep_overlap,
                              bucket_params=self.bucket_params, tp_overlap=self.tp_overlap)


@dataclass
class PassCost:
    """One pass (forward or backward of a chunk, one micro-batch) on one GPU."""

    compute_s: float
    exposed_s: dict[str, float] = field(default_factory=dict)
    layers: list = field(default_factory=list)
    """Per layer pass: (layer, start offset in the pass, compute s, exposed s by split key)."""

    @property
    def total_s(self) -> float:
        return self.compute_s + sum(self.exposed_s.values())


@dataclass
class StepResult:
    """A simulated step."""

    step_time_s: float
    split_s: dict[str, float]
    """The step on its slowest stage (the least bubble): compute, exposed TP / CP / EP / PP / DP,
    optimizer, bubble (sums to the step time)."""
    pipeline: PipelineRun
    critical_stage: int
    """The stage that ends last."""
    passes: dict
    """(stage, chunk, F or B) -> PassCost."""
    dp_intervals: list[list[tuple[str, float, float]]]
    """Per stage: (name, start, end) of its DP stream's bucket gathers and reductions."""
    optimizer_s: float
    slowest_stage: int = 0
    split_by_stage: list = field(default_factory=list)
    """Per stage: its split of the step (each sums to the step time)."""
    program: StepProgram | None = None
    model: "StepModel | None" = None
    """The costed model (its program, library model and roofline), for the exports."""
    _comm_by_stage: list | None = field(default=None, repr=False)

    @property
    def comm_by_stage(self) -> list[list[dict]]:
        """Per stage: its collectives (communicator, group shape, bytes per call, calls per step, time per
        call, algorithm), counted from the program when first asked (a plan never asks for most)."""
        if self._comm_by_stage is None:
            from fabriclab.whatif.llm.account import comm_log

            self._comm_by_stage = [comm_log(self.model, s) for s in range(self.model.par.pp)]
        return self._comm_by_stage

    @property
    def comm(self) -> list[dict]:
        """The slowest stage's collectives (`comm_by_stage`)."""
        return self.comm_by_stage[self.slowest_stage]


class StepModel:
    """The costs of one (model, parallel configuration, cluster, roofline); `run()` simulates the step."""

    def __init__(self, spec: TransformerSpec, par: ParallelConfig, cluster, rate: Roofline,
                 options: StepOptions = StepOptions(), *, memory_bandwidth_Bps: float,
                 comm: CommModel | None = None) -> None:
        self.spec, self.par, self.rate, self.options = spec, par, rate, options
        self.program = build_program(spec, par, options.program())
        self.comm = comm if comm is not None else CommModel(cluster, par, shard_group=options.shard_group)
        self.memory_bandwidth_Bps = memory_bandwidth_Bps
        self._layer_cache: dict = {}
        self._pass_cache: dict = {}

    def call_s(self, call: Call) -> float:
        return self.comm.time(call.communicator, call.collective, call.size_bytes)

    def work_s(self, work: Work) -> tuple[float, float]:
        """(linear, attention-core) seconds of a compute op."""
        return self.rate.work_s(work)

    def layer_cost(self, lp: LayerPass) -> tuple[float, dict[str, float], float, float]:
        """(compute s, exposed s by split key, gather s, reduce s) of one layer pass (module doc)."""
        key = (id(lp.ops), id(lp.gather), id(lp.reduce))  # the program shares these tuples between like layers
        hit = self._layer_cache.get(key)
        if hit is not None:
            return hit
        linear = core = 0.0
        exposed: dict[str, float] = {}
        hidden: dict[str, dict[str, float]] = {}
        for op in lp.ops:
            if isinstance(op, Work):
                a, b = self.work_s(op)
                linear, core = linear + a, core + b
                continue
            t, name = self.call_s(op), SPLIT_KEY[op.communicator]
            if op.overlap == "attention" or op.overlap == "compute" or (op.overlap == "linear" and self.options.tp_overlap):
                hidden.setdefault(op.overlap, {})[name] = hidden.get(op.overlap, {}).get(name, 0.0) + t
            else:
                exposed[name] = exposed.get(name, 0.0) + t
        budget = {"linear": linear, "attention": core, "compute": linear + core}
        for where, by in hidden.items():
            for name, t in by.items():
                exposed[name] = exposed.get(name, 0.0) + max(0.0, t - budget[where])
        out = (linear + core, exposed, sum(map(self.call_s, lp.gather)), sum(map(self.call_s, lp.reduce)))
        self._layer_cache[key] = out
        return out

    def pass_cost(self, stage: int, chunk: int, kind: int) -> PassCost:
        """One pass: its layers in order, with ZeRO-3's gather/reduce stream beside them (module doc)."""
        key = (stage, chunk, kind)
        if key not in self._pass_cache:
            self._pass_cache[key] = self._pass(self.program.chunk(stage, chunk).passes(kind))
        return self._pass_cache[key]

    def _pass(self, layer_passes: tuple[LayerPass, ...]) -> PassCost:
        costs = [self.layer_cost(lp) for lp in layer_passes]
        exposed: dict[str, float] = {}
        layers, t, stream = [], 0.0, 0.0
        ready = costs[0][2] if costs else 0.0  # the first unit's gather: nothing to hide it behind
        stream = ready
        for i, (lp, (compute, exp, _, reduce_s)) in enumerate(zip(layer_passes, costs)):
            start = max(t, ready)
            if i + 1 < len(costs) and costs[i + 1][2] > 0:  # prefetch the next unit as this one starts
                stream = max(stream, start) + costs[i + 1][2]
                ready = stream
            layers.append((lp.layer, start, compute, exp))
            t = start + compute + sum(exp.values())
            for name, v in exp.items():
                exposed[name] = exposed.get(name, 0.0) + v
            if reduce_s > 0:
                stream = max(stream, t) + reduce_s
        busy = sum(c[0] + sum(c[1].values()) for c in costs)
        end = max(t, stream)
        if end - busy > 1e-15:
            exposed["dp"] = exposed.get("dp", 0.0) + end - busy
        return PassCost(compute_s=sum(c[0] for c in costs), exposed_s=exposed, layers=layers)

    def chunk_params(self, stage: int, chunk: int) -> tuple[float, float]:
        """(dense, expert) parameters one GPU holds of a chunk (before ZeRO sharding)."""
        c = self.program.chunk(stage, chunk)
        return c.dense_params, c.expert_params

    def optimizer_s(self) -> float:
        """The Adam step over the largest stage's shard, memory bound."""
        return max(self.program.optimizer_params) * OPTIMIZER_BYTES_PER_PARAM / self.memory_bandwidth_Bps

    def p2p_s(self) -> float:
        """One pipeline message (an activation or its gradient) between neighbouring stages."""
        sends = self.program.sends.get(0) or self.program.sends.get(self.par.pp - 1) or []
        return self.call_s(sends[0].call) if sends else 0.0

    def run(self, *, p2p: bool = True) -> StepResult:
        from fabriclab.whatif.llm.account import account

        return account(self, p2p=p2p)


def run_pipeline(model: StepModel, p2p_s: float, passes: dict) -> tuple[PipelineRun, list]:
    """The schedule with the DP stream of every stage (ZeRO 0-2, and HSDP's replica all-reduce): bucket
    gathers before a chunk's first forward ends, reductions as the last backward frees their buckets."""
    par, program = model.par, model.program
    stream_free = [0.0] * par.pp
    intervals: list[list[tuple[str, float, float]]] = [[] for _ in range(par.pp)]
    held: dict[tuple[int, int], list[tuple[float, float]]] = {}  # (stage, chunk) -> (gather end, pass left)
    for s in range(par.pp):  # bucket gathers in the order of first use, from the step's start
        for v in range(par.vp):
            chunk, cost = program.chunk(s, v), passes[(s, v, F)]
            offset = {layer: start for layer, start, _, _ in cost.layers}
            for k in reversed(range(len(chunk.buckets))):  # buckets are in backward order
                bucket = chunk.buckets[k]
                t = sum(model.call_s(c) for c in bucket.gather)
                if t <= 0:
                    continue
                t0, stream_free[s] = stream_free[s], stream_free[s] + t
                intervals[s].append((f"dp.allgather.chunk{v}.bucket{k}", t0, stream_free[s]))
                first = min(bucket.layers, key=lambda i: offset.get(i, 0.0))  # its first layer in the forward
                held.setdefault((s, v), []).append((stream_free[s], cost.total_s - offset.get(first, 0.0)))
    overlap_ag = model.options.overlap_param_gather

    def ready(s, c, kind, m, t0, t1):
        """The first forward of a chunk: each bucket's layers run after its gather (Megatron's
        overlap_param_gather), so the pass ends no earlier than any gather's end plus what follows it."""
        if kind == F and m == 0 and (s, c) in held:
            if not overlap_ag:
                return t1 + max(0.0, max(end for end, _ in held[(s, c)]) - t0)
            return max(t1, max(end + left for end, left in held[(s, c)]))
        return t1

    fwd = [[passes[(s, v, F)].total_s for v in range(par.vp)] for s in range(par.pp)]
    bwd = [[passes[(s, v, 1)].total_s for v in range(par.vp)] for s in range(par.pp)]
    run = simulate(par.pp, par.vp, par.num_microbatches, fwd, bwd, p2p_s, ready_s=ready)
    last = par.num_microbatches - 1
    for s in range(par.pp):
        for i, (kind, c, m) in enumerate(run.ops[s]):
            if kind == 1 and m == last:
                _reduce_buckets(model, s, c, run.start_s[s][i], run.end_s[s][i], stream_free, intervals)
        for call in program.step_calls.get(s, ()):
            t0 = max(stream_free[s], run.stage_end_s[s])
            stream_free[s] = t0 + model.call_s(call)
            intervals[s].append((call.name, t0, stream_free[s]))
    return run, intervals


def _reduce_buckets(model: StepModel, s: int, c: int, begin: float, end: float, stream_free: list,
                    intervals: list) -> None:
    """Chunk c's buckets on stage s's DP stream: each as soon as the last backward has passed its layers
    (at the pass's end without `overlap_grad_reduce`)."""
    chunk = model.program.chunk(s, c)
    n, done = len(chunk.layers), 0
    for k, bucket in enumerate(chunk.buckets):
        done += len(bucket.layers)
        at = begin + (end - begin) * done / n if model.options.overlap_grad_reduce else end
        t = sum(model.call_s(call) for call in bucket.reduce)
        if t <= 0:
            continue
        t0 = max(stream_free[s], at)
        stream_free[s] = t0 + t
        op = bucket.reduce[0].collective
        intervals[s].append((f"dp.{op}.chunk{c}.bucket{k}", t0, stream_free[s]))
