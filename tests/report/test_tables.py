"""The table printer at 80 columns and in a pipe: constant columns move into a line above the table, long
text wraps in its column, numbers stay whole and right-aligned, text is left-aligned, and a long text
cell pads no other line (widths are given, never read from the terminal)."""

from __future__ import annotations

import io

from rich.table import Table

from fabriclab.report.tables import TEXT_CAP, is_number, plain_text, render

NOTE = ("servers share a NIC; NCCL 2.4 tree; Horovod loop; per-tensor and TCP overhead; one run each: a model "
        "not better with more servers misses one of the two")


def _table(rows: int = 60) -> Table:
    table = Table(title="what-if: fusion time-or-size")
    for name in ("model", "workers", "Gbps", "compression", "algo", "iteration (ms)", "overhead (ms)",
                 "exposed", "buckets", "scaling factor", "note"):
        table.add_column(name)
    for i in range(rows):
        table.add_row("resnet50", str(16 << (i % 3)), str(i), "1", "ring-addest", f"{1604.123456 + i:.6f}",
                      f"{1476.01 + i:.2f}", "96%", "12", f"{0.0798 + i / 1000:.4f}", NOTE if i == 7 else "ok")
    return table


def _render(table: Table, fmt: str = "table", width: int = 80) -> str:
    buf = io.StringIO()
    render(table, fmt, buf, width=width)
    return buf.getvalue()


def test_80_columns_move_constant_columns_up_and_wrap_text_but_keep_numbers_whole():
    text = _render(_table())
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80
    assert lines[0] == "what-if: fusion time-or-size"
    assert lines[1] == "model: resnet50; compression: 1; algo: ring-addest; exposed: 96%; buckets: 12"
    assert "-- row" not in text  # a table, not one block per row
    assert len(lines) < 60 + 20  # one line per row, a few more for the wrapped note and the box
    for i in range(60):
        assert f"{1604.123456 + i:.6f}" in text and f"{0.0798 + i / 1000:.4f}" in text  # never cut
    words = " ".join(line.strip("│ ") for line in lines)
    assert "misses one of the two" in " ".join(words.split())  # the long note, wrapped, all there


def test_a_table_too_wide_for_any_table_form_is_stacked_with_every_value():
    table = Table(title="t")
    for name in ("a", "b"):
        table.add_column(name)
    table.add_row("x" * 50, "1" * 45)
    table.add_row("y", "2")
    text = _render(table, width=60)
    assert "-- row 1 of 2" in text and "1" * 45 in text and "x" * 50 in text


def test_a_pipe_aligns_text_left_and_numbers_right_and_pads_no_line_for_a_long_cell():
    text = _render(_table(10), "plain")
    lines = text.splitlines()
    header, first = lines[1], lines[2]
    assert header.startswith("# model     workers")  # text left, header over it
    assert first.startswith("  resnet50       16")  # numbers right-aligned under their header
    long_line = next(line for line in lines if NOTE in line)
    assert len(long_line) < len(NOTE) + 140
    assert all(len(line) <= len(header) for line in lines[2:] if NOTE not in line)  # only the note's line is long
    assert all(line.endswith("ok") for line in lines[2:] if NOTE not in line)


def test_numbers_with_units_and_marks_read_as_numbers():
    assert all(is_number(t) for t in ("0.750", "-2.6 pt *", "12.78 %", "1.00x", "8.309 s", "1,024", "1e-05",
                                      "16 MB", "+24.8 pt"))
    assert not any(is_number(t) for t in ("resnet50", "ring-addest", "Sec. 2.2", "2 x 8 V100", ""))
    assert plain_text("", ["a"], [["z" * (TEXT_CAP + 5)], ["b"]]).splitlines()[2] == "  b"  # not padded


def test_a_first_column_repeated_in_runs_becomes_headings_and_gives_its_width_to_the_text():
    table = Table(title="inputs of every prediction")
    for name in ("row", "model", "input", "value", "source"):
        table.add_column(name)
    for k in range(5):
        for m in ("before", "after"):
            for inp in ("profile", "workers", "link"):
                table.add_row(f"zhang-r{k}-2srv-100g", m, inp, f"resnet50 on V100, batch 32: {k} gradients, 102.23 MB",
                              f"paper's repository: V100 logs (PyTorch 1.3, batch {k}) and the section " * 2)
    text = _render(table)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80
    assert [line.strip() for line in lines if line.startswith("row: ")] == [f"row: zhang-r{k}-2srv-100g"
                                                                            for k in range(5)]
    assert sum(line.split() == ["model", "input", "value", "source"] for line in lines) == 1  # one header
    assert "zhang-r1-2srv-100g" not in "\n".join(line for line in lines if not line.startswith("row: "))
    assert len(lines) < 30 * 5  # 30 rows whose ~150-character source wraps in its column
