"""`fabriclab simulate jobs`: jobs sharing a cluster's fabric, one row each; bad inputs are one error line."""

import json

import pytest
import typer
from typer.testing import CliRunner

from fabriclab.cli import simulate_jobs


def _app() -> typer.Typer:
    """A `simulate` group holding only `jobs`, as `cli/simulate.py`'s register adds it."""
    app, simulate = typer.Typer(), typer.Typer()
    simulate_jobs.register(simulate)
    app.add_typer(simulate, name="simulate")
    return app


APP = _app()
META = ["simulate", "jobs", "--cluster", "dgx-h100", "--fabric", "fat-tree", "--placement", "interleaved",
        "--job", "allreduce:64:256MiB", "--job", "allreduce:64:256MiB", "--store", "off"]


def test_one_row_per_job_with_its_slowdown(tmp_path):
    out = tmp_path / "jobs.json"
    res = CliRunner().invoke(APP, META + ["--routing", "ecmp", "--seeds", "4", "--json", str(out)],
                             env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    rows = [line for line in res.output.splitlines() if line.lstrip().startswith("allreduce")]
    table = [line for line in res.output.splitlines() if not line.startswith("record written")]
    assert len(rows) == 2 and all(len(line) <= 80 for line in table)
    rec = json.loads(out.read_text())
    assert rec["config"]["routing"] == "ecmp" and rec["config"]["seeds"] == 4
    assert rec["config"]["jobs"][0] == {"collective": "allreduce", "num_gpus": 64, "size_bytes": 256 << 20}
    first = rec["results"][0]
    assert len(first["slowdowns"]) == 4 and first["leaves_median"] == 4 and first["num_servers"] == 8
    assert f"{first['slowdown_median']:.2f}" in rows[0]


def test_json_to_stdout_is_the_record():
    res = CliRunner().invoke(APP, META + ["--routing", "ideal", "--json", "-"])
    assert res.exit_code == 0, res.output
    start = res.stdout.index("{")
    rec = json.loads(res.stdout[start:])
    assert [r["slowdown_median"] for r in rec["results"]] == [1.0, 1.0]


@pytest.mark.parametrize("args, words", [
    (["--job", "allreduce:64"], "--job 'allreduce:64': give COLLECTIVE:GPUS:SIZE"),
    (["--job", "gather:64:1MB"], "--job 'gather:64:1MB': collective"),
    (["--job", "allreduce:60:1MB"], "whole servers"),
    (["--job", "allreduce:64:lots"], "invalid size"),
    (["--job", "allreduce:64:1MB", "--busy", "1"], "--busy 1: give a share"),
    (["--job", "allreduce:64:1MB", "--busy", "-0.5"], "--busy -0.5"),
    (["--job", "allreduce:64:1MB", "--servers", "4"], "--servers 4: the jobs take 8 servers"),
    (["--job", "allreduce:64:1MB", "--routing", "spray"], "--routing 'spray'"),
    (["--job", "allreduce:64:1MB", "--placement", "random"], "--placement 'random'"),
    ([], "at least one --job")])
def test_bad_inputs_are_one_error_line(args, words):
    res = CliRunner().invoke(APP, ["simulate", "jobs", "--cluster", "dgx-h100", "--store", "off"] + args)
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert lines[0].startswith("error: ") and words in res.output
