"""RowStream: on a terminal one table, its rows as they come (never printed twice), constant columns said
once, headers in two lines where one line would pass the terminal; in a pipe the nccl-tests layout.
The terminal width is set (COLUMNS), so these never depend on the terminal running them."""

from __future__ import annotations

from fabriclab.cli.collectives import bench
from fabriclab.cli.common import Output

ROW = dict(algo="butterfly", size_bytes=16777216, count=4194304, dtype="float32", redop="sum", root=-1,
           time_us=123456.7, algbw_GBps=12.345, busbw_GBps=23.456, busbw_vs_native=0.93, num_wrong=0)


def _print(fmt: str, capsys, rows: int = 3) -> list[str]:
    printer = bench._printer(Output(fmt), bench.DEFAULT_CONFIG, 4)
    for i in range(rows):
        printer.row(bench._cells(ROW | {"size_bytes": 1024 << i}, True))
    printer.finish()
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out.splitlines()


def test_a_terminal_gets_one_table_of_80_columns_with_the_constant_columns_said_once(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    lines = _print("table", capsys)
    assert lines[1] == "# type float32, redop sum, root -1"
    assert lines[2].split() == ["#", "size", "count", "time", "algbw", "busbw", "vs"]
    assert lines[3].split() == ["#", "algo", "(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)", "native", "#wrong"]
    rows = lines[4:]
    assert len(rows) == 3 and len(lines) == 7  # each row once: no second table at the end
    assert [r.split()[:2] for r in rows] == [["butterfly", str(1024 << i)] for i in range(3)]
    assert all("123456.7" in r and "float32" not in r for r in rows)
    assert max(map(len, lines)) <= 80


def test_a_wide_terminal_keeps_one_header_line(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "200")
    lines = _print("table", capsys)
    assert lines[2].split()[1:4] == ["algo", "size(B)", "count(elements)"] and len(lines) == 6


def test_a_pipe_keeps_every_column_in_the_nccl_tests_layout(capsys):
    lines = _print("plain", capsys)
    assert lines[1].split()[1:7] == ["algo", "size(B)", "count(elements)", "type", "redop", "root"]
    assert len(lines) == 5 and all("float32" in r for r in lines[2:])


def test_json_prints_the_table_once_and_no_progress_rows_outside_a_terminal(capsys):
    import json

    lines = _print("json", capsys)
    assert len(lines) == 1 and len(json.loads(lines[0])["rows"]) == 3


def test_a_small_bandwidth_keeps_its_digits():
    cells = bench._cells(ROW | {"algbw_GBps": 0.0000312, "busbw_GBps": 0.0000468}, True)
    assert cells[7:9] == ["0.0000312", "0.0000468"]
    assert bench._cells(ROW, True)[7:9] == ["12.345", "23.456"]


def test_the_first_row_widens_a_column_its_value_passes_before_the_header_is_printed(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    printer = bench._printer(Output("table"), bench.DEFAULT_CONFIG, 4)
    slow = ROW | {"size_bytes": 1024, "algbw_GBps": 0.0000831, "busbw_GBps": 0.0000312}  # 9 characters each
    printer.row(bench._cells(slow, True))
    printer.row(bench._cells(ROW | {"size_bytes": 2048}, True))
    printer.finish()
    lines = capsys.readouterr().out.splitlines()
    head = max(len(line) for line in lines if line.startswith("#") and "collectives bench" not in line)
    assert "0.0000831" in lines[4] and all(len(line) <= head for line in lines[4:])
