"""Commands at 80 columns (COLUMNS=80, never the real terminal's width): tables, not one block per row;
no line wider than 80; every number of the record printed whole."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from fabriclab.cli.main import app

ENV = {"COLUMNS": "80", "FABRICLAB_STORE": "off"}


def test_whatif_of_60_rows_stays_a_table_at_80_columns(tmp_path):
    record = tmp_path / "w.json"
    result = CliRunner().invoke(app, ["whatif", "--profile", "resnet50,vgg16", "--workers", "16,32",
                                      "--compression", "1,2,5", "--format", "table", "--json", str(record)], env=ENV)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 80 and "-- row" not in result.stdout
    assert len(lines) < 150  # was 664 as one block per row
    assert lines[1] == "algo: -"  # the constant column, once
    rows = json.loads(record.read_text())["results"]
    assert len(rows) == 60
    for r in rows:
        assert f"{r['scaling_factor']:.4f}" in result.stdout and f"{r['iteration_s'] * 1e3:.2f}" in result.stdout


def test_validate_published_first_table_is_side_by_side_at_80_columns():
    result = CliRunner().invoke(app, ["validate", "published", "--rows", "zhang-,awan-", "--format", "table"],
                                env=ENV)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    first = lines[: next(i for i, line in enumerate(lines) if line.startswith("before"))]
    assert "-- row" not in "\n".join(first)
    assert any("zhang-r50-2srv-100g" in line and "0.750" in line and "+24.8 pt *" in line for line in first)


def test_a_pipe_folds_notes_and_pads_no_line_to_the_longest():
    result = CliRunner().invoke(app, ["validate", "published", "--rows", "awan-", "--format", "plain"], env=ENV)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    at = lines.index("# how each prediction was made")
    header, rows = lines[at + 1], lines[at + 2:]
    rows = rows[: next((i for i, line in enumerate(rows) if line.startswith("#")), len(rows))]
    assert header.startswith("# row ") and "  model   note" in header  # text columns left-aligned
    assert all(line[2:].startswith("awan-") or line.startswith(" " * 12) for line in rows)  # notes fold
    assert not any(line.endswith(" ") for line in rows) and max(map(len, rows)) <= 160
    widths = sorted(len(line) for line in rows)
    assert widths[0] < widths[-1] - 60  # a long note folds in its own column: no line padded to the longest


def test_notes_wrap_on_a_terminal_and_stay_whole_in_a_pipe(monkeypatch):
    import io

    from fabriclab.cli.common import wrap_for_terminal

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setenv("COLUMNS", "40")
    text = "resnet50 at 4096 GPUs: the cheapest option that reaches 0.90 is NDR at 1,022,925.125 images/s"
    wrapped = wrap_for_terminal(text, Tty())
    assert all(len(line) <= 40 for line in wrapped.splitlines()) and "1,022,925.125" in wrapped
    assert wrapped.replace("\n  ", " ") == text
    assert wrap_for_terminal(text, io.StringIO()) == text  # a pipe: one line, whole
