"""`whatif llm` and `plan` on clusters whose NVLink domain spans trays (GB200 NVL72): TP and EP may span the
domain, what the domain buys against HGX B200 at the same GPU count comes from the mechanism (EP's
all-to-all on NVLink instead of the NICs), placement is said, and plan prices whole racks."""

import json
import subprocess
import sys

import pytest

from fabriclab.fabric.presets import cluster_preset
from fabriclab.whatif.llm.run import (calibrate_efficiency, carry_calibration, domain_worth, simulate_llm,
                                      with_efficiency)
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import load_model


def test_tp_up_to_the_domain_on_nvl72_and_refused_past_a_server_on_hgx():
    spec = load_model("gpt3-175b")  # 96 heads: TP 16, 24 and 32 divide them
    answer = simulate_llm(spec, ParallelConfig(num_gpus=144, tp=24, pp=6, gbs=288, seq=2048),
                          cluster_preset("gb200-nvl72"))
    assert answer.result_shapes["tp"].num_servers == 1  # the TP group of 24 is inside one domain
    assert "fill 2 NVLink domains of 72" in answer.placement
    worth = domain_worth(spec, answer.par, cluster_preset("gb200-nvl72"), answer)
    assert worth["step_time_s"] is None and "--tp 24" in worth["why"]  # no such layout with domains of 8
    with pytest.raises(ValueError, match=r"--tp 16 on NVLink domains of 72 .*--domain-gpus 64"):
        simulate_llm(spec, ParallelConfig(num_gpus=144, tp=16, pp=9, gbs=288, seq=2048), cluster_preset("gb200-nvl72"))
    from fabriclab.fabric.domains import with_domain_gpus

    sixteen = simulate_llm(spec, ParallelConfig(num_gpus=128, tp=16, pp=8, gbs=256, seq=2048),
                           with_domain_gpus(cluster_preset("gb200-nvl72"), 64))
    assert sixteen.result_shapes["tp"].num_servers == 1 and "64 of each NVLink domain's 72" in sixteen.placement
    with pytest.raises(ValueError, match=r"--tp 16 on NVLink domains of 8 GPUs \(hgx-b200\).*1, 2, 4, 8\)"):
        simulate_llm(spec, ParallelConfig(num_gpus=144, tp=16, pp=9, gbs=288, seq=2048), cluster_preset("hgx-b200"))


def test_expert_parallel_all_to_all_stays_on_nvlink_inside_a_rack():
    """DeepSeek-V3 with EP 64 at the same 512 GPUs: inside 8 NVL72 racks (64 of each) the all-to-all never
    leaves NVLink; on 64 HGX B200 servers each EP group spans 8 servers and their PCIe-bound NICs."""
    spec = load_model("deepseek-v3")
    par = ParallelConfig(num_gpus=512, tp=1, pp=8, ep=64, gbs=1024, seq=4096, recompute="full")
    rack = simulate_llm(spec, par, cluster_preset("gb200-nvl72"), check_memory=False)
    hgx = simulate_llm(spec, par, cluster_preset("hgx-b200"), check_memory=False)
    assert rack.result_shapes["ep"].num_servers == 1 and hgx.result_shapes["ep"].num_servers == 8
    assert hgx.result.split_s["ep"] > 5 * rack.result.split_s["ep"]
    assert rack.step_time_s < hgx.step_time_s
    # the same racks with the NVLink cut at 8 GPUs: the domain, not the GPU, buys the difference
    worth = domain_worth(spec, par, cluster_preset("gb200-nvl72"), rack)
    assert worth["gain"] > 0.5 and worth["split_s"]["ep"] > 5 * rack.result.split_s["ep"]


def test_groups_unlike_rank_0_s_on_domains_of_72_are_refused_with_the_way_out():
    spec = load_model("deepseek-v3")
    par = ParallelConfig(num_gpus=4608, tp=1, pp=2, cp=2, ep=64, gbs=9216, seq=4096, recompute="full")
    with pytest.raises(ValueError, match=r"an ep group of 64 GPUs .*--domain-gpus 64"):
        simulate_llm(spec, par, cluster_preset("gb200-nvl72"), check_memory=False)


def test_a_calibration_carries_across_machine_kinds_as_its_scale():
    spec = load_model("llama3-8b")
    par = ParallelConfig(num_gpus=16, tp=2, gbs=32, seq=8192)
    h100 = cluster_preset("dgx-h100")
    value, _ = calibrate_efficiency(spec, par, h100, 1.2 * simulate_llm(spec, par, h100).step_time_s)
    calibrated = with_efficiency(h100, "bf16", value, "a test step")
    carried = carry_calibration(cluster_preset("gb200-nvl72"), calibrated)
    assert carried.compute.scale == {"bf16": value}
    assert "carried from dgx-h100" in carried.compute.efficiency_source
    slower = simulate_llm(spec, par, carried).step_time_s
    assert slower > simulate_llm(spec, par, cluster_preset("gb200-nvl72")).step_time_s
    with pytest.raises(ValueError, match="holds no compute scale"):
        carry_calibration(carried, h100)


def test_plan_compares_hgx_and_nvl72_with_whole_racks_priced(tmp_path):
    out = tmp_path / "plan.json"
    done = subprocess.run([sys.executable, "-m", "fabriclab", "plan", "--model", "llama3-8b", "--gpus", "576",
                           "--clusters", "hgx-b200,gb200-nvl72", "--gbs", "576", "--seq", "4096", "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = {r["option"]: r for r in json.loads(out.read_text())["results"]["rows"]}
    assert set(rows) == {"hgx-b200 rail 800G", "gb200-nvl72 rail 400G", "gb200-nvl72 rail 400G 64/domain"}
    assert rows["gb200-nvl72 rail 400G"]["gpus_bought"] == 576            # 8 racks, full
    assert rows["gb200-nvl72 rail 400G 64/domain"]["gpus_bought"] == 648  # 9 racks at 64 of 72
    rack = rows["gb200-nvl72 rail 400G"]
    assert rack["servers_usd"] == pytest.approx(8 * 2.5e6)


def test_a_72_gpu_server_with_a_nic_per_4_gpus_costs_groups_of_9_without_inventing_numbers():
    """A rack written as one server (gpus_per_server 72, 18 NICs): a DP group of 18 holds 9 GPUs per server, which
    own 2.25 NICs; they are costed as one NIC of 2.25 x the rate, not refused with numbers nobody gave."""
    from dataclasses import replace

    c = cluster_preset("hgx-b200")
    rack = replace(c, name="rack72", server=replace(c.server, gpus_per_server=72, nics_per_server=18))
    spec = load_model("llama3-8b")
    answer = simulate_llm(spec, ParallelConfig(num_gpus=144, tp=8, pp=2, gbs=144, seq=8192), rack)
    assert answer.result_shapes["dp"].per_server == 9 and answer.step_time_s > 0
    with pytest.raises(ValueError, match=r"--gpus 128 does not fill whole servers of 72 GPUs.*gpus_per_domain 72"):
        simulate_llm(spec, ParallelConfig(num_gpus=128, tp=8, gbs=128, seq=8192), rack)
