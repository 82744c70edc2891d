"""What a simulated step answers (`StepResult`) and what one pass costs (`PassCost`): the step model
(`whatif/llm/step.py`) costs the passes, the accounting (`whatif/llm/account.py`) runs them in the pipeline
schedule and splits the step; the step's collectives are counted from its program when first asked
(`comm_log`).

Try it: `fabriclab whatif llm --model llama3-8b --cluster dgx-h100 --gpus 64 --tp 2 --pp 2 --gbs 128 --per-stage`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabriclab.whatif.llm.program import StepProgram, stage_calls
from fabriclab.whatif.llm.schedule import PipelineRun

# dispatch: the GPU waiting for the host to dispatch its kernels (`fabric/host.py`)
KINDS = ("compute", "dispatch", "tp", "cp", "ep", "pp", "dp", "optimizer", "bubble")


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
    """The step on its slowest stage (the least bubble): compute, the GPU waiting for the host's dispatch,
    exposed TP / CP / EP / PP / DP, optimizer, bubble (sums to the step time)."""
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
    model: object | None = None
    """The costed `StepModel` (`whatif/llm/step.py`: its program, library model and roofline), for the
    exports."""
    _comm_by_stage: list | None = field(default=None, repr=False)

    @property
    def comm_by_stage(self) -> list[list[dict]]:
        """Per stage: its collectives (communicator, group shape, bytes per call, calls per step, time per
        call, algorithm), counted from the program when first asked (a plan never asks for most)."""
        if self._comm_by_stage is None:
            self._comm_by_stage = [comm_log(self.model, s) for s in range(self.model.par.pp)]
        return self._comm_by_stage

    @property
    def comm(self) -> list[dict]:
        """The slowest stage's collectives (`comm_by_stage`)."""
        return self.comm_by_stage[self.slowest_stage]


def comm_log(model, stage: int) -> list[dict]:
    """One stage's collectives: per (communicator, collective, size) its calls per step, time and algorithm,
    from a `StepModel` (its program, its `CommModel` and the time of one call)."""
    log: dict[tuple, dict] = {}
    for call, count in stage_calls(model.program, stage):
        shape = model.comm.shapes[call.communicator]
        if call.size_bytes <= 0 or shape.num_gpus == 1 and call.communicator != "host":  # offloads are listed
            continue
        key = (call.communicator, call.collective, round(call.size_bytes))
        entry = log.get(key)
        if entry is None:
            entry = log[key] = {"communicator": call.communicator, "collective": call.collective,
                                "size_bytes": call.size_bytes, "calls_per_step": 0.0, "time_s": model.call_s(call)}
        entry["calls_per_step"] += count
    out = sorted(log.values(), key=lambda e: (e["communicator"], e["collective"], e["size_bytes"]))
    for entry in out:
        shape = model.comm.shapes[entry["communicator"]]
        entry.update(stage=stage, group=shape.describe(), group_size=shape.num_gpus,
                     algorithm=model.comm.algorithm(entry["communicator"], entry["collective"], entry["size_bytes"]))
    return out
