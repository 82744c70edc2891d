"""The range of a cluster prediction: rows resting on parameters no log determined, and how far they move."""

import math
from dataclasses import replace

import pytest

from fabriclab.fabric.cluster import a100_hdr_prior
from fabriclab.nccl.predict import predict_nccl_table
from fabriclab.nccl.band import DEFAULT_FACTOR, row_bands, spread_factors
from fabriclab.nccl.fit import parameters

SIZES = [1 << 16, 1 << 20, 1 << 22, 1 << 30, 1 << 32]


def _fitted(cluster, unfitted=(), moved=None):
    """`cluster` with a fit record: every parameter fitted except `unfitted`; `moved` name -> value / prior."""
    moved = moved or {}
    record = {}
    for p in parameters(cluster):
        ratio = moved.get(p.name, 1.0)
        record[p.name] = {"value": p.prior * ratio, "prior": p.prior, "fitted": p.name not in unfitted}
    return replace(cluster, fit={"parameters": record})


def test_spread_is_the_rms_of_the_fitted_moves():
    model = _fitted(a100_hdr_prior(), moved={"library.launch_s": 2.0, "library.host_overhead_s": 0.5,
                                             "server.nic_efficiency": 0.8})
    lat, rate = spread_factors(model)
    n_lat = sum(1 for name in model.fit["parameters"] if not any(
        w in name for w in ("bandwidth", "efficiency", "link_factor", "cap")))
    assert lat == pytest.approx(math.exp(math.sqrt(2 * math.log(2) ** 2 / n_lat)))
    n_rate = len(model.fit["parameters"]) - n_lat
    assert rate == pytest.approx(math.exp(math.sqrt(math.log(0.8) ** 2 / n_rate)))
    assert spread_factors(a100_hdr_prior()) == (DEFAULT_FACTOR, DEFAULT_FACTOR)  # never fitted


def test_rows_on_fitted_parameters_have_no_range():
    model = _fitted(a100_hdr_prior(), moved={"library.launch_s": 2.0})
    rows = predict_nccl_table(model, 32, SIZES)
    for row, band in zip(rows, row_bands(model, 32, rows)):
        assert band.prior_parameters == ()
        assert band.busbw_low_GBps == band.busbw_high_GBps == row["busbw_GBps"]


def test_a_prior_parameter_widens_only_the_rows_that_use_it():
    tree_ll128 = [f"library.latencies.tree.LL128.{k}" for k in ("base_s", "intra_step_s", "net_step_s")]
    model = _fitted(a100_hdr_prior(), unfitted=tree_ll128, moved={"library.launch_s": 2.0})
    rows = predict_nccl_table(model, 32, SIZES)
    bands = row_bands(model, 32, rows)
    for row, band in zip(rows, bands):
        if row["algorithm"] == "tree/LL128":
            assert band.prior_parameters == ("tree.LL128 latencies",)
            assert band.busbw_low_GBps < row["busbw_GBps"] < band.busbw_high_GBps
        else:
            assert band.prior_parameters == ()
    assert any(r["algorithm"] == "tree/LL128" for r in rows)  # 32 GPUs run trees at 1 MB
    # once the tree/LL128 latencies are fitted too, their rows' range closes
    closed = row_bands(_fitted(a100_hdr_prior(), moved={"library.launch_s": 2.0}), 32, rows)
    assert all(b.prior_parameters == () for b in closed)


def test_a_cluster_never_fitted_rests_on_priors_everywhere_across_servers():
    model = a100_hdr_prior()
    rows = predict_nccl_table(model, 16, SIZES)
    for row, band in zip(rows, row_bands(model, 16, rows)):
        assert band.prior_parameters
        assert band.busbw_low_GBps < row["busbw_GBps"] <= band.busbw_high_GBps
