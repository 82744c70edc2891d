"""`fabriclab validate emulated --from-record`: the report of a recorded validation, without root."""

import json

import typer
from typer.testing import CliRunner

from fabriclab.cli import validate
from fabriclab.record import make_record

runner = CliRunner()


def _row(algo: str, size: int, err: float) -> dict:
    return {"topology": "star", "algo": algo, "size_bytes": size, "measured_s": 0.1, "plain_s": 0.08,
            "model_s": 0.1 * (1 + err / 100), "err_plain_pct": -20.0, "err_model_pct": err, "iters": 3,
            "times_s": [0.1, 0.1, 0.1], "num_wrong": 0}


def test_from_record_reports_and_writes_the_note(tmp_path):
    rows = [_row("ring", 1 << 20, 3.0), _row("direct", 16 << 20, -15.0), _row("ring", 1024, -80.0)]
    path = tmp_path / "validate.json"
    path.write_text(json.dumps(make_record("validate", {"runs": []},
                                           {"runs": [{"topology_name": "star(hosts=4)", "rows": rows}]})))
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """fabriclab (test app)."""

    validate.register(app)
    result = runner.invoke(app, ["validate", "emulated", "--from-record", str(path), "--out", str(tmp_path / "out")],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "model: 1/2 rows >= 1MB within 10%" in result.stdout
    note = (tmp_path / "out" / "validate.md").read_text()
    assert "| star | direct | 16MB |" in note and "Where the gaps come from" in note
    assert (tmp_path / "out" / "validate.png").stat().st_size > 0
