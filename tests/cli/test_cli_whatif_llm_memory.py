"""`whatif llm`'s memory check on the command line: the reserve and range said, the record's fit, the
gradient buffer's dtype, a marginal job warned about and a job beyond the range refused."""

import json

from fabriclab.fabric.gpus import gpu_preset
from fabriclab.workload.memory import memory_per_gpu
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import load_model
from tests.cli.test_cli_whatif_llm import fabriclab

MEM = memory_per_gpu(load_model("gpt3-175b"), ParallelConfig(num_gpus=128, tp=4, pp=8, vp=6, gbs=256, seq=2048))
CAP = gpu_preset("h100").memory_bytes / 1e9

GPT3 = ["whatif", "llm", "--model", "gpt3-175b", "--gpus", "128", "--tp", "4", "--pp", "8", "--vp", "6",
        "--gbs", "256"]


def test_the_published_gpt3_run_fits_and_the_record_carries_the_fit(tmp_path):
    done = fabriclab(*GPT3, "--json", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stderr
    flat = " ".join(done.stdout.split())
    need, spread = MEM.total_bytes / 1e9, MEM.spread_bytes / 1e9
    assert f"memory per GPU: {need:.1f} +- {spread:.1f} GB" in flat
    assert f"with the 4.0 GB reserve {need + 4:.1f} of {CAP:.1f} GB" in flat
    assert "warning" not in done.stdout
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    fit = results["memory_fit"]
    assert fit["needed_bytes"] == results["memory"][-1]["bytes"] + fit["reserve_bytes"] and fit["warning"] is None
    bf16 = fabriclab(*GPT3, "--grad-dtype", "bf16", "--json", str(tmp_path / "b.json"))
    rows = json.loads((tmp_path / "b.json").read_text())["results"]["memory"]
    assert rows[1]["GB"] == results["memory"][1]["GB"] / 2 and rows[1]["note"].startswith("bf16")


def test_a_larger_reserve_warns_then_refuses():
    marginal = fabriclab(*GPT3, "--memory-reserve", "10GB")
    assert marginal.returncode == 0, marginal.stderr
    need, spread = MEM.total_bytes / 1e9, MEM.spread_bytes / 1e9
    text = f"warning: memory is marginal: {need + 10 * 2**30 / 1e9:.1f} +- {spread:.1f} GB of {CAP:.1f} GB"
    assert text in " ".join(marginal.stdout.split())
    refused = fabriclab(*GPT3, "--memory-reserve", "20GB")
    assert refused.returncode == 2
    assert f"does not fit: needs {need + 20 * 2**30 / 1e9:.1f} +- {spread:.1f} GB of {CAP:.1f} GB" in refused.stderr
    bad = fabriclab(*GPT3, "--memory-reserve", "lots")
    assert bad.returncode == 2 and "--memory-reserve 'lots'" in bad.stderr
