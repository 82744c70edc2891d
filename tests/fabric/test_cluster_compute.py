"""The cluster's compute (GPU roofline, measured efficiency): file round trip, old files, presets and predictions."""

import json

import pytest

from fabriclab.fabric.cluster import (
    ComputeSpec,
    cluster_gpu,
    dumps,
    load_cluster,
    prior_cluster,
    save_cluster,
    with_server,
)
from fabriclab.fabric.gpus import gpu_preset
from fabriclab.fabric.links import link_preset
from fabriclab.fabric.presets import PRESETS, cluster_preset
from fabriclab.nccl.predict import collective_times


def test_round_trip_with_compute(tmp_path):
    compute = ComputeSpec(gpu=gpu_preset("h100"), efficiency={"bf16": 0.42},
                          efficiency_source="Llama-3-8B TP2 x DP4 on 8 H100, step 1.23 s")
    model = prior_cluster(gpus_per_server=8, gpu_name="H100-SXM5-80GB", compute=compute)
    save_cluster(model, tmp_path / "c.json")
    assert load_cluster(tmp_path / "c.json") == model
    data = json.loads(dumps(model))
    assert data["compute"]["gpu"]["peak_flops"]["fp8"] == 1978.9e12 and data["compute"]["efficiency"] == {"bf16": 0.42}


def test_a_file_written_before_compute_loads(tmp_path):
    data = json.loads(dumps(cluster_preset("dgx-h100")))
    del data["compute"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    old = load_cluster(tmp_path / "old.json")
    assert old.compute is None
    assert cluster_gpu(old) == gpu_preset("h100")  # from server.gpu_name


@pytest.mark.parametrize("edit, words", [
    (lambda c: c["gpu"]["peak_flops"].update(bf16=-1), ["compute.gpu", "peak_flops.bf16 is -1"]),
    (lambda c: c["gpu"].pop("memory_bytes"), ["compute.gpu", "memory_bytes"]),
    (lambda c: c.update(efficiency={"bf16": 1.5}), ["compute", "efficiency.bf16", "(0, 1]"]),
    (lambda c: c.update(efficiency={"fp8": 0.3}), ["compute", "'fp8'", "no peak"]),
    (lambda c: c.update(flavour="x"), ["compute", "unknown key 'flavour'"]),
])
def test_bad_compute_names_file_and_key(tmp_path, edit, words):
    data = json.loads(dumps(cluster_preset("dgx-a100")))
    edit(data["compute"])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as err:
        load_cluster(path)
    assert str(path) in str(err.value) and all(w in str(err.value) for w in words), str(err.value)


def test_cluster_gpu_prefers_compute_and_says_how_to_fix_an_unknown_gpu():
    h200 = cluster_preset("hgx-h200")
    assert cluster_gpu(h200) == gpu_preset("h200")
    custom = ComputeSpec(gpu=gpu_preset("b200"))
    assert cluster_gpu(with_server(prior_cluster(gpus_per_server=8, compute=custom), gpu_name="GPU")) == custom.gpu
    with pytest.raises(ValueError, match="names GPU 'GPU'.*add a `compute` section.*h100"):
        cluster_gpu(prior_cluster(gpus_per_server=8))


def test_every_preset_carries_its_gpu_with_no_efficiency():
    for name, build in PRESETS.items():
        cluster = build()
        assert cluster.compute is not None and cluster.compute.efficiency == {}, name
        assert cluster.compute.gpu.name.split("-")[0] in cluster.server.gpu_name, name
        assert cluster.server.memory_bandwidth_Bps == cluster.compute.gpu.memory_bandwidth_Bps / 2, name


def test_new_presets():
    h200, b200 = cluster_preset("hgx-h200"), cluster_preset("HGX-B200")
    assert h200.server.intra_bandwidth_Bps == link_preset("NVLink-H100").effective_bandwidth(True)
    assert b200.server.intra_bandwidth_Bps == pytest.approx(2 * h200.server.intra_bandwidth_Bps)
    assert h200.server.nic_bandwidth_Bps == 50e9 and b200.server.nic_bandwidth_Bps == 100e9
    assert b200.server.pcie_bandwidth_Bps == h200.server.pcie_bandwidth_Bps  # both PCIe 5.0 x16
    for cluster in (h200, b200):
        assert cluster.server.gpus_per_server == cluster.server.nics_per_server == 8
        assert cluster.network.fabric == "rail" and cluster.network.leaf_ports == 32
        assert cluster.library.nccl_version == "2.27.7"


def test_new_presets_predict_and_b200_is_faster_at_1gb():
    sizes = [1 << 20, 1 << 30]
    h200, _ = collective_times(cluster_preset("hgx-h200"), 64, sizes)
    b200, _ = collective_times(cluster_preset("hgx-b200"), 64, sizes)
    assert all(t > 0 for t in (*h200, *b200))
    assert b200[1] < h200[1]


def test_a_prior_takes_the_nvlink_of_its_gpu():
    rates = {name: prior_cluster(gpus_per_server=8, gpu_name=name).server.intra_bandwidth_Bps
             for name in ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA B200")}
    nvlink = {g: link_preset(f"NVLink-{g}").effective_bandwidth(True) for g in ("A100", "H100", "B200")}
    assert list(rates.values()) == [nvlink["A100"], nvlink["H100"], nvlink["H100"], nvlink["B200"]]


def test_presets_carry_their_generation_s_ll128_ceiling_so_newer_gpus_are_not_slower():
    from fabriclab.fabric.presets import cluster_preset
    from fabriclab.nccl.predict import collective_times

    per_channel = {name: cluster_preset(name).library.protocols["LL128"].busbw_cap_Bps
                   / cluster_preset(name).library.num_channels for name in ("dgx-a100", "dgx-h100", "hgx-b200")}
    assert per_channel == {"dgx-a100": 20.0e9, "dgx-h100": 36.7e9, "hgx-b200": 73.4e9}
    # 1 GB all-gather on 64 GPUs: NCCL 2.27 picks LL128 on B200; with A100's ceiling it ran below the H200
    t = {n: collective_times(cluster_preset(n), 64, [1 << 30], "allgather")[0][0] for n in ("hgx-h200", "hgx-b200")}
    assert t["hgx-b200"] < t["hgx-h200"]
