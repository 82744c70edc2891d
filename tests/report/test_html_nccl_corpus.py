"""The report's section of `validate nccl-tests` records: per band a chart and the rows the ranges hold,
degraded clusters marked and kept out of `all`, and the summary's line."""

from fabriclab.bench.validate.nccl_corpus import load_corpus
from fabriclab.bench.validate.nccl_tests import band_summary, validate_cluster
from fabriclab.report.html import assign, build_html
from fabriclab.report.store_views import Stored

from tests.bench.test_validate_nccl_corpus import CORPUS


def test_corpus_records_get_their_section_with_a_chart_per_band_and_the_summary_line():
    clusters = load_corpus(CORPUS, ("azure-ndv4-a100-hdr", "h100-ndr-node005"))
    bands = band_summary([validate_cluster(c) for c in clusters])
    record = {"kind": "validate.nccl-tests", "created_utc": "2026-11-27T23:00:00Z",
              "config": {"corpus": "examples/nccl-corpus", "models": ["mechanisms"]},
              "results": {"bands": bands, "clusters": []}}
    stored = [Stored(id=1, record=record)]
    sections, rest = assign(stored)
    assert [s.id for s in sections["nccl-corpus"]] == [1] and not rest
    html = build_html(stored, store="test.db")
    section = html[html.index('id="nccl-corpus"'):]
    assert section.count("<img") == len({b["band"] for b in bands}) and "rows in range" in section
    assert "h100-ndr-node005 !" in section and "+degraded (2)" in section
    every = next(b for b in bands if b["cluster"] == "all" and b["band"] == ">= 64 MB")
    assert (f"&gt;= 64 MB {every['inside']}/{every['ranged']} rows in range, "
            f"{every['clusters_median_within_goal']}/1 clusters within 10 %") in html
