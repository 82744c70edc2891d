"""`fabriclab collectives bench` from the command line: the nccl-tests table, CSV, `--json -`, bad input
(the benchmark itself: tests/bench/test_bench_collectives.py)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from typer.testing import CliRunner

from fabriclab.cli.main import app


def invoke(*args):
    return CliRunner().invoke(app, ["collectives", "bench", *args])


def test_cli_prints_an_nccl_tests_table_with_the_ratio_to_native_and_writes_a_record(tmp_path):
    path = tmp_path / "bench.json"
    result = invoke("--algo", "ring,native", "--np", "2", "--sizes", "1KB:4KB", "--iters", "2",
                    "--warmup", "0", "--json", str(path), "--format", "plain")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # nccl-tests layout: a `#` title, a `#` header, then one fixed-width row per algorithm and size,
    # in the order measured (every algorithm of a size, then the next size).
    assert lines[0].startswith("# collectives bench: allreduce, 2 ranks")
    assert lines[1].split()[1:] == ["algo", "size(B)", "count(elements)", "type", "redop", "root", "time(us)",
                                    "algbw(GB/s)", "busbw(GB/s)", "vs", "native", "#wrong"]
    rows = [line.split() for line in lines[2:8]]
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (a, str(s), str(s // 4), "float32") for s in (1024, 2048, 4096) for a in ("ring", "native")]
    assert all(r[-1] == "0" for r in rows) and [r[-2] for r in rows[1::2]] == ["1.00"] * 3
    record = json.loads(path.read_text())
    assert record["kind"] == "collectives.bench" and record["config"]["num_ranks"] == 2
    assert [(r["algo"], r["size_bytes"]) for r in record["results"]] == [
        ("ring", 1024), ("ring", 2048), ("ring", 4096), ("native", 1024), ("native", 2048), ("native", 4096)]
    assert all(r["busbw_vs_native"] == 1.0 for r in record["results"] if r["algo"] == "native")


def test_cli_csv_is_one_header_and_a_row_per_measurement():
    result = invoke("--algo", "ring", "--np", "2", "--sizes", "8B,24B", "--dtype", "int64", "--iters", "1",
                    "--warmup", "0", "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["size(B)"], r["count(elements)"], r["type"], r["#wrong"]) for r in rows] == [
        ("8", "1", "int64", "0"), ("24", "3", "int64", "0")]


def test_cli_json_dash_is_the_record_alone_on_stdout_and_the_rows_go_to_stderr():
    result = invoke("--algo", "ring", "--np", "2", "--sizes", "1KB", "--iters", "1", "--warmup", "0", "--json", "-")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["kind"] == "collectives.bench" and record["results"][0]["size_bytes"] == 1024
    assert "# collectives bench: allreduce, 2 ranks" in result.stderr


def test_cli_alltoall_defaults_to_native_and_reports_the_alltoall_bus_factor():
    result = invoke("--op", "alltoall", "--np", "2", "--sizes", "1KB", "--iters", "1", "--warmup", "0", "--json", "-")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["results"]
    assert (row["algo"], row["op"], row["size_bytes"], row["num_wrong"]) == ("native", "alltoall", 1024, 0)
    assert row["busbw_GBps"] == pytest.approx(row["algbw_GBps"] / 2)  # (n-1)/n on 2 ranks
    assert "# collectives bench: alltoall, 2 ranks" in result.stderr


@pytest.mark.parametrize("args, fragment", [
    (["--op", "alltoall", "--algo", "ring"], "fabriclab has no alltoall schedule such as 'ring': use --algo native"),
    (["--algo", "ring,bogus"], "unknown allreduce algorithm 'bogus'"),
    (["--op", "scatter"], "unknown collective 'scatter'"),
    (["--np", "0"], "number of ranks must be >= 1"),
    (["--op", "broadcast", "--root", "7"], "root 7 is out of range"),
    (["--sizes", "12XB"], "invalid size"),
    (["--dtype", "double"], "unknown dtype"),
])
def test_cli_bad_input_is_one_error_line_and_exit_2(args, fragment):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
