"""The report section of `validate collectives` records, from a hand-written record: the 4-host rows with
their error, the bands, what was not predicted; and the section is where the page says."""

from fabriclab.report import html as report_html
from fabriclab.report.html.collectives import render
from sample_records import as_stored, collectives_check


def test_the_section_shows_the_predicted_rows_bands_and_what_was_not_predicted():
    stored = as_stored([collectives_check()])
    html = render(stored)
    assert html.count("<img") == 1 and "on 4 emulated hosts for allgather, alltoall" in html  # the alt text
    assert "4 hosts, never fitted" in html and "per op and size band" in html
    # 6 check rows (3 sizes x 2 ops) of 7 cells, then 2 bands of 5 cells
    assert html.count("<tr>") == 1 + 6 + 1 + 2
    assert "Not predicted: allgather+alltoall" in html and "Not predicted: alltoall" in html
    assert "1-16 MB" in html and "+0.6%" not in html and ">0.6 %<" in html  # |error| is unsigned in the bands
    assert "fit: per-op (the joint fit refused)" in html


def test_the_page_puts_the_record_in_its_own_section_not_in_the_simulator_one():
    per, other = report_html.assign(as_stored([collectives_check()]))
    assert [s.kind for s in per["collectives-check"]] == ["validate.collectives"]
    assert not per["validate"] and not other
