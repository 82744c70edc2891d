"""One training step of a transformer on a cluster: the step program (`whatif/llm/program.py`) costed.

Every operation of the program gets its time: compute on the GPU's roofline (`whatif/llm/compute.py`),
every collective by the cluster's library model on its groups' shape (`whatif/llm/comm.py`). A pass (the
forward or backward of one model chunk for one micro-batch) runs its layers in order on the compute
stream; a communication op delays it by what its overlap leaves exposed, per layer: TP behind the layer's
linear math when TP overlap is on, the CP ring behind the attention core, EP behind the layer's compute only with `ep_overlap`. The host
dispatches each layer's kernels beside the GPU (`fabric/host.py`): the layer takes the slower of the two,
the host's run cut where it waits for the GPU (an MoE layer's tokens per expert), and the GPU's wait is the
`dispatch` part of the step. ZeRO-3 (FSDP) runs a second stream per pass: the next unit's parameters are
gathered while the current one computes (prefetch of one unit), a unit's gradients reduce-scattered
after its backward; what the stream adds beyond the compute stream is the pass's exposed DP time.

The passes run in the pipeline schedule (`whatif/llm/schedule.py`: 1F1B, interleaved), a receiver waiting
for the activation's send. ZeRO 0-2 reduce their gradients in Megatron's buckets on each stage's DP
stream as the last micro-batch's backward frees them (`overlap_grad_reduce`), and gather the updated
parameters before a chunk's first forward ends (`overlap_param_gather`). The optimizer step reads and
writes its shard of parameters, gradients and Adam states once (memory bound). The passes run in the
schedule with the DP streams, and every stage's split of the step is kept, in `whatif/llm/account.py`;
the answer is a `StepResult` (`whatif/llm/result.py`).

Try it: `fabriclab whatif llm --model gpt3-175b --cluster dgx-h100 --gpus 128 --tp 4 --pp 8 --vp 6 --gbs 256`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fabriclab.whatif.llm.account import account
from fabriclab.whatif.llm.comm import CommModel
from fabriclab.whatif.llm.compute import Roofline
from fabriclab.whatif.llm.program import Call, LayerPass, ProgramOptions, Work, build_program, check_options
from fabriclab.whatif.llm.result import PassCost, StepResult
from fabriclab.whatif.llm.stragglers import GPU_SPREAD
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import TransformerSpec

# Adam in mixed precision touches per parameter of its shard: fp32 master, m, v read and written (24 B),
# the fp32 gradient read (4 B), the bf16 parameter written (2 B).
OPTIMIZER_BYTES_PER_PARAM = 30
SPLIT_KEY = {"tp": "tp", "cp": "cp", "ep": "ep", "pp": "pp", "dpcp": "dp", "edp": "dp", "shard": "dp",
             "replica": "dp", "etp": "ep", "etpep": "ep", "ep_inter": "ep", "ep_intra": "ep",
             "host": "compute"}  # an offload the compute cannot hide: the compute stream waits for the copy


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
    moe_dispatcher: str = "alltoall"
    """How an MoE layer's tokens reach their experts (`whatif/llm/program.DISPATCHERS`): `alltoall`,
    `allgather` or `deepep` (Megatron-Core's `--moe-token-dispatcher-type alltoall|allgather|flex`)."""
    gpu_spread: float = GPU_SPREAD
    """Standard deviation of the GPUs' speed over their mean: the step runs at the slowest GPU's pace
    (`whatif/llm/stragglers.py`; applied to compute timed by the kernel model)."""
    host: str = "te"
    """How the framework dispatches kernels (`fabric/host.HOSTS`: eager, te, cuda-graphs); each layer runs
    at max(GPU time, host time) with compute timed by the kernel model."""
    moe_imbalance: float = 1.0
    """The busiest expert rank's routed tokens over the mean (1: balanced, as published benchmarks force)."""
    grad_bytes: int = 4
    """Bytes per gradient element the DP reductions move (`--grad-dtype`: 4 for fp32, Megatron-LM's default
    with bf16 and the memory model's, `workload/memory.MemoryOptions`; 2 for bf16)."""

    def program(self) -> ProgramOptions:
        return ProgramOptions(fsdp_unit=self.fsdp_unit, shard_group=self.shard_group, ep_overlap=self.ep_overlap,
                              bucket_params=self.bucket_params, tp_overlap=self.tp_overlap,
                              moe_dispatcher=self.moe_dispatcher, moe_imbalance=self.moe_imbalance,
                              grad_bytes=self.grad_bytes)


class StepModel:
    """The costs of one (model, parallel configuration, cluster, roofline); `run()` simulates the step."""

    def __init__(self, spec: TransformerSpec, par: ParallelConfig, cluster, rate: Roofline,
                 options: StepOptions = StepOptions(), *, memory_bandwidth_Bps: float,
                 comm: CommModel | None = None) -> None:
        self.spec, self.par, self.rate, self.options = spec, par, rate, options
        check_options(par, options.program())  # before the groups are cut by them
        self.comm = comm if comm is not None else CommModel(cluster, par, shard_group=options.shard_group)
        # DeepEP's RDMA step runs between the NVLink domains an ETP x EP group spans (`program.ProgramOptions`)
        self.program = build_program(spec, par, replace(options.program(),
                                                        ep_domains=self.comm.shapes["ep_inter"].num_gpus))
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
        waits = self._host_waits(lp.ops)
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
        waits = max(0.0, waits - sum(exposed.values()))  # the host catches up while the GPU communicates
        if waits > 0:
            exposed["dispatch"] = waits
        out = (linear + core, exposed, sum(map(self.call_s, lp.gather)), sum(map(self.call_s, lp.reduce)))
        self._layer_cache[key] = out
        return out

    def _host_waits(self, ops: tuple) -> float:
        """Seconds the GPU waits for the host's dispatch in one layer pass: per run of kernels the host can
        dispatch ahead of the GPU (up to a `HostSync`), max(GPU, host) less the GPU's time; a collective is
        one launch on the host and its time on the GPU."""
        waits = gpu = host = 0.0
        launch = getattr(getattr(self.rate, "host", None), "launch_s", 0.0)
        if not launch:
            return 0.0
        for op in ops:
            if not isinstance(op, Work):
                host += launch / self.rate.host_scale
                continue
            pieces = self.rate.pieces(op)
            for i, (g, h) in enumerate(pieces):
                gpu, host = gpu + g, host + h
                if i + 1 < len(pieces):  # the host waits for the GPU here
                    waits, gpu, host = waits + max(0.0, host - gpu), 0.0, 0.0
        return waits + max(0.0, host - gpu)

    def pass_cost(self, stage: int, chunk: int, kind: int) -> PassCost:
        """One pass: its layers in order, with ZeRO-3's gather/reduce stream beside them (module doc)."""
        key = (stage, chunk, kind)
        if key not in self._pass_cache:
            self._pass_cache[key] = self._pass(self.program.chunk(stage, chunk).passes(kind))
        return self._pass_cache[key]

    def _pass(self, layer_passes: tuple[LayerPass, ...]) -> PassCost:
        costs = [self.layer_cost(lp) for lp in layer_passes]
        if not any(c[2] or c[3] for c in costs):  # no ZeRO-3 stream beside the layers: they run back to back
            return _back_to_back(layer_passes, costs)
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
        return account(self, p2p=p2p)


def _back_to_back(layer_passes: tuple[LayerPass, ...], costs: list) -> PassCost:
    """A pass whose layers neither gather nor reduce on a DP stream (`StepModel._pass` without ZeRO-3)."""
    exposed: dict[str, float] = {}
    layers, t, compute_s = [], 0.0, 0.0
    for lp, (compute, exp, _, _) in zip(layer_passes, costs):
        layers.append((lp.layer, t, compute, exp))
        t += compute
        compute_s += compute
        for name, v in exp.items():
            exposed[name] = exposed.get(name, 0.0) + v
            t += v
    return PassCost(compute_s=compute_s, exposed_s=exposed, layers=layers)
