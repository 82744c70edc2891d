"""The report's section of `validate emulated --workload llm` records: figure and table of measured vs predicted."""

from fabriclab.report.html import assign, build_html
from fabriclab.report.store_views import Stored


def _record() -> dict:
    rows = [{"part": "step", "measured_s": 0.36, "predicted_s": 0.34, "share": 1.0, "error": -0.056, "goal": 0.15,
             "ok": True},
            {"part": "dp", "measured_s": 0.19, "predicted_s": 0.22, "share": 0.54, "error": 0.135, "goal": 0.25,
             "ok": True},
            {"part": "tp", "measured_s": 0.0, "predicted_s": 0.0, "share": 0.0, "error": None, "goal": None, "ok": None}]
    return {"kind": "validate.llm", "created_utc": "2026-11-24T23:30:00Z", "config": {"model": "gpt-tiny"},
            "results": {"parallel": "TP1 PP2 CP1 DP2", "rows": rows, "passed": True,
                        "calibration": {"one_rank_step_s": 0.21, "loopback_step_s": 168e-6}}}


def test_validate_llm_records_get_their_own_section_with_the_rows():
    stored = [Stored(id=1, record=_record())]
    sections, rest = assign(stored)
    assert [s.id for s in sections["llm-check"]] == [1] and not rest
    html = build_html(stored, store="test.db")
    assert "A transformer&#x27;s step: measured vs whatif llm" in html or "A transformer's step" in html
    assert "predicted ms" in html and "+13.5%" in html and "<img" in html
