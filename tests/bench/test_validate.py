"""Validation without root: the emulation's model (topology, executor), the comparison and its report."""

import math

import numpy as np
import pytest

from fabriclab.bench.validate.run import ValidateConfig, compare, estimate_times
from fabriclab.bench.validate.executor import ExecutorCosts, simulate_executor
from fabriclab.bench.validate.model import (TCP_PAYLOAD_EFFICIENCY, EmuModel, emulated_topology,
                                            model_from_calibration, plan_iterations, simulate_model,
                                            simulate_plain, stream_efficiency)
from fabriclab.collectives.registry import build_schedule
from fabriclab.fabric import star
from fabriclab.report import validate as report

B = 1e9
S = 4 << 20


def test_emulated_topology_is_the_shaped_spec_with_measured_latency():
    config = ValidateConfig(topology="fat-tree", link="1Gbps", dilation=4)
    topo = emulated_topology(config.spec(), 4, hop_latency_s=2e-6, efficiency=0.5, alpha_s=1e-3)
    assert "bisection=1/2" in topo.name and topo.num_endpoints == 4
    assert np.allclose(topo.bandwidth_Bps, 1e9 / 8 / 4 * 0.5)
    assert len(topo.route(0, 2)) == 4  # across leaves: host, leaf, spine, leaf, host
    assert topo.path_latency_s(0, 2) == pytest.approx(4 * 2e-6 + 1e-3)  # alpha once, on the host's link
    assert topo.path_latency_s(0, 1) == pytest.approx(2 * 2e-6 + 1e-3)


def test_model_takes_the_wire_out_of_the_calibrated_step():
    model = model_from_calibration({"step_s": 100e-6, "gamma_s_per_byte": 1e-10}, hop_latency_s=5e-6)
    assert model.alpha_s == pytest.approx(90e-6) and model.gamma_s_per_byte == 1e-10
    assert model.efficiency == TCP_PAYLOAD_EFFICIENCY == 1448 / 1514
    assert model_from_calibration({"step_s": 1e-6}, hop_latency_s=5e-6).alpha_s == 0.0
    with pytest.raises(ValueError, match="payload share"):
        EmuModel(efficiency=1.5)


def test_stream_calibration_gives_the_goodput_share():
    # 8 MiB in 0.2 s + 1 ms of per-message time, 128 KiB of it free (bucket): at 50 MB/s, 0.827 of the rate.
    calibration = {"stream_s": 0.201, "stream_bytes": 8 << 20, "step_s": 1e-3}
    share = stream_efficiency(calibration, 50e6, burst_bytes=128 << 10)
    assert share == pytest.approx(((8 << 20) - (128 << 10)) / 0.2 / 50e6)
    assert stream_efficiency(calibration, 1e6) == 1.0  # never above the shaped rate
    assert stream_efficiency({"step_s": 1e-3}, 50e6) is None


@pytest.mark.parametrize("algo, segment, expected", [
    ("ring", S, 1.5), ("ring", S // 4, 1.5), ("direct", S, 1.5),
    # Binomial, one segment: the executor posts both broadcast sends of rank 0 at once (their data is
    # final after the reduce), so they share its uplink: 1 + 1 + 2 (shared) + 1 = 5 S/B, where the
    # step-by-step simulator says 4 S/B.
    ("binomial", S, 5.0),
    # Four segments pipeline the tree across steps: 3.75 S/B.
    ("binomial", S // 4, 3.75),
])
def test_executor_model_on_a_star_without_latency(algo, segment, expected):
    schedule = build_schedule("allreduce", algo, 4, S // 4)
    time_s = simulate_executor(schedule, star(hosts=4, link=f"{B}B/s@0us"), itemsize=4, segment_bytes=segment)
    assert time_s * B / S == pytest.approx(expected, rel=1e-9)


def test_executor_model_adds_the_reduction_cost_of_each_step():
    schedule = build_schedule("allreduce", "ring", 2, S // 4)
    topo = star(hosts=2, link=f"{B}B/s@0us")
    base = simulate_executor(schedule, topo, itemsize=4, segment_bytes=S)
    slower = simulate_executor(schedule, topo, itemsize=4, segment_bytes=S,
                               costs=ExecutorCosts(gamma_s_per_byte=1e-9))
    assert slower - base == pytest.approx(S / 2 * 1e-9)  # one reduce of half the buffer on the path


def test_plan_gives_big_sizes_fewer_iterations():
    groups = plan_iterations({1024: 1e-4, 1 << 20: 0.05, 16 << 20: 1.0, 256 << 20: 20.0}, budget_s=6, max_iters=10)
    assert [(g.sizes, g.iters, g.warmup) for g in groups] == [
        ((1024, 1 << 20), 10, 1), ((16 << 20,), 6, 1), ((256 << 20,), 1, 0)]


def test_config_checks_and_estimates():
    with pytest.raises(ValueError, match="use one of star, fat-tree"):
        ValidateConfig(topology="torus")
    with pytest.raises(ValueError, match="unknown allreduce algorithm"):
        ValidateConfig(algos=("nope",))
    config = ValidateConfig(topology="star", hosts=4, algos=("ring", "native"), sizes_bytes=(S,),
                            link="1Gbps", dilation=2, efficiency=1.0)
    # ring and native (Gloo's ring) each move 1.5 S at 500 Mbit/s
    assert estimate_times(config)[S] == pytest.approx(2 * 1.5 * S / 62.5e6, rel=1e-6)


def _measured(times: dict) -> dict:
    rows = [{"algo": a, "size_bytes": s, "time_us": t * 1e6, "iters": 3, "num_wrong": 0}
            for (a, s), t in times.items()]
    return {"rows": rows, "hop_latency_s": 2e-6, "world_size": 4,
            "calibration": {"step_s": 104e-6, "gamma_s_per_byte": 1e-10, "copy_s_per_byte": 5e-11}}


def test_compare_puts_measured_and_simulated_side_by_side():
    config = ValidateConfig(topology="star", algos=("ring", "native"), sizes_bytes=(1024, S), link="1Gbps",
                            dilation=2)
    fluid = 1.5 * S / (62.5e6 * TCP_PAYLOAD_EFFICIENCY)
    out = compare(config, _measured({("ring", 1024): 1e-3, ("ring", S): fluid * 1.05,
                                     ("native", 1024): 1e-3, ("native", S): fluid}))
    assert out["model"]["alpha_s"] == pytest.approx(100e-6)
    rows = {(r["algo"], r["size_bytes"]): r for r in out["rows"]}
    big = rows[("ring", S)]
    assert big["plain_s"] < big["model_s"]  # the model adds framing, alpha and reductions
    assert big["err_model_pct"] == pytest.approx((big["model_s"] / big["measured_s"] - 1) * 100)
    assert rows[("native", S)]["model_s"] == big["model_s"]  # native is modelled as Gloo's ring
    assert -10 < big["err_model_pct"] < 10
    assert rows[("ring", 1024)]["err_plain_pct"] < -90  # 1 KB: software time, not bandwidth


def test_report_summarizes_at_one_megabyte_and_up(tmp_path):
    rows = [{"topology": "star", "algo": a, "size_bytes": s, "measured_s": 1.0, "plain_s": 0.5,
             "model_s": 1.0 + e / 100, "err_plain_pct": -50.0, "err_model_pct": e, "iters": 1, "num_wrong": 0}
            for a, s, e in [("ring", 1024, -90.0), ("ring", 1 << 20, 4.0), ("tree", 1 << 20, -12.0),
                            ("tree", 16 << 20, 2.0)]]
    summary = report.summarize(rows)
    assert summary["num_rows"] == 3
    assert summary["model"]["num_within"] == 2 and summary["model"]["max_abs_pct"] == 12.0
    assert summary["model"]["median_abs_pct"] == 4.0
    assert summary["model"]["worst"][0]["algo"] == "tree"
    assert summary["plain"]["num_within"] == 0
    assert report.per_algo(rows) == {"ring": 4.0, "tree": 12.0}
    assert "2/3 rows >= 1MB within 10%" in report.summary_lines(summary)[1]
    assert report.markdown(rows, summary).count("\n| star |") == 4
    assert report.plot(rows, tmp_path / "v.png").stat().st_size > 0
    assert math.isnan(report.summarize([])["model"]["median_abs_pct"])


def test_plain_and_model_agree_on_a_fluid_ring():
    topo = emulated_topology(ValidateConfig().spec(), 1.0)
    plain = simulate_plain(topo, "ring", 4, S)
    assert simulate_model(topo, "ring", 4, S, EmuModel(efficiency=1.0)) == pytest.approx(plain, rel=1e-9)
