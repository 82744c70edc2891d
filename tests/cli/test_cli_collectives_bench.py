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
                    "--warmup", "0", "--max-iters", "8", "--max-time", "0.5", "--json", str(path),
                    "--format", "plain")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 8  # stdout is the table alone (`calibrate nccl-tests` reads it); the conclusion: stderr
    # nccl-tests layout: a `#` title, a `#` header, then one fixed-width row per algorithm and size,
    # in the order measured (every algorithm of a size, then the next size).
    assert lines[0].startswith("# collectives bench: allreduce, 2 ranks, 2-8 iters +0 warm-up")
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
    # each size repeated in rounds of 2 up to 8: its median, the median's interval and the verdict are kept
    for row in record["results"]:
        assert 2 <= row["iters"] <= 8 and row["iters"] % 2 == 0 and row["stop"]
        assert row["time_us_ci_low"] <= row["time_us_median"] <= row["time_us_ci_high"]
    assert [v["size_bytes"] for v in record["verdicts"]] == [1024, 2048, 4096]
    assert all(v["winner"] in (None, "ring", "native") and v["verdict"] for v in record["verdicts"])
    assert "conclusion: a winner at " in result.stderr and " of 3 sizes" in result.stderr


def test_cli_names_a_winner_only_beyond_the_noise_and_says_so_per_size():
    # one round of 2 iterations: too few for a 95 % interval, so no size may name a winner, however large
    # the gap between ring and native happens to be
    result = invoke("--algo", "ring,native", "--np", "2", "--sizes", "1KB,4KB", "--iters", "2", "--max-iters", "2",
                    "--warmup", "0", "--format", "plain", "--store", "off")
    assert result.exit_code == 0, result.output
    assert "# collectives bench: allreduce, 2 ranks, 2 iters +0 warm-up; GB/s = 1e9 B/s" in result.stdout
    conclusion = result.stderr[result.stderr.index("conclusion: "):].splitlines()
    assert conclusion[0] == "conclusion: a winner at 0 of 2 sizes, 2 within noise"
    assert [line.split()[:3] for line in conclusion[2:4]] == [["1KB", "n=2", "within"], ["4KB", "n=2", "within"]]
    assert "within noise at 1KB to 4KB" in result.stderr


def test_cli_csv_is_one_header_and_a_row_per_measurement():
    result = invoke("--algo", "ring", "--np", "2", "--sizes", "8B,24B", "--dtype", "int64", "--iters", "1",
                    "--warmup", "0", "--format", "csv")
    assert result.exit_code == 0, result.output
    assert "conclusion" not in result.output  # one algorithm: nothing to compare, nothing said
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
    (["--iters", "50", "--max-iters", "10"], "need 1 <= iters <= max iters, got 50 and 10"),
    (["--max-time", "0"], "--max-time 0: give a number > 0"),
])
def test_cli_bad_input_is_one_error_line_and_exit_2(args, fragment):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
