"""The table printer at 80 columns and in a pipe: constant columns move into a line above the table, long
text wraps in its column, numbers stay whole and right-aligned, text is left-aligned, and a long text
cell pads no other line (widths are given, never read from the terminal)."""

from __future__ import annotations

import io

from rich.table import Table

from fabriclab.report.tables import PLAIN_WIDTH, TEXT_CAP, is_number, plain_text, render

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
    at = next(i for i, line in enumerate(lines) if line.endswith(NOTE.split()[0]) or NOTE[:20] in line)
    folded = [lines[at]] + [line for line in lines[at + 1:] if line.startswith(" " * 20)]
    assert len(folded) >= 2 and all(len(line) <= PLAIN_WIDTH for line in folded)  # folded in its column
    column = lines[at].index(NOTE[:20])
    assert all(not line[:column].strip() for line in folded[1:])  # continuations under the note, words whole
    assert " ".join(line[column:].strip() for line in folded) == NOTE
    rows = [line for line in lines[2:] if line not in folded]
    assert all(len(line) <= len(header) and line.endswith("ok") for line in rows)  # no other line padded


def test_numbers_with_units_and_marks_read_as_numbers():
    assert all(is_number(t) for t in ("0.750", "-2.6 pt *", "12.78 %", "1.00x", "8.309 s", "1,024", "1e-05",
                                      "16 MB", "+24.8 pt"))
    assert not any(is_number(t) for t in ("resnet50", "ring-addest", "Sec. 2.2", "2 x 8 V100", ""))
    assert plain_text("", ["a"], [["z" * (TEXT_CAP + 5)], ["b"]]).splitlines()[2] == "  b"  # not padded


def test_a_pipe_folds_long_text_and_splits_a_table_wider_than_its_width_into_column_groups():
    columns = ["link"] + [f"metric_{i}" for i in range(30)]
    rows = [[f"s{k}.gpu0->s{k}.nic0"] + [f"{1e6 / (i + 1):.6f}" for i in range(30)] for k in range(3)]
    text = plain_text("wide", columns, rows + [["s9.gpu7->s9.nic7", *("-" * 30)]])
    lines = text.splitlines()
    assert max(map(len, lines)) <= PLAIN_WIDTH and text.count("# wide (columns ") >= 3
    assert all(f"{1e6 / (i + 1):.6f}" in text for i in range(30))  # every number whole
    assert text.count("s0.gpu0->s0.nic0") == text.count("# wide (columns ")  # the first column in every group
    md = _render(_table(10), "markdown")
    assert max(map(len, md.splitlines())) < 300 and "<br>" in md and "misses one of the two" in md


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


def test_link_names_are_never_split_on_a_narrow_terminal():
    # the text column wraps to fit; a link name is one word and stays whole (once `s0.gpu0->s0.` / `nvsw`)
    table = Table(title="busiest links")
    for name in ("kind", "link", "Gb/s", "note"):
        table.add_column(name)
    names = ["s0.gpu0->s0.nvsw", "s0.nic0->leaf0", "s0.gpu0->s0.nic0", "leaf1->spine0"]
    for kind, link in zip(("NVLink", "NIC-leaf", "PCIe", "leaf-spine"), names):
        table.add_row(kind, link, str(len(kind) * 97), f"{kind}: the bytes over its rate, of step: busy s over the step")
    for width in (50, 60, 80):
        text = _render(table, width=width)
        assert all(name in text for name in names), (width, text)  # whole, on one line
        assert max(map(len, text.splitlines())) <= width and "-- row" not in text
