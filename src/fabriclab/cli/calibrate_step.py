"""`fabriclab calibrate step`: the compute efficiency of a GPU from one measured training step.

Give the model, the parallel options and the cluster of a run you measured and its step time; the LLM
simulator (`whatif/llm`) finds the share of the GPU's peak at which its simulated step lasts as long
(bisection), and writes the cluster with that efficiency for the run's precision into `--out`, with the
measurement it came from. `whatif llm` and `plan` then use it and say so.

Try it: `fabriclab calibrate step --model gpt3-175b --cluster dgx-h100 --gpus 128 --tp 4 --pp 8 --vp 6
--gbs 256 --tp-overlap --step-time 8.309s --out h100-gpt3.json`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fabriclab.cli.common import FormatOption, JsonOption, Output, StoreOption, check_output_path, user_errors
from fabriclab.cli.llm_options import (CpOption, EpOption, GbsOption, GpusOption, LlmJob, MbsOption,
                                       ModelOption, OrderOption, PpOption, PrecisionOption, RecomputeOption,
                                       SeqOption, SpOption, TpOption, TpOverlapOption, VpOption, ZeroOption)
from fabriclab.cli.options import ClusterOption, load_cluster_option


def register(app: typer.Typer) -> None:
    @app.command("step")
    @user_errors
    def step_cmd(step_time: Annotated[str, typer.Option("--step-time", metavar="TIME",
                                                        help="The measured step time, e.g. 8.85 or 8.85s.")],
                 out: Annotated[Path, typer.Option("--out", metavar="PATH", dir_okay=False,
                                                   help="Cluster file to write (JSON).")],
                 model: ModelOption = "gpt3-175b", cluster: ClusterOption = None, gpus: GpusOption = "128",
                 tp: TpOption = "1", pp: PpOption = "1", vp: VpOption = "1", cp: CpOption = "1",
                 ep: EpOption = "1", mbs: MbsOption = "1", gbs: GbsOption = None, seq: SeqOption = None,
                 sequence_parallel: SpOption = True, zero: ZeroOption = "1", recompute: RecomputeOption = "none",
                 precision: PrecisionOption = "bf16", order: OrderOption = "tp-cp-dp-pp",
                 tp_overlap: TpOverlapOption = False, fmt: FormatOption = None, json_path: JsonOption = None,
                 store: StoreOption = None) -> None:
        """Store the compute efficiency that makes the simulated step last the measured time."""
        from fabriclab.cli.whatif_llm import print_answer
        from fabriclab.fabric.cluster import save_cluster
        from fabriclab.units import parse_time
        from fabriclab.whatif.llm.run import calibrate_efficiency, with_efficiency
        from fabriclab.whatif.llm.step import StepOptions

        check_output_path(out, "--out")
        output = Output(fmt, json_path, store)
        job = LlmJob.from_options(model, gpus, tp, pp, vp, cp, ep, mbs, gbs, seq, sequence_parallel, zero,
                                  recompute, precision, order)
        seconds = parse_time(step_time)
        the_cluster = load_cluster_option(cluster or "dgx-h100")
        job.check_memory(the_cluster)
        value, answer = calibrate_efficiency(job.spec, job.par, the_cluster, seconds,
                                             options=StepOptions(tp_overlap=tp_overlap))
        source = (f"measured: {job.spec.name}, {job.par.describe()}, {job.par.num_gpus} GPUs, step "
                  f"{seconds:g} s (calibrate step)")
        save_cluster(with_efficiency(the_cluster, job.par.precision, value, source), out)
        print_answer(output, answer)
        output.note(f"compute efficiency {value:.4f} of {job.par.precision} peak; cluster written to {out}")
        output.record("calibrate.step", {**job.config(), "cluster": cluster or "dgx-h100", "step_time_s": seconds,
                                         "tp_overlap": tp_overlap, "out": str(out)},
                      {"efficiency": value, "precision": job.par.precision, **answer.summary()})
