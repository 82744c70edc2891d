"""`fabriclab calibrate step`: the compute efficiency of a GPU from one measured training step.

Give the model, the parallel options and the cluster of a run you measured and its step time; the LLM
simulator (`whatif/llm`) finds the share of the GPU's peak at which its simulated step lasts as long
(bisection), and writes the cluster with that efficiency for the run's precision into `--out`, with the
measurement it came from. `whatif llm` and `plan` then use it and say so.

Its options and defaults are `whatif llm`'s (the same job is described the same way), with two
differences: `--gbs` is required, because the work of the measured step is its global batch and a guess
would silently scale the efficiency (the default of `whatif llm`, 8 or 2 x PP micro-batches per
pipeline, gives 9.7 % of peak for a 10 s step of GPT-3 175B on 128 GPUs); and a job that does not fit
its GPUs' memory is refused, the check `whatif llm` makes. A calibrated step whose math runs outside
15-80 % of the GPU's peak (its MFU: model FLOPs per second over peak) is warned about: NVIDIA's GPT-3
175B runs reach 53.5 % on 128 H100s (shared/reference/llm-published.md), and a value outside the band
usually means a wrong --gbs, --gpus, parallel layout or --precision.

Try it: `fabriclab calibrate step --model gpt3-175b --cluster dgx-h100 --gpus 128 --tp 4 --pp 8 --vp 6
--gbs 256 --tp-overlap --step-time 8.309s --out h100-gpt3.json`.
"""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer

from fabriclab.cli.common import FormatOption, JsonOption, Output, StoreOption, check_output_file, user_errors
from fabriclab.cli.llm_options import EtpOption, MoeDispatcherOption, OffloadOption, RecomputeModulesOption
from fabriclab.cli.llm_options import HostOption, MoeImbalanceOption, with_compute
from fabriclab.cli.llm_options import (AttentionOption, CpOption, DomainGpusOption, EpOption, EpOverlapOption,
                                       FsdpUnitOption, vary_cluster_options,
                                       GpuSpreadOption, GpusOption, GradDtypeOption, LlmJob, MbsOption, MemoryReserveOption, ModelOption,
                                       OrderOption, PpOption, PrecisionOption, RecomputeOption, SeqOption,
                                       ShardGroupOption, SpOption, TpOption, TpOverlapOption, VpOption, ZeroOption,
                                       llm_ignored, memory_options, step_options)
from fabriclab.cli.ignored import warn_ignored
from fabriclab.cli.options import ClusterOption, load_cluster_option

# The band outside which a calibrated efficiency is warned about (module docstring)
PLAUSIBLE = (0.15, 0.80)
GbsRequired = Annotated[str, typer.Option(
    "--gbs", metavar="N", help="Global batch size in sequences of the measured step (required: the step's work).")]
StepTimeOption = Annotated[Optional[str], typer.Option(
    "--step-time", metavar="TIME", help="The measured step time, e.g. 8.85 or 8.85s (or --tokens-per-s-per-gpu).")]
TokensOption = Annotated[Optional[str], typer.Option(
    "--tokens-per-s-per-gpu", metavar="RATE", help="The measured throughput per GPU, as published tables give it: "
                                                   "the step time is gbs x seq / rate / GPUs.")]


def measured_step_s(step_time: str | None, tokens_per_s_per_gpu: str | None, par) -> float:
    """The measured step in seconds from exactly one of `--step-time` and `--tokens-per-s-per-gpu` (tokens/s/GPU
    = gbs x seq / step time / GPUs); a ValueError says what to give."""
    from fabriclab.cli.options import parse_number
    from fabriclab.units import parse_time

    if (step_time is None) == (tokens_per_s_per_gpu is None):
        raise ValueError("give the measured step as one of --step-time (e.g. 8.85s) or --tokens-per-s-per-gpu "
                         "(e.g. 3955), not both or neither")
    if step_time is not None:
        return parse_time(step_time)
    rate = parse_number(tokens_per_s_per_gpu, "--tokens-per-s-per-gpu", example="3955")
    if rate <= 0:
        raise ValueError(f"--tokens-per-s-per-gpu {tokens_per_s_per_gpu}: give the measured tokens/s per GPU, > 0")
    return par.tokens_per_step / rate / par.num_gpus


def plausibility_warning(value: float, precision: str) -> str | None:
    """One line when a calibrated step's share of peak (its MFU) lies outside PLAUSIBLE, else None."""
    low, high = PLAUSIBLE
    if low <= value <= high:
        return None
    side = "below" if value < low else "above"
    return (f"warning: the measured step runs at {value:.1%} of {precision} peak (MFU), {side} the "
            f"{low:.0%}-{high:.0%} real training reaches: check --gbs, --gpus, the parallel options and "
            f"--precision against the run")


def register(app: typer.Typer) -> None:
    @app.command("step")
    @user_errors
    def step_cmd(out: Annotated[Path, typer.Option("--out", metavar="PATH", dir_okay=False,
                                                   help="Cluster file to write (JSON).")],
                 gbs: GbsRequired, step_time: StepTimeOption = None, tokens_per_s_per_gpu: TokensOption = None,
                 model: ModelOption = "llama3-8b", cluster: ClusterOption = None, gpus: GpusOption = "64",
                 tp: TpOption = "2", pp: PpOption = "1", vp: VpOption = "1", cp: CpOption = "1",
                 ep: EpOption = "1", mbs: MbsOption = "1", seq: SeqOption = None,
                 sequence_parallel: SpOption = True, zero: ZeroOption = "1", recompute: RecomputeOption = "none",
                 precision: PrecisionOption = "bf16", order: OrderOption = "tp-cp-dp-pp",
                 tp_overlap: TpOverlapOption = False, fsdp_unit: FsdpUnitOption = "1",
                 shard_group: ShardGroupOption = "0", ep_overlap: EpOverlapOption = False, host: HostOption = "te",
                 attention: AttentionOption = "flash", gpu_spread: GpuSpreadOption = None, etp: EtpOption = "1",
                 moe_imbalance: MoeImbalanceOption = "1", moe_dispatcher: MoeDispatcherOption = "alltoall",
                 recompute_modules: RecomputeModulesOption = None, offload_activations: OffloadOption = None,
                 grad_dtype: GradDtypeOption = "fp32", memory_reserve: MemoryReserveOption = None,
                 domain_gpus: DomainGpusOption = None, fmt: FormatOption = None, json_path: JsonOption = None,
                 store: StoreOption = None) -> None:
        """Store the compute scale that makes the simulated step last the measured time.

        The job's options and defaults are `whatif llm`'s; --gbs is required."""
        from fabriclab.cli.whatif.llm import print_answer
        from fabriclab.fabric.cluster import save_cluster
        from fabriclab.whatif.llm.run import calibrate_efficiency, with_efficiency

        check_output_file(out, "--out")
        output = Output(fmt, json_path, store)
        job = LlmJob.from_options(model, gpus, tp, pp, vp, cp, ep, mbs, gbs, seq, sequence_parallel, zero,
                                  recompute, precision, order, attention, etp, recompute_modules, offload_activations)
        seconds = measured_step_s(step_time, tokens_per_s_per_gpu, job.par)
        the_cluster = vary_cluster_options(load_cluster_option(cluster or "dgx-h100"), None, None, None, domain_gpus)
        options = with_compute(step_options(tp_overlap, fsdp_unit, shard_group, ep_overlap, gpu_spread, moe_dispatcher),
                               host, moe_imbalance, grad_dtype)
        warn_ignored(llm_ignored(job.par, locals()))
        mem_options = memory_options(grad_dtype, memory_reserve)
        fit = job.check_memory(the_cluster, options.shard_group, mem_options)
        value, answer = calibrate_efficiency(job.spec, job.par, the_cluster, seconds, options=options)
        answer.memory = replace(answer.memory, fit=fit)
        source = (f"measured: {job.spec.name}, {job.par.describe()}, {job.par.num_gpus} GPUs, step "
                  f"{seconds:g} s (calibrate step)")
        save_cluster(with_efficiency(the_cluster, job.par.precision, value, source,
                                     host_scale=answer.efficiency.host_scale), out)
        print_answer(output, answer)
        warning = plausibility_warning(answer.mfu, job.par.precision)
        for line in (f"compute: {answer.compute_line()}; cluster written to {out}", fit.warning, warning):
            if line:  # at 80 columns, a long path whole on its own line
                output.note(textwrap.fill(line, width=80, subsequent_indent="  ", break_on_hyphens=False,
                                          break_long_words=False))
        output.record("calibrate.step", {**job.config(), "cluster": cluster or "dgx-h100", "step_time_s": seconds,
                                         "tp_overlap": tp_overlap, "fsdp_unit": options.fsdp_unit,
                                         "shard_group": options.shard_group, "ep_overlap": ep_overlap,
                                         "grad_dtype": grad_dtype, "memory_reserve_bytes": mem_options.reserve_bytes,
                                         "host": options.host, "moe_imbalance": options.moe_imbalance, "out": str(out)},
                      {"efficiency": value, "host_scale": answer.efficiency.host_scale,
                       "precision": job.par.precision, "efficiency_warning": warning,
                       "memory_warning": fit.warning, **answer.summary()})
