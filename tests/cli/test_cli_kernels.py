"""`fabriclab profile kernels` and `calibrate kernels` end to end: measure a table, fit it, use the fit."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fabriclab.fabric.kernel_fit import read_kernel_table
from tests.cli.test_cli_whatif_llm import fabriclab as in_process

H100_TABLE = Path(__file__).resolve().parents[2] / "docs" / "measurements" / "h100-2026-11-27" / "kernels.csv"


def fabriclab(*argv):
    """A whole process: `profile kernels` sets torch's threads, which must not leak into the test process."""
    return subprocess.run([sys.executable, "-m", "fabriclab", *argv], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "FABRICLAB_STORE": "off"})


def test_profile_kernels_writes_a_table_calibrate_reads(tmp_path):
    out = tmp_path / "k.csv"
    done = fabriclab("profile", "kernels", "--device", "cpu", "--quick", "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = read_kernel_table(out)
    assert sum(r.op == "gemm" for r in rows) == 8 and {r.op for r in rows} >= {"sdpa_causal_fwd", "copy"}
    assert all(r.seconds > 0 for r in rows) and "calibrate kernels" in done.stdout


@pytest.mark.parametrize("argv, words", [(["--device", "tpu"], "--device 'tpu'"),
                                         (["--device", "cpu"], "--quick"),
                                         (["--device", "cpu", "--quick", "--budget", "0"], "--budget")])
def test_profile_kernels_bad_options_are_one_line(tmp_path, argv, words):
    done = fabriclab("profile", "kernels", "--out", str(tmp_path / "k.csv"), *argv)
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr


def test_calibrate_kernels_writes_a_cluster_whatif_then_times_by(tmp_path):
    out = tmp_path / "c.json"
    done = in_process("calibrate", "kernels", "--table", str(H100_TABLE), "--cluster", "dgx-h100", "--out", str(out),
                     "--json", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stderr
    assert "GEMM bf16: share of peak" in done.stdout
    kernels = json.loads(out.read_text())["compute"]["kernels"]
    assert 0.6 < kernels["gemm_share"]["bf16"] < 0.85 and kernels["error"] < 0.1
    record = json.loads((tmp_path / "r.json").read_text())
    spread = {r["kernels"]: r for r in record["results"]["spread"]}
    assert spread["gemm bf16"]["rms_large"] < 0.08
    again = in_process("whatif", "llm", "--cluster", str(out), "--model", "llama3-8b", "--gpus", "8", "--tp", "2",
                      "--gbs", "16", "--seq", "2048")
    assert again.returncode == 0, again.stderr
    assert "fit of kernels.csv on H100" in " ".join(again.stdout.split())


def test_calibrate_kernels_of_a_bad_table_is_one_line(tmp_path):
    bad = tmp_path / "k.csv"
    bad.write_text("op,dtype\n")
    done = in_process("calibrate", "kernels", "--table", str(bad))
    assert done.returncode == 2 and "needs the columns" in done.stderr


def test_attention_and_gpu_spread_options_reach_the_step(tmp_path):
    args = ["whatif", "llm", "--model", "llama3-8b", "--gpus", "8", "--tp", "2", "--gbs", "8", "--seq", "2048",
            "--recompute", "selective"]
    steps = {}
    for extra in ([], ["--attention", "unfused"], ["--gpu-spread", "0"]):
        out = tmp_path / f"r{len(steps)}.json"
        done = in_process(*args, *extra, "--json", str(out))
        assert done.returncode == 0, done.stderr
        record = json.loads(out.read_text())
        steps[tuple(extra)] = record["step_time_s"]
    assert record["config"]["attention"] == "flash"
    assert steps[("--attention", "unfused")] > 1.05 * steps[()]  # scores and softmax in memory
    assert steps[("--gpu-spread", "0")] < steps[()]  # no stragglers
