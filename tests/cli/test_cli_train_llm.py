"""`fabriclab train --model gpt-tiny ...`: the transformer trainer from the command line (record, trace, errors)."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from fabriclab.cli import data as data_cli
from fabriclab.cli import train as train_cli
from fabriclab.whatif.llm.trace import THREADS

app = typer.Typer()
train_cli.register(app)
data_cli.register(app)  # two commands, so `train` is a subcommand as in the real app
runner = CliRunner()


def test_train_gpt_tiny_tp2_writes_losses_communicators_and_a_trace_in_the_simulators_format(tmp_path):
    record, trace = tmp_path / "run.json", tmp_path / "trace.json"
    result = runner.invoke(app, ["train", "--model", "gpt-tiny", "--np", "2", "--tp", "2", "--gbs", "4", "--seq", "32",
                                 "--steps", "2", "--warmup", "1", "--trace", str(trace), "--json", str(record),
                                 "--format", "plain"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "loss per step" in result.stdout and "bubble" in result.stdout
    results = json.loads(record.read_text())["results"]
    assert len(results["losses"]) == 3 and len(results["step_times_s"]) == 2
    assert results["bytes_per_step"]["tp"] > 0 and results["split_s"]["tp"] > 0
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names == set(THREADS) and {e["pid"] for e in events} == {0, 1}
    assert any(e["name"].startswith("F chunk 0 mb") for e in events)


def test_train_options_of_the_wrong_model_kind_are_one_clean_line():
    result = runner.invoke(app, ["train", "--model", "resnet50", "--tp", "2"])
    assert result.exit_code == 2 and "options of transformer models" in result.output
    result = runner.invoke(app, ["train", "--model", "gpt-tiny", "--np", "2", "--ep", "2"])
    assert result.exit_code == 2 and "needs an MoE model" in result.output


def test_bench_train_llm_prints_the_ratio_against_the_plain_loop(tmp_path):
    from fabriclab.cli.bench import train_llm as bench_cli

    bench = typer.Typer()
    bench_cli.register(bench)
    bench.command("noop")(lambda: None)  # two commands, so `train-llm` is a subcommand
    record = tmp_path / "bench.json"
    result = runner.invoke(bench, ["train-llm", "--gbs", "4", "--mbs", "2", "--steps", "2", "--warmup", "1",
                                   "--rounds", "1", "--no-tp", "--json", str(record), "--format", "plain"],
                           catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "ours / peer" in result.stdout and "plain loop" in result.stdout
    results = json.loads(record.read_text())["results"]
    assert results["one_rank"]["losses_agree"] and results["one_rank"]["ratio"] > 0


def test_the_simulators_job_and_the_trainer_refuse_with_the_same_message():
    """Issue 38: `whatif llm` (through LlmJob) and the trainer's own check (check_model) refused different
    splits; both now call workload/job.check_job."""
    pytest.importorskip("torch")
    from fabriclab.cli.llm_options import LlmJob
    from fabriclab.runtime.llm.model import check_model
    from fabriclab.workload.job import job_problem
    from fabriclab.workload.parallel import ParallelConfig
    from fabriclab.workload.transformer import load_model

    spec, split = load_model("moe-tiny"), ParallelConfig(num_gpus=6, ep=3, gbs=6, seq=64)
    with pytest.raises(ValueError) as simulated:
        LlmJob.from_options("moe-tiny", "6", "1", "1", "1", "1", "3", "1", "6", "64", True, "0", "none", "bf16",
                            "tp-cp-dp-pp")
    with pytest.raises(ValueError) as trained:
        check_model(spec, split)
    assert str(simulated.value) == str(trained.value) == job_problem(spec, split)
