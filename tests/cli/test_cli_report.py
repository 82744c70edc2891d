"""`fabriclab report`: one index.html from the records chosen in the store, and one error line for an --out
that is a file (the page itself: tests/report/test_html_report.py)."""

from typer.testing import CliRunner

from fabriclab.cli.main import app
from fabriclab.report import store
from sample_records import sample_records


def test_report_command_writes_one_file_from_the_chosen_records(tmp_path):
    path = tmp_path / "r.db"
    for record in sample_records():
        store.add_record(record, path)
    out = tmp_path / "site"
    runner = CliRunner()
    result = runner.invoke(app, ["report", "--out", str(out), "--store", str(path), "--ids", "1,2"])
    assert result.exit_code == 0, result.output
    assert [p.name for p in out.iterdir()] == ["index.html"]
    text = (out / "index.html").read_text()
    assert 'id="rec-1"' in text and 'id="rec-2"' in text and 'id="rec-3"' not in text
    assert "2 records from the results store" in text
    bad = runner.invoke(app, ["report", "--out", str(out / "index.html"), "--store", str(path)])
    assert bad.exit_code == 2 and "error: --out" in bad.output and "is a file" in bad.output
