"""`--routing`, `--qps`, `--transport` and `--seeds` on `simulate collective --cluster` (`cli/routing_options.py`):
the median and 90th percentile in the record, one clear line for a bad value."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from fabriclab.cli.main import app


def test_simulate_collective_reports_median_and_p90(tmp_path):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["simulate", "collective", "--cluster", "roce-h100", "--gpus", "64",
                                      "--sizes", "256MB", "--collective", "allreduce", "--seeds", "4",
                                      "--json", str(out), "--store", str(tmp_path / "s.db")], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    record = json.loads(out.read_text())
    row = record["results"][0]
    assert row["time_us_p90"] > row["time_us"] > 0  # these 4 draws differ
    assert record["config"]["routing"] == "ecmp" and record["config"]["seeds"] == 4


def test_bad_routing_options_get_one_line():
    for args, text in ((["--routing", "spray"], "--routing 'spray'"), (["--transport", "tcp"], "--transport"),
                       (["--qps", "0"], "--qps")):
        result = CliRunner().invoke(app, ["simulate", "collective", "--cluster", "roce-h100", *args])
        assert result.exit_code == 2 and text in result.output, result.output


def test_placement_options_on_a_cluster():
    for args, text in ((["--busy", "0.5"], "--busy goes with --placement scattered"),
                       (["--placement", "scattered", "--busy", "1.5"], "--busy '1.5'"),
                       (["--placement", "round-robin"], "--placement 'round-robin'")):
        result = CliRunner().invoke(app, ["simulate", "collective", "--cluster", "roce-h100", *args])
        assert result.exit_code == 2 and text in result.output, result.output
    result = CliRunner().invoke(app, ["whatif", "llm", "--model", "llama3-8b", "--gpus", "64", "--cluster",
                                      "roce-h100", "--placement", "scattered", "--busy", "0.5", "--seeds", "2"],
                                env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "over 2 draws of the hashes and servers" in result.output
