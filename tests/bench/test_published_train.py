"""Mechanisms of the published training rows: Horovod's per-tensor/per-byte overhead, Fig. 1's spread, OPA."""

from dataclasses import replace

import pytest

from fabriclab.bench.published import train as published_train
from fabriclab.bench.published.rows import compare
from fabriclab.bench.published.data import PUBLISHED, published

_100G = [r for r in PUBLISHED if r.key.startswith("zhang-") and r.key.endswith("-100g")]


def _rows_made_by(per_tensor_s: float, per_byte_s: float) -> list:
    """The 100 Gbps Zhang rows with the values a known overhead would give."""
    out = []
    for r in _100G:
        model, servers, gbps = published_train._zhang_setup(r)
        it, t_batch, _, _ = published_train._zhang_iteration(model, servers, gbps)
        p = published_train._profile(model)
        out.append(replace(r, value=t_batch / (it + per_tensor_s * len(p.grads) + per_byte_s * p.param_bytes)))
    return out


def test_transport_overhead_recovers_a_per_tensor_and_a_per_byte_cost():
    per_tensor, per_byte = published_train.transport_overhead(_rows_made_by(2e-4, 0.1e-9))
    assert per_tensor == pytest.approx(2e-4, rel=1e-6)
    assert per_byte == pytest.approx(0.1e-9, rel=1e-6)
    # Only a per-tensor cost: no per-byte cost is invented (both stay >= 0).
    per_tensor, per_byte = published_train.transport_overhead(_rows_made_by(3e-4, 0.0))
    assert per_tensor == pytest.approx(3e-4, rel=1e-6) and per_byte == pytest.approx(0.0, abs=1e-18)


def test_more_gradient_tensors_cost_more_at_the_same_bytes():
    """ResNet101 has ~2x ResNet50's tensors: with a per-tensor cost alone, its overhead is ~2x."""
    rows = _rows_made_by(2e-4, 0.0)
    r50, r101 = (next(r for r in rows if r.key == f"zhang-{m}-2srv-100g") for m in ("r50", "r101"))
    gap = {}
    for r in (r50, r101):
        model, servers, gbps = published_train._zhang_setup(r)
        it, t_batch, _, _ = published_train._zhang_iteration(model, servers, gbps)
        gap[r.key] = t_batch / r.value - it
    assert gap[r101.key] / gap[r50.key] == pytest.approx(314 / 161, rel=1e-6)


def test_a_row_never_calibrates_its_own_overhead(monkeypatch):
    row, other = published("zhang-vgg16-2srv-100g"), published("zhang-r50-2srv-10g")
    own, others = published_train.zhang_mechanisms(row).value, published_train.zhang_mechanisms(other).value
    rows = tuple(replace(r, value=r.value * 1.2) if r.key == row.key else r for r in PUBLISHED)
    monkeypatch.setattr(published_train, "PUBLISHED", rows)
    assert published_train.zhang_mechanisms(row).value == pytest.approx(own, rel=1e-12)
    assert published_train.zhang_mechanisms(other).value != pytest.approx(others, rel=1e-4)


def test_notes_give_fig1s_rise_where_the_paper_has_one():
    notes = {c.row.key: c.predictions["mechanisms"].note
             for c in compare(("mechanisms",), ("zhang-vgg16-2srv-100g", "zhang-r50-4srv-100g"))}
    # VGG16: 0.5599 -> 0.6301 from 2 to 4 servers; ResNet50 only falls.
    assert "rises 7.0 pt from 2 to 4 servers" in notes["zhang-vgg16-2srv-100g"]
    assert ">= 3.5 pt" in notes["zhang-vgg16-2srv-100g"]
    assert "rises" not in notes["zhang-r50-4srv-100g"]


def test_slower_omni_path_transport_shrinks_the_vgg16_gap():
    """NCCL on OPA's verbs runs far below line rate: 25 GbE loses less against it."""
    eth = published_train.samsi_iteration("vgg16", 64, "25gbe")
    line = published_train.samsi_iteration("vgg16", 64, "opa")
    verbs = published_train.samsi_iteration("vgg16", 64, "opa-verbs")
    assert line < verbs < eth
    assert published_train._drop(eth, verbs) < published_train._drop(eth, line)
    note = compare(("mechanisms",), ("samsi-25gbe",))[0].predictions["mechanisms"].note
    assert "OPA's verbs" in note and "similar through 256 GPUs" in note


def test_compare_reports_progress_row_by_row():
    from fabriclab.bench.published.rows import compare

    seen = []
    result = compare(("mechanisms",), ("samsi-cartdg", "horovod-r101"), progress=lambda *a: seen.append(a))
    assert [c.row.key for c in result] == [k for _, _, k in seen]
    assert [(i, n) for i, n, _ in seen] == [(i, len(result)) for i in range(len(result))]
