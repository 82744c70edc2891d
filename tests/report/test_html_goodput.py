"""The report draws goodput against GPU count: from `whatif llm` records and from `plan --rank goodput` rows, in
the LLM sections, and nothing where no record carries goodput."""

from fabriclab.report.html import build_html
from fabriclab.report.html.goodput import goodput_block, goodput_figure, goodput_points, plan_points
from fabriclab.report.store_views import Stored


def _step(i: int, gpus: int, goodput: float | None) -> Stored:
    results = {"model": "llama3-405b", "cluster": "dgx-h100", "num_gpus": gpus, "gpu": "H100",
               "parallel": f"TP8 PP16 DP{gpus // 128}", "step_time_s": 13.0, "tokens_per_s": 100.0 * gpus, "mfu": 0.3,
               "efficiency": 1.0, "efficiency_source": "kernels", "split_s": {"compute": 6.0, "bubble": 7.0},
               "communicators": [], "busiest_links": []}
    if goodput is not None:
        results.update(goodput_tokens_per_s=goodput * gpus, effective_training_time=goodput / 100.0)
    return Stored(id=i, record={"kind": "whatif.llm", "created_utc": "2026-12-01T00:00:00Z",
                                "config": {"model": "llama3-405b", "num_gpus": gpus}, "results": results})


def test_goodput_points_come_from_records_that_carry_goodput():
    records = [_step(1, 1024, 99.0), _step(2, 16384, 92.0), _step(3, 4096, None)]
    points = goodput_points(records)
    assert [p["gpus"] for p in points] == [1024, 16384]
    assert points[1]["goodput_tokens_per_s"] == 92.0 * 16384 and points[1]["id"] == 2
    assert "<img" in goodput_block(records) and "record 2" in goodput_block(records)
    assert goodput_block([_step(3, 4096, None)]) == "" and goodput_figure([], "x") == ""


def test_plan_rows_with_goodput_become_points_labelled_by_option():
    rows = [{"option": "dgx-h100 rail 400G", "gpus": 65536, "tokens_per_s": 5.7e6, "goodput_tokens_per_s": 4.46e6,
             "effective_training_time": 0.78}, {"option": "b", "gpus": 1024, "tokens_per_s": 1e5}]
    points = plan_points(rows, "llama3-405b")
    assert len(points) == 1 and points[0]["label"] == "llama3-405b, dgx-h100 rail 400G"
    assert "<img" in goodput_figure(points, "plan")


def test_the_llm_section_draws_goodput_against_gpus():
    html = build_html([_step(1, 1024, 99.0), _step(2, 16384, 92.0)], store="test.db")
    assert "goodput against GPU count" in html
    assert "goodput against GPU count" not in build_html([_step(3, 4096, None)], store="test.db")
