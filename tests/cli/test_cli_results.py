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
