"""Goodput on the command line: `whatif llm` prints it beside the step and records it, its options are checked
before anything is printed, and `plan --rank goodput` ranks by goodput per dollar while showing the step's."""

import json

import pytest

from tests.cli.test_cli_whatif_llm import ARGS, fabriclab

FIELDS = ("interruptions_per_day", "checkpoint_interval_s", "goodput_tokens_per_s", "effective_training_time")


def test_whatif_llm_prints_goodput_beside_the_step_and_records_it(tmp_path):
    done = fabriclab("whatif", "llm", *ARGS, "--json", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stderr
    assert "interruptions a day" in done.stdout and "checkpoint:" in done.stdout
    assert "effective training time" in done.stdout and "goodput" in done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) <= 80
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    assert all(results[k] > 0 for k in FIELDS)
    assert results["goodput_tokens_per_s"] == pytest.approx(results["tokens_per_s"]
                                                            * results["effective_training_time"])
    assert results["failure_rates"] == "llama3" and results["checkpoint_asynchronous"] is False


def test_the_options_change_what_they_name(tmp_path):
    runs = {}
    for name, extra in (("sync", []), ("async", ["--async-checkpoint"]), ("hour", ["--checkpoint-interval", "1h"]),
                        ("slow", ["--storage-bandwidth", "10GB/s", "--restart-time", "30min"]),
                        ("rsc1", ["--failure-rates", "rsc1"])):
        done = fabriclab("whatif", "llm", *ARGS, *extra, "--json", str(tmp_path / f"{name}.json"))
        assert done.returncode == 0, done.stderr
        runs[name] = json.loads((tmp_path / f"{name}.json").read_text())["results"]
    assert runs["async"]["checkpoint_pause_s"] < runs["sync"]["checkpoint_pause_s"]
    assert runs["hour"]["checkpoint_interval_rule"] == "given"
    assert abs(runs["hour"]["checkpoint_interval_s"] - 3600) <= runs["hour"]["step_time_s"]
    sync = runs["sync"]
    rate = min(2 * sync["storage_per_server_Bps"], sync["storage_total_Bps"])  # 16 GPUs: two servers' paths
    assert runs["slow"]["checkpoint_write_s"] == pytest.approx(sync["checkpoint_write_s"] * rate / 10e9)
    assert runs["slow"]["restart_s"] == pytest.approx(1800 + runs["slow"]["checkpoint_read_s"])  # no repair waits
    assert runs["rsc1"]["unexpected_per_day"] > runs["sync"]["unexpected_per_day"]


@pytest.mark.parametrize("option,value,said", [("--checkpoint-interval", "soon", "--checkpoint-interval"),
                                               ("--checkpoint-interval", "0", "--checkpoint-interval"),
                                               ("--restart-time", "-5min", "--restart-time"),
                                               ("--storage-bandwidth", "fast", "--storage-bandwidth"),
                                               ("--failure-rates", "meta", "--failure-rates")])
def test_a_bad_goodput_option_is_refused_before_anything_is_printed(option, value, said):
    done = fabriclab("whatif", "llm", *ARGS, option, value)
    assert done.returncode != 0 and said in done.stderr + done.stdout
    assert "step time" not in done.stdout


PLAN = ["plan", "--model", "llama3-8b", "--gpus", "256", "--clusters", "dgx-h100", "--tp", "1", "--pp", "1"]


def test_plan_ranks_by_goodput_per_dollar_and_shows_both(tmp_path):
    done = fabriclab(*PLAN, "--rank", "goodput", "--json", str(tmp_path / "p.json"))
    assert done.returncode == 0, done.stderr
    assert "lowest cost per token/s" in done.stdout  # the step's ranking stays
    assert "by goodput per dollar" in done.stdout and "$/(gp tok/s)" in done.stdout
    record = json.loads((tmp_path / "p.json").read_text())
    assert record["config"]["rank"] == "goodput"
    row = record["results"]["rows"][0]
    assert all(row[k] > 0 for k in FIELDS) and row["goodput_cluster_usd"] >= row["cluster_usd"]
    assert [o["choice"] for o in row["resilience_options"]] == ["as built", "single ToR", "dual ToR"]
    plain = fabriclab(*PLAN, "--json", str(tmp_path / "q.json"))
    assert plain.returncode == 0 and "goodput" not in plain.stdout
    assert "goodput_tokens_per_s" not in json.loads((tmp_path / "q.json").read_text())["results"]["rows"][0]


def test_plan_rank_is_checked():
    done = fabriclab(*PLAN, "--rank", "speed")
    assert done.returncode != 0 and "--rank 'speed'" in done.stderr + done.stdout
    cnn = fabriclab("plan", "--model", "resnet50", "--gpus", "64", "--rank", "goodput")
    assert cnn.returncode != 0 and "--rank applies to an LLM plan" in cnn.stderr + cnn.stdout
