"""`fabriclab whatif llm` and `calibrate step` end to end: record, files, errors."""

import json
import os
import subprocess
import traceback

from typer.testing import CliRunner

from fabriclab.cli.main import app

ARGS = ["--gpus", "16", "--tp", "2", "--pp", "2", "--gbs", "32", "--seq", "2048"]


def fabriclab(*argv, cwd=None) -> subprocess.CompletedProcess:
    """`fabriclab *argv` in `cwd` with the results store off, as a finished process: its exit code, stdout and
    stderr (an exception's traceback on stderr, exit code 1). Run in this process (CliRunner), as the tests that
    use it check what a command answers and prints, not how a process ends (test_bad_inputs_*.py and
    test_no_torch.py run whole processes); 80 columns, what a command in a pipe gets."""
    here = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, [str(a) for a in argv], env={"FABRICLAB_STORE": "off", "COLUMNS": "80"},
                                    prog_name="fabriclab")
    finally:
        os.chdir(here)
    err = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        err += "".join(traceback.format_exception(*result.exc_info))
    return subprocess.CompletedProcess(["fabriclab", *argv], result.exit_code, result.stdout, err)


def test_whatif_llm_prints_the_step_and_records_it_with_its_files(tmp_path):
    done = fabriclab("whatif", "llm", *ARGS, "--bandwidth", "200Gbps,800Gbps", "--json", str(tmp_path / "r.json"),
                     "--trace", str(tmp_path / "t.json"))
    assert done.returncode == 0, done.stderr
    assert "step time" in done.stdout and "tokens/s" in done.stdout and "MFU" in done.stdout
    assert "not measured" in done.stdout  # the preset holds no measured efficiency: said so
    # 80 columns, but for a line that is one long file name
    assert max(len(line) for line in done.stdout.splitlines() if str(tmp_path) not in line) <= 80
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["kind"] == "whatif.llm" and record["step_time_s"] > 0
    assert record["results"]["split_s"]["compute"] > 0 and len(record["results"]["bandwidth_sweep"]) == 2
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]


def test_calibrate_step_stores_the_efficiency_that_whatif_then_uses(tmp_path):
    out = tmp_path / "c.json"
    done = fabriclab("calibrate", "step", "--model", "llama3-8b", *ARGS, "--step-time", "3.0s", "--out", str(out))
    assert done.returncode == 0, done.stderr
    cluster = json.loads(out.read_text())
    assert 0 < cluster["compute"]["scale"]["bf16"] <= 2 and "bf16" not in cluster["compute"]["efficiency"]
    again = fabriclab("whatif", "llm", "--cluster", str(out), *ARGS, "--json", str(tmp_path / "r.json"))
    assert again.returncode == 0, again.stderr
    assert abs(json.loads((tmp_path / "r.json").read_text())["step_time_s"] - 3.0) < 3.0 * 1e-3
    assert "measured" in again.stdout and "calibrate step" in again.stdout


def test_bad_parallel_options_are_one_line_errors():
    for argv, words in ((["--tp", "3"], "multiple of tp"), (["--gbs", "5"], "--gbs 5"),
                        (["--model", "no-such-model"], "no-such-model"), (["--ep", "3"], "--ep 3"),
                        (["--precision", "fp4"], "--precision")):
        done = fabriclab("whatif", "llm", "--gpus", "16", *argv)
        assert done.returncode != 0
        assert words in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_whatif_llm_every_stage_every_rank_and_the_options_of_the_program(tmp_path):
    done = fabriclab("whatif", "llm", "--model", "deepseek-v3", "--gpus", "2048", "--tp", "1", "--pp", "16", "--ep",
                     "64", "--gbs", "4096", "--seq", "4096", "--recompute", "full", "--per-stage", "--json",
                     str(tmp_path / "r.json"), "--trace", str(tmp_path / "t.json"), "--trace-stage", "all")
    assert done.returncode == 0, done.stderr
    assert "every pipeline stage" in done.stdout and "slowest pipeline stage" in done.stdout
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    stages = results["stages"]
    assert len(stages) == 16 and (stages[0]["num_moe_layers"], stages[1]["num_moe_layers"]) == (1, 4)
    assert stages[0]["ep"] < stages[1]["ep"] and results["slowest_stage"] != 0
    assert {e["pid"] for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"]} == set(range(16))
    chakra = fabriclab("whatif", "llm", *ARGS, "--zero", "3", "--shard-group", "2", "--fsdp-unit", "4",
                       "--chakra", str(tmp_path / "et" / "step"))
    assert chakra.returncode == 0, chakra.stderr
    assert sorted(p.name for p in (tmp_path / "et").iterdir() if p.suffix == ".et") == \
        sorted(f"step.{r}.et" for r in range(16))


def test_whatif_llm_refuses_what_it_cannot_do_before_the_work(tmp_path):
    for argv, words in ((["--zero", "1", "--shard-group", "2"], "--zero 3"),
                        (["--zero", "3", "--shard-group", "3"], "must divide"),
                        (["--fsdp-unit", "x"], "--fsdp-unit"),
                        (["--trace", str(tmp_path / "t.json"), "--trace-stage", "7"], "--trace-stage"),
                        (["--chakra", "/proc/nope/x"], "--chakra")):
        done = fabriclab("whatif", "llm", *ARGS, *argv)
        assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, (argv, done.stderr)
    big = fabriclab("whatif", "llm", "--model", "llama3-405b", "--gpus", "16384", "--tp", "8", "--pp", "16",
                    "--gbs", "2048", "--recompute", "full", "--chakra", str(tmp_path / "big" / "x"))
    assert big.returncode == 2 and "8,000,000" in big.stderr and "step time" not in big.stdout
    assert not (tmp_path / "big").exists()
