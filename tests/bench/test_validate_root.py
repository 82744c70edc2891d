"""A tiny validation for real (root): 2 algorithms x 2 sizes on a 3-host emulated star.

Beware, as for every root test: it tears down any emulated cluster that is up on this machine.
"""

import math
import os
import subprocess

import pytest

from fabriclab.bench.validate.run import ValidateConfig, run_validation
from fabriclab.emu import netns

pytestmark = pytest.mark.root


def _problem() -> str | None:
    try:
        netns.check_system()
    except netns.EmuUnavailable as exc:
        return str(exc)
    probe = f"flprobev{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` fails here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)
    return None


def test_tiny_validation_on_an_emulated_star():
    problem = _problem()
    if problem:
        pytest.skip(problem)
    config = ValidateConfig(topology="star", hosts=3, algos=("ring", "native"), sizes_bytes=(64 << 10, 1 << 20),
                            link="1Gbps", dilation=4, max_iters=3, budget_s=1.0, timeout_s=60)
    out = run_validation(config)
    rows = out["rows"]
    assert [(r["algo"], r["size_bytes"]) for r in rows] == [
        ("ring", 64 << 10), ("ring", 1 << 20), ("native", 64 << 10), ("native", 1 << 20)]
    assert all(r["num_wrong"] == 0 for r in rows)
    assert out["hop_latency_s"] > 0 and out["calibration"]["step_s"] > 0 and out["calibration"]["stream_s"] > 0
    assert 0.5 < out["model"]["efficiency"] <= 1 and out["model"]["burst_bytes"] == 128 << 10
    assert out["emulated_rate_Bps"] == pytest.approx(1e9 / 8 / 4)
    for r in rows:
        assert r["measured_s"] > 0 and r["model_s"] > 0 and r["plain_s"] > 0
        assert math.isfinite(r["err_model_pct"])
    # 1 MB moves 4/3 MB per link at 31 MB/s (~45 ms): the wire dominates, even on a busy machine.
    big = [r for r in rows if r["size_bytes"] == 1 << 20]
    assert all(0.5 < r["model_s"] / r["measured_s"] < 2 for r in big), big
