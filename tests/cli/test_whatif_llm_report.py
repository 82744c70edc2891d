"""The report section of `whatif llm` records (report/html/llm.py), from records the command writes: the headline, the split, the
trace drawn as lanes with the trace itself as a download, the communicators and the busiest links."""

import base64
import json
import re

from typer.testing import CliRunner

from fabriclab.cli.main import app
from fabriclab.report import html as report_html
from fabriclab.report.html.llm import render
from fabriclab.report.store_views import Stored


def as_stored(records):
    return [Stored(id=i + 1, record=r) for i, r in enumerate(records)]


def _record(tmp_path, *extra):
    out = tmp_path / f"r{len(extra)}.json"
    args = ["whatif", "llm", "--gpus", "16", "--tp", "2", "--pp", "2", "--gbs", "32", "--seq", "2048",
            "--json", str(out), "--store", str(tmp_path / "store.db"), *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


def test_a_record_with_its_trace_shows_the_lanes_and_the_trace_to_download(tmp_path):
    record = _record(tmp_path, "--trace", str(tmp_path / "t.json"))
    html = render(as_stored([record]))
    # the step's bars, the trace's lanes, and goodput against GPU count
    assert html.count("<img") == 3 and "goodput against GPU count" in html and "Stacked bar chart of the step: compute" in html and "lanes per thread" in html
    data = re.search(r'href="data:application/json;base64,([^"]+)"', html).group(1)
    trace = json.loads(base64.b64decode(data))
    assert trace["traceEvents"] == json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert "the busiest link of each kind" in html and "NVLink" in html and "NIC-leaf" in html
    assert ">tp<" in html and ">pp<" in html and "sendrecv" in html  # the communicators table


def test_a_record_without_a_trace_says_how_to_get_one_and_the_page_places_it(tmp_path):
    stored = as_stored([_record(tmp_path)])
    html = render(stored)
    assert html.count("<img") == 2 and "goodput against GPU count" in html and "No trace in this record (<code>--trace FILE</code> stores one)" in html
    per, other = report_html.assign(stored)
    assert [s.kind for s in per["llm"]] == ["whatif.llm"] and not other and not per["whatif"]


def test_store_off_on_the_command_line_adds_no_record_and_makes_no_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FABRICLAB_STORE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(app, ["whatif", "llm", "--gpus", "8", "--store", "off"])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "off").exists() and not (tmp_path / "home").exists()

