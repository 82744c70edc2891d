"""`fabriclab stencil run|simulate` (registered on a test app, as `cli/main.py` will): output, records, errors."""

import csv
import io
import json

import typer
from typer.testing import CliRunner

from fabriclab.cli import stencil

runner = CliRunner()


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """fabriclab (test app)."""

    stencil.register(app)
    return app


def invoke(*args: str):
    return runner.invoke(_app(), list(args))


def test_run_prints_the_split_and_writes_a_record(tmp_path):
    result = invoke("stencil", "run", "--np", "2", "--cells", "16", "--steps", "3", "--json",
                    str(tmp_path / "run.json"))
    assert result.exit_code == 0, result.output
    assert "grid 2x1x1" in result.stdout and "communication" in result.stdout
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["kind"] == "stencil.run" and record["results"]["num_ranks"] == 2


def test_simulate_writes_table_record_and_figure(tmp_path):
    result = invoke("stencil", "simulate", "--ranks", "64,256", "--cells", "64", "--fabrics", "25gbe",
                    "--out", str(tmp_path), "--format", "csv")
    assert result.exit_code == 0, result.output
    table = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["fabric"], r["ranks"], r["grid"]) for r in table] == [("25gbe", "64", "4x4x4"), ("25gbe", "256", "8x8x4")]
    rows = json.loads((tmp_path / "stencil_sim.json").read_text())["results"]
    assert [r["num_ranks"] for r in rows] == [64, 256] and rows[0]["racks"] == 2
    assert (tmp_path / "stencil_sim.png").stat().st_size > 0


def test_bad_rank_count_is_one_line():
    result = invoke("stencil", "simulate", "--ranks", "3", "--cells", "16")
    assert result.exit_code == 2
    assert "3 ranks cannot split 16x16x16 cells" in result.stderr


def test_run_as_json_is_one_table_of_the_split(tmp_path):
    result = invoke("stencil", "run", "--np", "2", "--cells", "8", "--steps", "2", "--format", "json")
    assert result.exit_code == 0, result.output
    table = json.loads(result.stdout)
    assert table["rows"][0]["ranks"] == "2" and table["rows"][0]["grid"] == "2x1x1"


def test_a_rank_count_that_cannot_split_the_cube_is_refused_at_once():
    result = invoke("stencil", "simulate", "--ranks", "262143", "--cells", "128")
    assert result.exit_code == 2
    assert "262143 ranks cannot split 128x128x128 cells" in result.stderr and "e.g. 262144" in result.stderr
