"""One LLM plan option's configurations simulated fast: shared communication costs and a lower bound.

`Evaluator` simulates configurations of one model on one cluster exactly as `whatif.llm.run.simulate_llm`
does (the same `StepModel`, schedule and accounting: `tests/plan/test_plan_llm.py` checks the step times
agree), with three savings that matter at 16,384 GPUs:

* **Groups once per shape.** The ranks' coordinates and communicator groups (one numpy sort each) are kept
  per parallel shape in one dict (`whatif/llm/groups.RankGroups`) that every `CommModel` of a plan reads.
* **One `CommModel` per parallel shape.** A collective's time depends on the cluster, the communicator's
  group shape and the size only, so configurations with the same (TP, CP, PP, DP, EP) share one model and
  its cache of library predictions (`nccl.predict.collective_times`, ~1.5 ms each).
* **TP overlap both ways.** A configuration with TP communication to hide (TP > 1 with sequence
  parallelism, what Transformer Engine's userbuffers need) is simulated with TP overlap on and off, and keeps
  the faster (its answer's `result.model.options` says which); counted as one simulation.
* **A lower bound first.** `lower_bound_s` is the step time without any communication: the busiest stage's
  compute, plus the forwards its first micro-batch waits for and the backwards that follow its last one
  (a pass never runs shorter than its compute, and a stage runs one pass at a time). The plan simulates
  configurations in the order of their bound and stops when the bound reaches the best step time found, so
  the best it reports is the best of all (`plan/llm/__init__.py`); `exhaustive=True` simulates everything.

Try it: `python -c "from fabriclab.plan.llm.evaluator import Evaluator; from fabriclab.fabric.presets import
cluster_preset as c; from fabriclab.workload.transformer import load_model; from fabriclab.workload.parallel
import ParallelConfig as P; e = Evaluator(load_model('llama3-70b'), c('dgx-h100'));
print(e.simulate(P(num_gpus=1024, tp=8, pp=4, gbs=512, seq=8192)).step_time_s)"`.
"""

from __future__ import annotations

from dataclasses import replace

from fabriclab.fabric.cluster import ClusterModel, cluster_gpu
from fabriclab.whatif.llm.comm import CommModel
from fabriclab.whatif.llm.compute import chunk_flops
from fabriclab.whatif.llm.run import LlmAnswer, build_model, compute_rates, efficiency_of
from fabriclab.whatif.llm.schedule import B, F
from fabriclab.whatif.llm.step import StepModel, StepOptions
from fabriclab.workload.memory import MemoryBreakdown, memory_per_gpu
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import TransformerSpec


class Evaluator:
    """Simulates configurations of `spec` on `cluster` (module doc); counts what it did."""

    def __init__(self, spec: TransformerSpec, cluster: ClusterModel, *, options: StepOptions = StepOptions(),
                 memo: dict | None = None, efficiency: float | None = None) -> None:
        self.spec, self.cluster, self.options = spec, cluster, options
        self.override = efficiency  # a share of peak for every matrix (plan --efficiency), else the cluster's
        self.gpu = cluster_gpu(cluster)
        self._comms: dict[tuple, CommModel] = {}
        self._memo: dict = {} if memo is None else memo  # groups per shape: Evaluators of one plan share it
        self._efficiency = {}
        self.num_simulated = 0

    def efficiency(self, precision: str):
        """The compute efficiency of `precision` on the cluster: measured, or the assumption said as one."""
        if precision not in self._efficiency:
            self._efficiency[precision] = efficiency_of(self.cluster, precision, self.override)
        return self._efficiency[precision]

    def comm(self, par: ParallelConfig) -> CommModel:
        """The CommModel of `par`'s parallel shape, built once."""
        key = (par.tp, par.cp, par.pp, par.dp, par.ep, par.etp, par.order)
        if key not in self._comms:
            self._comms[key] = CommModel(self.cluster, par, memo=self._memo)
        return self._comms[key]

    def variants(self, par: ParallelConfig) -> list[StepOptions]:
        """The framework's switches `par` is tried with: TP overlap both ways where there is TP communication
        it can hide (module doc), else the plan's own."""
        if par.tp > 1 and par.sequence_parallel:
            return [self.options, replace(self.options, tp_overlap=not self.options.tp_overlap)]
        return [self.options]

    def model(self, par: ParallelConfig, options: StepOptions | None = None) -> StepModel:
        """The StepModel of `par` (what `simulate_llm` builds) with the shared CommModel of its shape."""
        return build_model(self.spec, par, self.cluster, self.efficiency(par.precision), options or self.options,
                           comm=self.comm(par))  # the same shapes: share its cache of collective times

    def compute_bound_s(self, par: ParallelConfig) -> float:
        """A cheaper, looser bound than `lower_bound_s` (~20 x faster): compute only, no StepModel."""
        rate = compute_rates(self.spec, par, self.cluster, self.efficiency(par.precision))
        chunks = chunk_flops(self.spec, par)
        fwd = [[rate.forward_s(chunks[v * par.pp + s]) for v in range(par.vp)] for s in range(par.pp)]
        bwd = [[rate.backward_s(chunks[v * par.pp + s], par.recompute) for v in range(par.vp)] for s in range(par.pp)]
        return _fill_drain_bound(fwd, bwd, par.num_microbatches)

    def lower_bound_s(self, par: ParallelConfig) -> float:
        """A step time no simulation of `par` can beat (module doc): every pass at its cost (compute and
        the communication it exposes), the pipeline's fill and drain, the optimizer; no idle time, no
        activation sends, no DP tail; the lower of its `variants`."""
        bounds = []
        for options in self.variants(par):
            model = self.model(par, options)
            cost = {(s, v, k): model.pass_cost(s, v, k).total_s for s in range(par.pp) for v in range(par.vp)
                    for k in (F, B)}
            fwd = [[cost[(s, v, F)] for v in range(par.vp)] for s in range(par.pp)]
            bwd = [[cost[(s, v, B)] for v in range(par.vp)] for s in range(par.pp)]
            bounds.append(_fill_drain_bound(fwd, bwd, par.num_microbatches) + model.optimizer_s())
        return min(bounds)

    def simulate(self, par: ParallelConfig, memory: MemoryBreakdown | None = None) -> LlmAnswer:
        """The step of `par` as `simulate_llm(..., check_memory=False)` answers it (the caller pruned by
        memory; `memory`: its `memory_per_gpu` when known), with the shared CommModel of its shape; the faster of
        its `variants`."""
        runs = [(m, m.run()) for m in (self.model(par, options) for options in self.variants(par))]
        model, result = min(runs, key=lambda mr: mr[1].step_time_s)
        par, eff = model.par, self.efficiency(par.precision)
        self.num_simulated += 1
        return LlmAnswer(spec=self.spec, par=par, cluster=self.cluster, result=result,
                         memory=memory or memory_per_gpu(self.spec, par), efficiency=eff, gpu_name=self.gpu.name,
                         peak_flops=self.gpu.peak_flops[par.precision], result_shapes=model.comm.shapes)


def _fill_drain_bound(fwd: list[list[float]], bwd: list[list[float]], num_microbatches: int) -> float:
    """The longest stage's passes plus the forwards of micro-batch 0 (chunk 0) on the stages before it, which
    it waits for, and their backwards of the last micro-batch, which wait for it: `fwd[stage][chunk]`."""
    best, before = 0.0, 0.0
    for f, b in zip(fwd, bwd):
        best = max(best, before + num_microbatches * (sum(f) + sum(b)))
        before += f[0] + b[0]
    return best
