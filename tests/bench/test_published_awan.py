"""Awan et al.'s S-Caffe rows: the mechanisms behind each prediction, and what the paper leaves open."""

from dataclasses import replace

import pytest

from fabriclab.bench.published import hpc
from fabriclab.bench.published.data import PUBLISHED, published

AWAN_KEYS = ("awan-cc8-speedup", "awan-cb4-speedup", "awan-cb8-speedup", "awan-cc8-over-cb8")


def test_a_prediction_does_not_move_when_the_published_values_do(monkeypatch):
    before = {k: hpc.awan_mechanisms(published(k)).value for k in AWAN_KEYS}
    rows = tuple(replace(r, value=r.value * 1.7) if r.key.startswith("awan-") else r for r in PUBLISHED)
    monkeypatch.setattr(hpc, "PUBLISHED", rows)
    for key in AWAN_KEYS:
        row = next(r for r in rows if r.key == key)
        assert hpc.awan_mechanisms(row).value == pytest.approx(before[key], rel=1e-12), key


def test_the_basic_design_is_mvapich2s_host_staged_cpu_reduce():
    on_host = hpc.scaffe_time(hpc.MV2_ALGO, True, hpc.CPU_REDUCE_S_PER_BYTE)
    staging = hpc.mv2_basic_time() - on_host
    assert staging == pytest.approx(2 * hpc.CAFFENET_BYTES / hpc.PCIE_STAGING_BPS, rel=1e-9)
    # Reducing on the CPU is what makes SC-B slow: with GPU kernels the same schedule is much faster.
    assert hpc.mv2_basic_time(hpc.K80_REDUCE_S_PER_BYTE) < 0.6 * hpc.mv2_basic_time()


def test_cb4_loses_to_cb8_only_once_the_chain_is_pipelined():
    ratios = [hpc.hr_times(n)["awan-cb4"] / hpc.hr_times(n)["awan-cb8"] for n in (1, 4, 16)]
    assert ratios[0] < 1 < ratios[2]            # one chunk: a chain of 8 costs 7 buffer hops, of 4 only 3
    assert ratios == sorted(ratios)             # more chunks: the chain's depth fades, the extra step stays


def test_the_papers_own_model_needs_two_different_chunk_counts():
    by_key = {k: published(k).value for k in AWAN_KEYS}
    cc8_over_cb8 = by_key["awan-cc8-over-cb8"]
    cb4_over_cb8 = by_key["awan-cb8-speedup"] / by_key["awan-cb4-speedup"]
    n_cc, n_cb4 = hpc.paper_model_chunks(cc8_over_cb8, cb4_over_cb8)
    assert hpc.paper_model(n_cc)[0] == pytest.approx(cc8_over_cb8, rel=1e-9)
    assert hpc.paper_model(n_cb4)[1] == pytest.approx(cb4_over_cb8, rel=1e-9)
    assert n_cc < 4 and n_cb4 > 8   # no single chunk count gives both measured ratios
    note = hpc.awan_mechanisms(published("awan-cc8-over-cb8")).note
    assert f"n = {n_cc:.1f}" in note and "not determined" in note


def test_every_awan_mechanism_input_has_a_source():
    for key in AWAN_KEYS:
        for i in hpc.awan_mechanisms(published(key)).inputs:
            assert i.name and i.value and i.source, (key, i)
