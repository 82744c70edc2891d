"""`fabriclab bench astra-sim`: bad input is one error line (always); where ASTRA-sim's binary is here, the
default case prints both step times, every rank finished, and writes its record.

The group is registered on a fresh app here, so the tests do not depend on `cli/main.py`'s wiring.
"""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from fabriclab.cli import bench as bench_cli

runner = CliRunner()


@pytest.fixture(scope="module")
def app(make_group_app) -> typer.Typer:
    return make_group_app(bench_cli)


def astra_binary():
    from fabriclab.bench.astra.run import find_binary

    try:
        return find_binary()
    except ValueError:
        return None


def invoke(app, *args: str, env: dict | None = None):
    return runner.invoke(app, ["bench", "astra-sim", *args], env={"COLUMNS": "200", **(env or {})})


@pytest.mark.parametrize("args, fragment", [
    (["--astra-sim", "/nonexistent/astra"], "--astra-sim /nonexistent/astra: no executable ASTRA-sim"),
    (["--timeout", "0s"], "--timeout 0s"),
    (["--efficiency", "2"], "--efficiency 2"),
    (["--gpus", "16", "--tp", "3"], "--tp"),
    (["--model", "no-such-model"], "no-such-model"),
])
def test_bad_input_is_one_error_line(app, args, fragment):
    result = invoke(app, *args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr


def test_without_the_binary_the_error_says_how_to_give_it(app, tmp_path):
    result = invoke(app, env={"FABRICLAB_ASTRA_SIM": str(tmp_path)})
    assert result.exit_code == 2 and "FABRICLAB_ASTRA_SIM" in result.stderr and "--astra-sim" in result.stderr


@pytest.mark.skipif(astra_binary() is None, reason="ASTRA-sim's analytical binary is not here (set "
                    "FABRICLAB_ASTRA_SIM, or build it into ../shared/tools/astra-sim/bin)")
def test_the_default_case_runs_in_both_tools(app, tmp_path):
    result = invoke(app, "--gbs", "16", "--seq", "4096", "--out", str(tmp_path / "kept"), "--json",
                    str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    assert "ASTRA-sim" in result.stdout and "16/16" in result.stdout and "each collective alone" in result.stdout
    record = json.loads((tmp_path / "r.json").read_text())
    results = record["results"]
    assert record["config"]["model"] == "llama3-8b" and record["config"]["tp"] == 2 and record["config"]["pp"] == 2
    assert results["ratio"] == pytest.approx(1.0, abs=0.05) and results["astra_sim"]["unfinished"] == []
    assert (tmp_path / "kept" / "trace.15.et").exists() and (tmp_path / "kept" / "network.yml").exists()
