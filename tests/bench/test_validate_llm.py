"""`validate emulated --workload llm` without root: the prediction of the emulated cluster and the comparison."""

from dataclasses import replace

import pytest

from fabriclab.bench.validate.llm import LlmValidateConfig, cluster_model, compare, predict

LINK = {"step_s": 100e-6, "bandwidth_Bps": 1e9}


def test_prediction_of_a_network_bound_layout_is_mostly_dp_and_scales_with_the_link():
    config = LlmValidateConfig(hosts=4, gpus_per_server=1, tp=1, pp=2, gbs=16, link_Bps=2.5e6)
    one = replace(config.par(), num_gpus=1, pp=1, zero=0)
    calibration = {"par": one, "step_time_s": 0.2}
    slow = predict(config, calibration, LINK)
    fast = predict(replace(config, link_Bps=25e6), calibration, LINK)
    assert slow["split_s"]["dp"] > 0.5 * slow["step_time_s"]
    for s, split in enumerate(slow["answer"].result.split_by_stage):  # stage by stage: each its own DP stream
        assert split["dp"] == pytest.approx(10 * fast["answer"].result.split_by_stage[s]["dp"], rel=0.05)
    # the compute is the 1-rank step's shared by pp x dp ranks, give or take the stages' difference (the
    # output layer on the last one, the embedding on the first)
    assert slow["split_s"]["compute"] == pytest.approx(0.2 / 4, rel=0.25)


def test_float32_halves_the_bandwidths_the_bf16_simulator_sees():
    f32 = cluster_model(LlmValidateConfig(dtype="float32"), LINK)
    bf16 = cluster_model(LlmValidateConfig(dtype="bfloat16"), LINK)
    assert f32.server.nic_bandwidth_Bps == pytest.approx(bf16.server.nic_bandwidth_Bps / 2)
    assert f32.server.intra_bandwidth_Bps == pytest.approx(bf16.server.intra_bandwidth_Bps / 2)


def test_the_measured_goodput_sets_the_nics_and_the_framing_share_stands_in_without_one():
    config = LlmValidateConfig(hosts=4, gpus_per_server=1, tp=1, pp=2, gbs=16, link_Bps=2.5e6)
    calibration = {"par": replace(config.par(), num_gpus=1, pp=1, zero=0), "step_time_s": 0.2}
    framing, half = predict(config, calibration, LINK), predict(config, calibration, LINK, 0.5)
    assert cluster_model(config, LINK, 0.5).server.nic_bandwidth_Bps == pytest.approx(2.5e6 * 0.5 * 0.5)
    assert half["split_s"]["dp"] == pytest.approx(framing["split_s"]["dp"] * (1448 / 1514) / 0.5, rel=0.05)


def test_compare_judges_the_step_and_only_the_communicators_above_a_tenth_of_it():
    measured = {"step_time_s": 1.0, "split_s": {"compute": 0.3, "tp": 0.05, "dp": 0.5, "pp": 0.15, "other": 0.0}}
    predicted = {"step_time_s": 1.1, "split_s": {"compute": 0.3, "tp": 0.5, "dp": 0.6, "pp": 0.2}}
    rows = {r["part"]: r for r in compare(measured, predicted)}
    assert rows["step"]["ok"] and rows["step"]["error"] == pytest.approx(0.1)
    assert rows["tp"]["ok"] is None  # 5 % of the step: not judged, however wrong
    assert rows["dp"]["ok"] and rows["pp"]["ok"] is False  # +20 % ok, +33 % not
