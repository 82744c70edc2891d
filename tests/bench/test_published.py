"""`validate published`: the rows, honest calibrations, the reproducible baseline and the table (the command:
tests/cli/test_cli_validate_published.py)."""

from dataclasses import replace

import pytest

from fabriclab.bench.published import hpc as published_hpc
from fabriclab.bench.published import train as published_train
from fabriclab.bench.published.rows import compare
from fabriclab.bench.published.data import PUBLISHED, published
from fabriclab.report import published as report
from fabriclab.report.tables import render


def test_rows_are_unique_and_complete():
    keys = [r.key for r in PUBLISHED]
    assert len(keys) == len(set(keys))
    for r in PUBLISHED:
        assert r.paper and r.where and r.quantity
        assert r.unit in ("fraction", "%", "x", "s") and r.error_kind in ("points", "relative")
    assert published("awan-cb8-speedup").value == 2.3
    with pytest.raises(ValueError, match="no published row"):
        published("nope")


def test_baseline_reproduces_todays_numbers():
    """The 'before' column is today's what-if: the numbers the comparison started from."""
    got = {c.row.key: c.predictions["baseline"].value for c in compare(("baseline",), ("zhang-r50-2srv-1",))}
    assert got["zhang-r50-2srv-1g"] == pytest.approx(0.080, abs=5e-4)
    assert got["zhang-r50-2srv-10g"] == pytest.approx(0.572, abs=5e-4)
    assert compare(("baseline",), ("samsi-cartdg",))[0].predictions["baseline"].value == pytest.approx(4.0, rel=0.02)


@pytest.mark.parametrize("key, other, predict", [
    ("zhang-r101-4srv-100g", "zhang-r50-8srv-100g", published_train.zhang_mechanisms),
    ("horovod-vgg16-512gpu", "horovod-vgg16-128gpu", published_train.horovod_mechanisms)])
def test_a_row_never_calibrates_its_own_prediction(monkeypatch, key, other, predict):
    row, other_row = published(key), published(other)
    own, others = predict(row).value, predict(other_row).value
    rows = tuple(replace(r, value=r.value * 0.8) if r.key == key else r for r in PUBLISHED)
    monkeypatch.setattr(published_train, "PUBLISHED", rows)
    assert predict(row).value == pytest.approx(own, rel=1e-12)
    assert predict(other_row).value != pytest.approx(others, rel=1e-4)   # it does calibrate the others


def test_every_input_has_a_source():
    for c in compare(keys=("zhang-vgg16-8", "samsi-", "awan-cb8-", "horovod-incv3-512")):
        for name, p in c.predictions.items():
            if p.value is None:
                continue
            assert p.inputs, (c.row.key, name)
            for i in p.inputs:
                assert i.name and i.value and i.source, (c.row.key, name, i)
            calibrated = [i.source for i in p.inputs if i.source.startswith("calibrated on:")]
            assert all(c.row.key.removeprefix("zhang-").removeprefix("horovod-") not in s.split(":", 1)[1]
                       for s in calibrated)


def test_mechanisms_close_the_gap_where_the_papers_determine_the_setup():
    comps = {c.row.key: c for c in compare(keys=("zhang-r50-2srv-1g", "samsi-cartdg", "horovod-r101-512"))}
    for key, c in comps.items():
        assert abs(c.error("mechanisms")) < abs(c.error("baseline")), key
    assert comps["zhang-r50-2srv-1g"].within_goal("mechanisms")
    assert comps["samsi-cartdg-comm-ratio"].within_goal("mechanisms")


def test_scaffe_ranking_depends_on_the_chunks_the_paper_does_not_give():
    slow = published_hpc.scaffe_time("hierarchical:lower=chain:upper=chain:group=8:chunks=1", True,
                                     published_hpc.K80_REDUCE_S_PER_BYTE)
    fast = published_hpc.scaffe_time("hierarchical:lower=chain:upper=binomial:group=8:chunks=1", True,
                                     published_hpc.K80_REDUCE_S_PER_BYTE)
    assert slow > fast   # with few chunks CB-8 beats CC-8, as measured; with many the chain wins
    many = published_hpc.scaffe_time("hierarchical:lower=chain:upper=chain:group=8:chunks=16", True,
                                     published_hpc.K80_REDUCE_S_PER_BYTE)
    assert many < published_hpc.scaffe_time("hierarchical:lower=chain:upper=binomial:group=8:chunks=16", True,
                                            published_hpc.K80_REDUCE_S_PER_BYTE)


def test_table_fits_80_columns_and_marks_misses():
    import io

    comps = compare(keys=("zhang-r50-2srv", "awan-cc8-speedup", "horovod-incv3-512"))
    buf = io.StringIO()
    render(report.comparison_table(comps, ("baseline", "mechanisms")), "plain", buf)
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any("awan-cc8-speedup" in line and "*" in line for line in lines)
    assert any("horovod-incv3-512gpu" in line and "n/a" in line for line in lines)
    summary = report.summary_lines(comps, ("baseline",))
    assert summary[0].endswith("1 not predicted") and max(len(line) for line in summary) <= 80


def test_llm_rows_never_enter_their_own_prediction():
    # the calibration row is not predicted; moving a predicted row's published value moves no prediction
    from dataclasses import replace

    from fabriclab.bench.published import llm

    row = published("nemo-gpt3-bf16-128gpu")
    assert llm.nemo_mechanisms(row).value is None
    target = published("nemo-gpt3-bf16-1024gpu")
    before = llm.nemo_mechanisms(target).value
    llm.predicted_step_s.cache_clear()
    assert llm.nemo_mechanisms(replace(target, value=target.value * 3)).value == before
    # and within the goal of the issue: 10 %
    assert abs(before / target.value - 1) < 0.10
