"""Predictions of NVIDIA's published GPT-3 175B step times (NeMo Megatron on DGX H100, 128-2048 GPUs).

Two procedures, the two model sets of `validate published`:

* `baseline`: predicted from a kernel calibration alone: every kernel timed by the kernel model fitted to
  one H200's kernel table (`fabric/kernels.py`; the H100 has its compute), no step of the series used, so
  every row is predicted, the 128-GPU ones too.
* `mechanisms`: the scale on that kernel model calibrated on the series' smallest run of the same
  precision (`whatif/llm/run.calibrate_efficiency`, as `fabriclab calibrate step` does), every other run
  predicted with it; the calibration row itself is not predicted (its value is None and its note says why).

Everything else comes from the recipe and data sheets: the model (`gpt3-175b`), TP4 PP8 VP6 with sequence parallelism, MBS 1, 64 micro-batches per
pipeline, the distributed optimizer (ZeRO-1) with overlapped gradient reduction and parameter gather, TP
communication overlap (the recipe's `tp_comm_overlap`), and the `dgx-h100` cluster preset (8 x NDR per
server, rail-optimised, NCCL's model of its current version).

Try it: `fabriclab validate published --rows nemo-gpt3`.
"""

from __future__ import annotations

from functools import lru_cache

from fabriclab.bench.published.data import NEMO_GPT3_STEPS, Published
from fabriclab.bench.published.prediction import Input, Prediction

SMALLEST = min(NEMO_GPT3_STEPS)


def _par(gpus: int, precision: str):
    from fabriclab.workload.parallel import ParallelConfig

    dp = gpus // 32
    return ParallelConfig(num_gpus=gpus, tp=4, pp=8, vp=6, mbs=1, gbs=64 * dp, seq=2048, sequence_parallel=True,
                          zero=1, recompute="none", precision=precision)


def _inputs(precision: str, scale: float | None) -> tuple[Input, ...]:
    return (Input(name="model", value="GPT-3 175B (96 layers, h 12288, seq 2048)", source="paper: the recipe"),
            Input(name="parallelism", value="TP4 PP8 VP6 SP, MBS 1, 64 micro-batches, distributed optimizer",
                  source="paper: the recipe"),
            Input(name="cluster", value="dgx-h100 preset (8 H100, NVSwitch, 8 x 400G NDR, rail-optimised)",
                  source="data sheet: DGX H100"),
            Input(name="kernels", value="GEMMs by shape, flash attention, memory-bound passes",
                  source="measured: one H200's kernel table (fabric/data/kernels-h200.csv)"),
            *((Input(name=f"compute scale ({precision})", value=f"{scale:.4f} x the kernel model",
                     source=f"calibrated on: nemo-gpt3-{precision}-{SMALLEST}gpu"),) if scale is not None else ()))


@lru_cache(maxsize=4)
def _calibrated(precision: str) -> float:
    from fabriclab.fabric.presets import cluster_preset
    from fabriclab.whatif.llm.run import calibrate_efficiency
    from fabriclab.whatif.llm.step import StepOptions
    from fabriclab.workload.transformer import load_model

    step = NEMO_GPT3_STEPS[SMALLEST][("bf16", "fp8").index(precision)]
    value, _ = calibrate_efficiency(load_model("gpt3-175b"), _par(SMALLEST, precision), cluster_preset("dgx-h100"),
                                    step, options=StepOptions(tp_overlap=True))
    return value


@lru_cache(maxsize=32)
def predicted_step_s(gpus: int, precision: str, calibrated: bool = True) -> float:
    from fabriclab.fabric.presets import cluster_preset
    from fabriclab.whatif.llm.run import simulate_llm
    from fabriclab.whatif.llm.step import StepOptions
    from fabriclab.workload.transformer import load_model

    answer = simulate_llm(load_model("gpt3-175b"), _par(gpus, precision), cluster_preset("dgx-h100"),
                          options=StepOptions(tp_overlap=True), scale=_calibrated(precision) if calibrated else None)
    return answer.step_time_s


def _parse(row: Published) -> tuple[str, str]:
    _, _, precision, what = row.key.split("-", 3)
    return precision, what


def nemo_baseline(row: Published) -> Prediction:
    """From the kernel calibration alone: no step of the series enters it."""
    precision, what = _parse(row)
    if what == "scaling":
        largest = max(NEMO_GPT3_STEPS)
        value = predicted_step_s(SMALLEST, precision, False) / predicted_step_s(largest, precision, False)
        return Prediction(value=value, inputs=_inputs(precision, None),
                          note=f"simulated step at {SMALLEST} GPUs / at {largest} GPUs, kernels alone")
    gpus = int(what.removesuffix("gpu"))
    return Prediction(value=predicted_step_s(gpus, precision, False), inputs=_inputs(precision, None),
                      note="whatif llm with the kernel model of one H200's table; no step of the series used")


def nemo_mechanisms(row: Published) -> Prediction:
    precision, what = _parse(row)
    scale = _calibrated(precision)
    if what == "scaling":
        largest = max(NEMO_GPT3_STEPS)
        value = predicted_step_s(SMALLEST, precision) / predicted_step_s(largest, precision)
        return Prediction(value=value, inputs=_inputs(precision, scale),
                          note=f"simulated step at {SMALLEST} GPUs / at {largest} GPUs")
    gpus = int(what.removesuffix("gpu"))
    if gpus == SMALLEST:
        return Prediction(value=None, inputs=_inputs(precision, scale),
                          note="the calibration row: the compute scale is fitted on it, so it is not predicted")
    return Prediction(value=predicted_step_s(gpus, precision), inputs=_inputs(precision, scale),
                      note=f"whatif llm with the kernel model's scale calibrated on the {SMALLEST}-GPU {precision} run")
