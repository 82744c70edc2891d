"""`fabriclab plan --model <LLM>` on the command line: tables at 80 columns, notes, the JSON record with its
rows, `--out`, and one-line errors for bad input."""

import csv
import json

import pytest

from plan_app import invoke

SMALL = ("plan", "--model", "llama3-8b", "--gpus", "64", "--clusters", "dgx-h100", "--gbs", "256", "--seq", "4096")


def assert_one_line_error(result, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.output


def test_tables_fit_80_columns_and_say_where_compute_and_prices_come_from():
    result = invoke(*SMALL, "--nic-rates", "400Gbps,800Gbps")
    assert result.exit_code == 0, result.output
    out = result.stdout
    table_lines = [line for line in out.splitlines() if line.startswith(("  1 ", "  2 "))]
    assert len(table_lines) == 10 and all(len(line) <= 80 for line in table_lines)  # 5 tables of 2 rows
    assert "dgx-h100 rail 400G" in out and "dgx-h100 rail 800G" in out
    assert "llama3-8b at 64 GPUs: the lowest cost per token/s is" in out
    flat = " ".join(out.split())
    assert "compute on dgx-h100: kernels by shape" in flat and "not measured" in flat
    assert "H100-SXM5-80GB servers at $37,500 per GPU" in out and "XDR network" in out and "estimate" in out
    assert "skipped by a lower bound" in out


def test_json_record_holds_the_rows_and_every_simulated_configuration(tmp_path):
    path = tmp_path / "plan.json"
    result = invoke(*SMALL, "--nic-rates", "400Gbps,800Gbps", "--json", str(path), "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    record = json.loads(path.read_text())
    assert record["kind"] == "plan.llm" and record["config"]["gbs"] == 256
    rows, configs = record["results"]["rows"], record["results"]["configs"]
    assert [r["option"] for r in rows] == ["dgx-h100 rail 400G", "dgx-h100 rail 800G"]
    for r in rows:
        assert r["tokens_per_s"] > 0 and r["cluster_usd"] > 0 and isinstance(r["pareto"], bool)
        assert "not measured" in r["efficiency_source"] and r["memory_per_gpu_bytes"] < 80e9
    assert len(configs) == record["results"]["stats"]["num_simulated"] >= 2
    assert record["tokens_per_s"] == max(r["tokens_per_s"] for r in rows)
    with open(tmp_path / "out" / "plan.csv") as f:
        assert len(list(csv.DictReader(f))) == len(configs)


def test_csv_format_puts_the_tables_on_stdout():
    result = invoke(*SMALL, "--format", "csv")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].startswith("#,option,GPUs,tokens/s")
    assert "lowest cost per token/s" in result.stderr


@pytest.mark.parametrize("args, fragment", [
    (("--gpus", "60"), "--gpus 60 is not a multiple of 8"),
    (("--model", "llama9-1b"), "neither a built-in V100 profile"),
    (("--fabrics", "400g-ndr"), "rail or fat-tree"),
    (("--levels", "3"), "--levels applies to CNN plans"),
    (("--clusters", "dgx-h900"), "no such file and no preset"),
    (("--nic-rates", "fast"), "invalid bandwidth"),
    (("--gbs", "0"), "--gbs 0"),
    (("--precision", "fp4"), "--precision 'fp4'"),
])
def test_bad_input_is_one_line(args, fragment):
    argv = list(SMALL)
    for key, value in zip(args[::2], args[1::2]):
        if key in argv:
            argv[argv.index(key) + 1] = value
        else:
            argv += [key, value]
    assert_one_line_error(invoke(*argv), fragment)


def test_llm_options_with_a_cnn_model_and_a_model_that_fits_nowhere_are_one_line():
    assert_one_line_error(invoke("plan", "--model", "resnet50", "--gpus", "64", "--gbs", "64"),
                          "--gbs applies to an LLM plan")
    assert_one_line_error(invoke("plan", "--model", "llama3-405b", "--gpus", "8", "--clusters", "dgx-h100"),
                          "smallest need found is")
