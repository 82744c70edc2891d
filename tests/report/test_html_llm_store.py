"""The report of a store of LLM work (tests/report/build_llm_store.sh: 4 LLM plans, 8 `whatif llm` steps of
which one repeats a configuration, 3 collective predictions), read in a real headless Chromium: the Summary
opens with the newest plan's answer and counts every prediction kind, every distinct record is drawn (the
repeat listed), records are named by the command line that made them, and the empty sections are one line."""

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from cdp import CHROMIUM, Browser
from fabriclab.report import html as report_html
from fabriclab.report.html.llm_plan import answers, exposed
from fabriclab.report.store_views import Stored, command_of

DATA = Path(__file__).resolve().parent / "data" / "llm_records.json.gz"
MAX_SECTION_PX = 3000

needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None and not Path(CHROMIUM).exists(),
                                    reason="headless Chromium not installed (Debian: apt-get install chromium)")


def llm_records() -> list[Stored]:
    exported = json.loads(gzip.decompress(DATA.read_bytes()))
    return [Stored(id=r.pop("id"), nulled_keys=tuple(r.pop("nulled_keys", ())), record=r) for r in exported]


def _words(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_store_is_llm_plans_steps_and_predictions_with_their_command_lines():
    records = llm_records()
    kinds = [s.kind for s in records]
    assert (kinds.count("plan.llm"), kinds.count("whatif.llm"), kinds.count("simulate.cluster")) == (4, 8, 3)
    assert all(isinstance(s.record.get("command"), list) for s in records)  # the real command lines


PAGE_JS = """JSON.stringify({
  sections: [...document.querySelectorAll('body > section')].map(s => ({
    id: s.id, height: Math.round(s.getBoundingClientRect().height), empty: s.querySelectorAll('p.empty').length,
    text: s.innerText, images: [...s.querySelectorAll('img')].map(i => i.complete && i.naturalWidth > 0),
    widest: Math.max(0, ...[...s.querySelectorAll('figure, .tbl, table')].map(e => e.getBoundingClientRect().right)),
  })),
  firstItem: (document.querySelector('#summary li') || {}).innerText || '',
})"""


@needs_chromium
def test_chromium_reads_the_plan_answer_first_and_every_distinct_record(tmp_path):
    records = llm_records()
    page = report_html.write_report(tmp_path / "site", records, store="llm.db")
    with Browser(timeout_s=90) as browser:
        browser.open(page.as_uri())
        seen = json.loads(browser.evaluate(PAGE_JS))
        problems = browser.problems()
    assert problems == []
    sections = {s["id"]: s for s in seen["sections"]}
    assert list(sections)[:4] == ["summary", "llm-plan", "llm", "predictions"]
    for s in seen["sections"]:
        assert all(s["images"]) and s["height"] <= MAX_SECTION_PX and s["widest"] <= 1280, (s["id"], s["height"])
    # the Summary opens with the newest plan's answer and counts every prediction kind
    newest = max((s for s in records if s.kind == "plan.llm"), key=lambda s: s.id)
    assert answers(newest)[0] in seen["firstItem"] and f"record {newest.id}" in seen["firstItem"]
    summary = sections["summary"]["text"]
    assert "Predicted: 3 simulate.cluster, 8 whatif.llm, 4 plan.llm" in summary
    # every plan: its answers and each option's layout and exposed seconds
    plans = sections["llm-plan"]["text"]
    for s in (s for s in records if s.kind == "plan.llm"):
        assert all(a in plans for a in answers(s)), s.id
    steps = sections["llm"]
    configs: dict[str, Stored] = {}
    for s in sorted((s for s in records if s.kind == "whatif.llm"), key=lambda s: s.id):
        configs[json.dumps(s.record["config"], sort_keys=True)] = s  # the newest of each configuration
    drawn = {s.id for s in configs.values()}
    assert len(drawn) == 7
    rows = [line.split("\t") for line in steps["text"].splitlines() if line.count("\t") >= 9]
    assert {int(r[-1]) for r in rows if r[-1].strip().isdigit()} == drawn  # one row per distinct configuration
    repeat = ({s.id for s in records if s.kind == "whatif.llm"} - drawn).pop()
    assert f"record {repeat} (" in steps["text"].split("Not drawn", 1)[1]  # the repeat listed, not drawn
    predictions = sections["predictions"]["text"]
    for s in (s for s in records if s.kind == "simulate.cluster"):
        assert f"record {s.id} (" in predictions and s.record["config"]["collective"] in predictions
    # named by the command line; one line for the sections without records
    text = page.read_text()
    assert "fabriclab plan llm" not in text and "fabriclab simulate cluster" not in text
    assert "fabriclab plan --model llama3-70b --gpus 1024,4096 --clusters dgx-h100,hgx-h200,hgx-b200" in _words(text)
    empty = [s for s in seen["sections"] if s["empty"]]
    assert [s["id"] for s in empty] == ["empty"] and empty[0]["empty"] == 1
    assert "fabriclab validate published" in empty[0]["text"] and "fabriclab run" in empty[0]["text"]


def test_the_network_cost_per_option_reads_exposed_fields_where_the_plan_writes_them():
    row = {"split_s": {"tp": 0.1, "cp": 0.0, "ep": 0.0, "pp": 0.0, "dp": 0.3, "bubble": 0.2}}
    assert exposed(row) == {"tp": 0.1, "cp": 0.0, "ep": 0.0, "pp": 0.0, "dp": 0.3, "bubble": 0.2}
    newer = row | {"exposed_s": {"tp": 0.05, "dp": 0.25}, "exposed_bubble_s": 0.15}
    assert exposed(newer) == {"tp": 0.05, "cp": 0.0, "ep": 0.0, "pp": 0.0, "dp": 0.25, "bubble": 0.15}
    assert exposed({}) == dict.fromkeys(("tp", "cp", "ep", "pp", "dp", "bubble"))  # absent: no number invented
    plan = next(s for s in llm_records() if s.kind == "plan.llm")
    html = report_html.build_html([plan], store="x.db")
    section = html.split('id="llm-plan"', 1)[1].split("</section>", 1)[0]
    assert "what the network costs per option" in section and "DP s" in section and "bubble s" in section
    assert command_of(plan.record).startswith("fabriclab plan --model ")
    plan.record["results"]["rows"][0] |= {"runner_up": "TP2 PP1 DP512 mbs1 Z1", "runner_up_slower": 0.031}
    section = report_html.build_html([plan], store="x.db").split('id="llm-plan"', 1)[1].split("</section>", 1)[0]
    assert "runner-up (its step longer by)" in section and "TP2 PP1 DP512 mbs1 Z1 (+" in section
    assert ">3.1 %</a>)" in section
