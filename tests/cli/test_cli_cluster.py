"""`fabriclab cluster show|export` and `whatif llm`'s fabric options (--fabric, --bisection, --nic-rate):
the exported file loads back as the preset, the PCIe cap is said where it binds."""

import json

from fabriclab.fabric.cluster import load_cluster, to_dict
from fabriclab.fabric.presets import cluster_preset
from tests.cli.test_cli_whatif_llm import fabriclab


def test_export_writes_a_file_the_cluster_loader_reads_back_as_the_preset(tmp_path):
    out = tmp_path / "h100.json"
    done = fabriclab("cluster", "export", "dgx-h100", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert to_dict(load_cluster(out)) == to_dict(cluster_preset("dgx-h100"))
    edited = tmp_path / "h100-800g.json"
    done = fabriclab("cluster", "export", "dgx-h100", "--nic-rate", "800Gbps", "--fabric", "fat-tree",
                     "--bisection", "1/2", "--out", str(edited))
    assert done.returncode == 0, done.stderr
    c = load_cluster(edited)
    assert (c.server.nic_bandwidth_Bps, c.network.fabric, c.network.bisection) == (100e9, "fat-tree", 0.5)
    # and a command takes it
    done = fabriclab("whatif", "llm", "--cluster", str(edited), "--gpus", "16", "--gbs", "32")
    assert done.returncode == 0, done.stderr
    assert "runs at most 461 Gb/s" in " ".join(done.stdout.split())


def test_show_says_what_a_prediction_takes_and_the_pcie_cap_where_it_binds(tmp_path):
    plain = fabriclab("cluster", "show", "dgx-h100")
    assert plain.returncode == 0, plain.stderr
    assert "GPU-NIC PCIe" in plain.stdout and "PCIe cap" not in plain.stdout
    fast = fabriclab("cluster", "show", "dgx-h100", "--nic-rate", "800Gbps", "--json", str(tmp_path / "r.json"))
    assert "each 800 Gb/s NIC runs at most 461 Gb/s" in " ".join(fast.stdout.split())
    assert max(len(line) for line in fast.stdout.splitlines()) <= 80
    rows = json.loads((tmp_path / "r.json").read_text())["results"]
    assert any(r["part"] == "PCIe cap" for r in rows)


def test_whatif_llm_takes_the_plans_fabric_options():
    args = ["whatif", "llm", "--gpus", "16", "--gbs", "32"]
    base = fabriclab(*args)
    varied = fabriclab(*args, "--nic-rate", "800Gbps", "--fabric", "fat-tree", "--bisection", "1/4")
    assert base.returncode == 0 and varied.returncode == 0, varied.stderr
    assert "(dgx-h100 fat-tree 800G bisection 1/4)" in " ".join(varied.stdout.split())
    assert "runs at most 461 Gb/s" not in base.stdout and "runs at most 461 Gb/s" in " ".join(varied.stdout.split())
    bad = fabriclab(*args, "--fabric", "torus")
    assert bad.returncode == 2 and "--fabric 'torus': give rail or fat-tree" in bad.stderr


def test_the_main_help_lists_the_cluster_group():
    done = fabriclab("--help")
    assert "cluster" in done.stdout and "export it as a file to edit" in " ".join(done.stdout.split())


def test_the_bandwidth_sweep_marks_the_rates_pcie_caps(tmp_path):
    done = fabriclab("whatif", "llm", "--gpus", "16", "--gbs", "32", "--bandwidth", "400Gbps,800Gbps", "--json",
                     str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stderr
    assert "800*" in done.stdout and "* 800 Gb/s: the GPU-to-NIC PCIe path" in done.stdout
    sweep = json.loads((tmp_path / "r.json").read_text())["results"]["bandwidth_sweep"]
    assert [r["pcie_cap"] is not None for r in sweep] == [False, True]


def test_list_shows_every_preset_with_its_domain_nics_and_price(tmp_path):
    out = tmp_path / "list.json"
    done = fabriclab("cluster", "list", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) <= 80
    results = json.loads(out.read_text())["results"]
    rows = {r["preset"]: r for r in results["presets"]}
    nics = {r["fabric"]: r for r in results["nics"]}
    assert {"NDR", "400GbE", "XDR", "800GbE", "1600GbE"} <= set(nics) and nics["1600GbE"]["estimate"]
    assert nics["1600GbE"]["Gbps"] == 1600 and nics["1600GbE"]["nic"] > nics["XDR"]["nic"] > nics["NDR"]["nic"]
    from fabriclab.fabric.presets import PRESETS

    assert set(rows) == set(PRESETS)
    nvl = rows["gb300-nvl72"]
    assert (nvl["gpus_per_server"], nvl["gpus_per_domain"], nvl["nic_Gbps"], nvl["price_kind"]) == (4, 72, 800, "estimate")
    assert rows["dgx-h100"]["price_kind"] == "listing" and rows["tx-gaia-opa"]["usd_per_gpu"] is None
    shown = fabriclab("cluster", "show", "gb200-nvl72")
    assert "72 GPUs (18 servers of 4, one node to NCCL from 2.20)" in " ".join(shown.stdout.split())


def test_show_says_the_runs_nccl_settings_and_tuner_rules():
    from pathlib import Path

    corpus = Path(__file__).resolve().parents[2] / "examples" / "nccl-corpus"
    done = fabriclab("cluster", "show", str(corpus / "gcp-a3mega-h100" / "cluster.json"), "--format", "plain")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert ("NCCL settings NCCL_ALGO=Ring,Tree NCCL_BUFFSIZE=8388608 NCCL_NVLS_ENABLE=0 NCCL_PROTO=Simple"
            in text)
    assert ("tuner plugin 2 rules override NCCL's choice: 2 servers of 8+ GPUs: allreduce 0B+ tree/Simple, "
            "default 0B+ ring/Simple") in text
    assert all(len(line) <= 80 for line in done.stdout.splitlines())
    plain = fabriclab("cluster", "show", "dgx-h100", "--format", "plain")
    assert "tuner plugin" not in plain.stdout and "NCCL settings" not in plain.stdout
