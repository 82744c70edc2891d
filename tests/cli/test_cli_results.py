"""`fabriclab results` (list, show, export, diff) on a store of sample records, and one error line for a
file that is not a store (the store itself: tests/report/test_store.py)."""

import csv
import io

from typer.testing import CliRunner

from fabriclab.cli.main import app
from fabriclab.report import store
from store_samples import bad_store_files, store_record, strict_json


def test_the_cli_prints_one_error_line_for_a_bad_store(tmp_path):
    runner = CliRunner()
    for path in bad_store_files(tmp_path):
        result = runner.invoke(app, ["results", "list", "--store", str(path)])
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output
        assert result.output.count("error:") == 1 and str(path) in result.output.replace("\n", "")


# -- the commands ------------------------------------------------------------------------------------

def test_results_commands_list_show_export_and_diff(tmp_path):
    path = tmp_path / "r.db"
    runner = CliRunner()
    empty = runner.invoke(app, ["results", "list", "--store", str(path)])
    assert empty.exit_code == 0 and "no records" in empty.output
    a = store_record()
    b = store_record(created="2026-11-21T12:00:00+00:00")
    b["results"]["rows"][0]["scaling_factor"] = 0.95
    store.add_record(a, path)
    store.add_record(b, path)
    listed = runner.invoke(app, ["results", "list", "--store", str(path), "--format", "csv"])
    assert listed.exit_code == 0, listed.output
    lines = list(csv.reader(io.StringIO(listed.output)))
    assert lines[0] == ["id", "kind", "created (UTC)", "git", "host", "rows"]
    assert [line[:3] for line in lines[1:]] == [["1", "whatif", "2026-11-20T12:00:00"], ["2", "whatif", "2026-11-21T12:00:00"]]
    since = runner.invoke(app, ["results", "list", "--store", str(path), "--since", "2026-11-21", "--format", "csv"])
    assert len(since.output.strip().splitlines()) == 2
    shown = runner.invoke(app, ["results", "show", "2", "--store", str(path), "--format", "plain"])
    assert shown.exit_code == 0 and "config.trainer.sync" in shown.output and "0.95" in shown.output
    as_json = runner.invoke(app, ["results", "show", "2", "--store", str(path), "--format", "json"])
    assert strict_json(as_json.output)["results"]["rows"][0]["scaling_factor"] == 0.95
    out = tmp_path / "all.csv"
    exported = runner.invoke(app, ["results", "export", "--format", "csv", "--out", str(out), "--store", str(path)])
    assert exported.exit_code == 0 and len(list(csv.DictReader(out.open()))) == 4
    diffed = runner.invoke(app, ["results", "diff", "1", "2", "--store", str(path), "--format", "plain"])
    assert diffed.exit_code == 0, diffed.output
    assert "results.rows[model=resnet50,workers=16].scaling_factor" in diffed.output
    assert "+5.56%" in diffed.output and "created_utc" in diffed.output
    missing = runner.invoke(app, ["results", "diff", "1", "7", "--store", str(path)])
    assert missing.exit_code == 2 and "no record 7" in missing.output


def test_show_at_80_columns_prints_tables_not_one_block_per_value(tmp_path, monkeypatch):
    """A calibrate-shaped record (parameters, 60 residual rows, a 2,048-value list) at COLUMNS=80."""
    path = tmp_path / "r.db"
    residuals = [{"source": "nccl_8.log", "num_gpus": 8, "size_bytes": 1 << (i % 34), "measured_busbw_GBps": 1.5 * i,
                  "predicted_busbw_GBps": 1.4 * i + 0.01, "error_pct": -6.5 + i / 10} for i in range(60)]
    record = store_record("calibrate.nccl-tests", residuals=residuals, nccl_version="2.7.8",
                          rank_finish_s=[1.0 + i / 1000 for i in range(2048)],
                          parameters={"library.launch_s": {"value": 3.8e-06, "prior": 4e-06, "fitted": True},
                                      "server.nic_efficiency": {"value": 0.74, "prior": 0.99, "fitted": True}})
    store.add_record(record, path)
    monkeypatch.setenv("COLUMNS", "80")
    shown = CliRunner().invoke(app, ["results", "show", "1", "--store", str(path), "--format", "table"])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert max(map(len, lines)) <= 80 and "-- row" not in shown.output
    assert len(lines) < 120  # 60 residual rows, one line each, the parameters, the metadata
    assert "2048 values: min 1, median 2.0235, max 3.047" in shown.output
    assert "results: residuals (60 rows)" in shown.output and "source: nccl_8.log; num_gpus: 8" in shown.output


def test_a_row_that_is_no_record_is_skipped_and_named_not_fatal(tmp_path):
    """Issue 38: one stored row of {}, null or wrong types made `results list|export` and `report` fail on the
    whole store; now they leave it out with one warning line, and `results show` of it says what is wrong."""
    import sqlite3

    path = tmp_path / "r.db"
    store.add_record(store_record(), path)
    with sqlite3.connect(path) as conn:
        for text in ('{}', 'null', '{"kind": "whatif", "created_utc": "2026-11-20T12:00:00+00:00", "config": [1]}',
                     'not json'):
            conn.execute("INSERT INTO records (kind, created_utc, record_json) VALUES ('x', '2026', ?)", (text,))
    store.add_record(store_record(created="2026-11-21T12:00:00+00:00"), path)
    runner = CliRunner()
    listed = runner.invoke(app, ["results", "list", "--store", str(path), "--format", "csv"])
    assert listed.exit_code == 0, listed.output
    assert [row[0] for row in csv.reader(io.StringIO(listed.stdout))][1:] == ["1", "6"]
    warning = listed.stderr.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith("warning: 4 rows of") and "2 (no kind); 3 (not a JSON " \
        "object but null); 4 (config is a list, not a JSON object); 5 (not valid JSON)" in warning[0]
    exported = runner.invoke(app, ["results", "export", "--format", "json", "--store", str(path)])
    assert exported.exit_code == 0 and [r["id"] for r in strict_json(exported.stdout)] == [1, 6]
    report = runner.invoke(app, ["report", "--out", str(tmp_path / "report"), "--store", str(path)])
    assert report.exit_code == 0 and "2 records" in report.stdout and "warning: 4 rows" in report.stderr
    shown = runner.invoke(app, ["results", "show", "4", "--store", str(path)])
    assert shown.exit_code == 2 and "Traceback" not in shown.output
    assert "record 4 in" in shown.stderr and "config is a list" in shown.stderr and "DELETE FROM records" in shown.stderr
    diffed = runner.invoke(app, ["results", "diff", "1", "3", "--store", str(path)])
    assert diffed.exit_code == 2 and "not a JSON object but null" in diffed.stderr


def test_show_prints_the_first_60_rows_of_a_long_table_and_says_where_the_rest_is(tmp_path):
    path = tmp_path / "r.db"
    rows = [{"name": f"F mb {i}", "ts": 1e5 * i, "dur": 9e4} for i in range(250)]
    store.add_record(store_record(rows=rows), path)
    result = CliRunner().invoke(app, ["results", "show", "1", "--store", str(path)])
    assert result.exit_code == 0, result.output
    assert "(the first 60 of 250 rows)" in result.stdout and "F mb 59" in result.stdout
    assert "F mb 60" not in result.stdout
    assert "190 more rows of results: `fabriclab results show 1 --format json`" in result.stdout
