"""`fabriclab validate published` from the command line: a table as JSON, a record, bad input (the rows
and predictions themselves: tests/bench/test_published.py)."""

import json

import typer
from typer.testing import CliRunner


def _app():
    from fabriclab.cli.validate import published as validate_published

    app = typer.Typer()

    @app.callback()
    def main():
        """validate"""

    validate_published.register(app)
    return app


def test_cli_json_and_bad_input(monkeypatch, tmp_path):
    monkeypatch.setenv("FABRICLAB_STORE", "off")
    runner = CliRunner()
    result = runner.invoke(_app(), ["published", "--rows", "zhang-r50-2srv-1g", "--models", "both",
                                    "--no-details", "--format", "json"])
    assert result.exit_code == 0, result.output
    table = json.loads(result.stdout.splitlines()[0])
    assert table["rows"][0]["row"] == "zhang-r50-2srv-1g" and table["rows"][0]["before"] == "0.080"
    record = tmp_path / "r.json"
    result = runner.invoke(_app(), ["published", "--rows", "samsi-cartdg", "--models", "mechanisms",
                                    "--json", str(record), "--format", "plain"])
    assert result.exit_code == 0, result.output
    row = json.loads(record.read_text())["results"]["rows"][0]
    assert row["mechanisms_inputs"] and "baseline" not in row
    bad = runner.invoke(_app(), ["published", "--models", "some"])
    assert bad.exit_code == 2 and "--models" in bad.output
    none = runner.invoke(_app(), ["published", "--rows", "nobody-"])
    assert none.exit_code == 2 and "no published row" in none.output
