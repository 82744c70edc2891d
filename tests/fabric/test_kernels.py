"""The kernel model (`fabric/kernels.py`), its fit to measured kernel tables (`fabric/kernel_fit.py`) and
the defaults that fit gives (`fabric/kernel_defaults.py`)."""

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from fabriclab.fabric.cluster import ComputeSpec, from_dict, to_dict
from fabriclab.fabric.gpus import gpu_preset
from fabriclab.fabric.kernel_fit import (fit_kernel_table, kernel_spread, read_kernel_table, shipped_table,
                                         spread_summary)
from fabriclab.fabric.kernel_defaults import default_kernels, hopper_kernels
from fabriclab.fabric.kernels import (SMALL_KERNEL_S, Attention, Gemm, MemoryPass, kernel_model_from_dict,
                                      wave_share)
from fabriclab.fabric.presets import cluster_preset

H100_TABLE = Path(__file__).resolve().parents[2] / "docs" / "measurements" / "h100-2026-11-27" / "kernels.csv"
H100, H200 = gpu_preset("h100"), gpu_preset("h200")


def _large(summary):
    return {r["kernels"]: r for r in summary}


def test_the_fit_of_the_h200_table_times_its_large_kernels_within_8_percent():
    model = hopper_kernels()
    rows = read_kernel_table(shipped_table())
    by = _large(spread_summary(kernel_spread(model, rows, H200)))
    for kind in ("gemm bf16", "gemm fp8", "attention fwd"):
        assert by[kind]["large_rows"] >= 10 and by[kind]["rms_large"] < 0.08, by[kind]
        assert abs(by[kind]["median_large"]) < 0.04
    assert 0.6 < model.gemm_share["bf16"] <= 0.85 and 0.8 < model.copy_share < 0.95
    assert model.error == pytest.approx(math.sqrt(sum(
        e * e for kind, errs in kernel_spread(model, rows, H200).items() for f, e in errs if f >= 1e11)
        / sum(1 for errs in kernel_spread(model, rows, H200).values() for f, _ in errs if f >= 1e11)), abs=1e-3)


def test_the_h200_fit_carries_to_an_h100_by_its_data_sheet():
    """Another GPU of the generation, measured apart (this project's H100 table): no refit."""
    by = _large(spread_summary(kernel_spread(hopper_kernels(), read_kernel_table(H100_TABLE), H100)))
    assert by["gemm bf16"]["rms_large"] < 0.08 and abs(by["gemm bf16"]["median_large"]) < 0.04
    assert by["attention fwd"]["rms_large"] < 0.1


def test_a_last_partial_wave_and_a_short_k_loop_cost_time():
    model = hopper_kernels()
    full = Gemm(128 * 12, 256 * 11, 8192)  # 132 tiles: one full wave
    over = Gemm(128 * 12 + 1, 256 * 11, 8192)  # 144 tiles: a second, mostly idle wave
    assert wave_share(full.m, full.n, 132) == 1.0
    per_flop = [model.gemm_s(g, H100, "bf16") / g.flops for g in (full, over)]
    assert per_flop[1] > 1.3 * per_flop[0]  # the best tile of three still leaves SMs idle
    short, long = Gemm(8192, 8192, 512), Gemm(8192, 8192, 16384)
    assert model.gemm_s(short, H100, "bf16") / short.flops > 1.2 * model.gemm_s(long, H100, "bf16") / long.flops
    assert model.gemm_s(long, H100, "fp8") < 0.6 * model.gemm_s(long, H100, "bf16")
    assert model.gemm_s(replace(long, bf16=True), H100, "fp8") == model.gemm_s(long, H100, "bf16")
    chunked = Gemm(8192, 8192, 8192, chunks=4)  # TP overlap's chunks: pooled on the compute streams
    assert model.gemm_s(chunked, H100, "bf16") == pytest.approx(
        model.gemm_s(Gemm(2048, 8192, 8192, count=4, grouped=True), H100, "bf16"))
    assert model.gemm_s(chunked, H100, "bf16") < 4 * model.gemm_s(Gemm(2048, 8192, 8192), H100, "bf16")


def test_a_grouped_gemm_pools_its_experts_tiles_and_pads_few_tokens():
    """An MoE layer's grouped GEMM: the experts' tiles share the SMs' waves (4 experts of 32 tiles fill one
    wave of 132 SMs, where 4 kernels each leave three quarters of it idle); few tokens per expert pad their
    tiles (32 rows in a 128-row tile: a quarter of the work is useful)."""
    model = hopper_kernels()
    one = Gemm(512, 1024, 7168)  # at best 4 x 8 = 32 tiles of 128 x 128: a quarter of a wave
    grouped = Gemm(512, 1024, 7168, count=4, grouped=True)
    assert model.gemm_s(grouped, H100, "fp8") < 0.6 * 4 * model.gemm_s(one, H100, "fp8")
    assert wave_share(32, 4096, 132) == pytest.approx(32 / 128 * 32 / 132)  # 32 tiles of 128 x 128
    assert wave_share(32, 4096, 132, groups=8) == pytest.approx(32 / 128 * 128 / 132)
    busy, fixed = model.parts_s(grouped, H100, "fp8")
    assert fixed == model.latency_s and busy > 0  # one launch floor for 4 experts on 4 streams


def test_attention_and_memory_passes():
    model = hopper_kernels()
    a = Attention(1, 32, 4096, 4096, 128)
    assert a.flops == 4 * 32 * 4096 * 4096 * 128 / 2
    assert replace(a, backward=True).flops == 2.5 * a.flops
    assert model.attention_s(replace(a, backward=True), H100) > 2 * model.attention_s(a, H100)
    p = MemoryPass(H100.memory_bandwidth_Bps * model.copy_share, kernels=2)
    assert model.memory_s(p, H100) == pytest.approx(1.0 + 2 * SMALL_KERNEL_S)  # a small kernel's floor each
    assert model.memory_s(p, H200) < model.memory_s(p, H100)  # faster HBM, same compute


def test_other_generations_borrow_hoppers_shares_with_a_wider_range_said():
    a100 = default_kernels(gpu_preset("a100"))
    assert a100.gemm_share == hopper_kernels().gemm_share and a100.error >= 0.15
    assert "not measured on it" in a100.source and default_kernels(H100) is hopper_kernels()


def test_kernel_model_json_round_trip_and_errors():
    model = hopper_kernels()
    assert kernel_model_from_dict(json.loads(json.dumps(model.to_dict()))) == model
    bad = {**model.to_dict(), "gemm_share": {"bf16": 1.5}}
    with pytest.raises(ValueError, match="gemm_share.bf16"):
        kernel_model_from_dict(bad)
    with pytest.raises(ValueError, match="missing"):
        kernel_model_from_dict({"gemm_share": {"bf16": 0.7}})


def test_a_cluster_file_keeps_its_kernel_model_and_scale():
    cluster = cluster_preset("dgx-h100")
    compute = ComputeSpec(gpu=H100, kernels=hopper_kernels(), scale={"bf16": 0.9})
    again = from_dict(json.loads(json.dumps(to_dict(replace(cluster, compute=compute)))))
    assert again.compute.kernels == hopper_kernels() and again.compute.scale == {"bf16": 0.9}
    with pytest.raises(ValueError, match="compute.scale"):
        ComputeSpec(gpu=H100, scale={"bf16": 3})


@pytest.mark.parametrize("text, words", [
    ("op,dtype,M,N\ngemm,bf16,1,2\n", "needs the columns"),
    ("op,dtype,M,N,K,seconds\ngemm,bf16,1,2,x,0.1\n", "line 2"),
    ("op,dtype,M,N,K,seconds\ngemm,bf16,1,2,3,-1\n", "line 2"),
])
def test_bad_kernel_tables_name_the_line(tmp_path, text, words):
    path = tmp_path / "k.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=words):
        read_kernel_table(path)


def test_a_table_with_too_few_gemms_is_refused(tmp_path):
    path = tmp_path / "k.csv"
    path.write_text("op,dtype,M,N,K,seconds\ngemm,bf16,4096,4096,4096,0.0002\n")
    with pytest.raises(ValueError, match="at least 8"):
        fit_kernel_table(read_kernel_table(path), H100)
