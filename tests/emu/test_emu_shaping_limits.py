"""The rates tc's tbf can shape: `check_shaping` refuses the others before anything is built, and (as root)
tc itself keeps the burst just inside the limits and wraps or refuses it just outside."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from fabriclab.emu.cluster import (MAX_TC_BURST_S, MAX_TC_BYTES, MIN_BURST_BYTES, EmuConfig, check_shaping,
                                   shaping)
from fabriclab.fabric.scenario import TopologySpec, build_topology

CONFIG = EmuConfig()
LOW_BPS = MIN_BURST_BYTES / MAX_TC_BURST_S  # slower: the 128 KiB burst takes more ticks than 32 bits hold
HIGH_BPS = MAX_TC_BYTES / CONFIG.queue_s  # faster: the queue limit (rate * 10 ms) needs more than 32 bits


def star(bandwidth_Bps: float):
    return build_topology(TopologySpec(kind="star", hosts=2, bandwidth_Bps=bandwidth_Bps))


def test_the_default_range_is_what_tc_was_seen_to_take():
    # measured with iproute2 6.1: 3000 bit/s wrapped the burst, 3900 bit/s kept it; 3.4 Tbit/s was taken,
    # 3.5 Tbit/s refused ("illegal value for limit")
    assert 3000 < LOW_BPS * 8 < 3900
    assert 3.4e12 < HIGH_BPS * 8 < 3.5e12


@pytest.mark.parametrize("bits_per_s, dilation", [(4e3, 1), (1e9, 1), (3.4e12, 1), (1e9, 2e5), (25e9, 100)])
def test_rates_tbf_can_shape_pass(bits_per_s, dilation):
    check_shaping(star(bits_per_s / 8), EmuConfig(dilation=dilation))


@pytest.mark.parametrize("bits_per_s, dilation", [(3e3, 1), (3.5e12, 1), (1e15, 1), (1e9, 1e6)])
def test_rates_tbf_cannot_shape_are_refused(bits_per_s, dilation):
    with pytest.raises(ValueError, match="change --link or --dilation"):
        check_shaping(star(bits_per_s / 8), EmuConfig(dilation=dilation))


def test_a_long_queue_lowers_the_top_rate_and_a_long_burst_is_refused():
    check_shaping(star(1e9 / 8), EmuConfig(queue_s=1.0))
    with pytest.raises(ValueError, match="344 Mbit/s"):
        check_shaping(star(1e9 / 8), EmuConfig(queue_s=100.0))
    with pytest.raises(ValueError, match="--burst 300 s"):
        check_shaping(star(1e9 / 8), EmuConfig(burst_s=300.0))


def _tbf(ns: str, rate_Bps: float) -> tuple[int, subprocess.CompletedProcess]:
    """Add the emulator's tbf for `rate_Bps` on lo of `ns`: (burst asked for, tc's answer)."""
    burst, limit = shaping(rate_Bps, CONFIG)
    subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", "lo", "root"], capture_output=True)
    done = subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "tbf", "rate",
                           f"{round(rate_Bps * 8)}bit", "burst", str(burst), "limit", str(limit)],
                          capture_output=True, text=True)
    return burst, done


def _burst_kept(ns: str) -> int:
    shown = subprocess.run(["tc", "-n", ns, "-j", "qdisc", "show", "dev", "lo"], capture_output=True, text=True,
                           check=True)
    return json.loads(shown.stdout)[0]["options"]["burst"]


@pytest.mark.root
def test_tc_agrees_with_the_limits(emu_root):
    ns = f"flshape{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        for rate_Bps in (LOW_BPS * 1.02, HIGH_BPS * 0.98):
            burst, done = _tbf(ns, rate_Bps)
            assert done.returncode == 0, done.stderr
            assert abs(_burst_kept(ns) - burst) <= 0.01 * burst, (rate_Bps * 8, _burst_kept(ns), burst)
        burst, done = _tbf(ns, LOW_BPS * 0.98)
        assert done.returncode == 0 and abs(_burst_kept(ns) - burst) > 0.01 * burst  # wrapped
        _, done = _tbf(ns, HIGH_BPS * 1.02)
        assert done.returncode != 0 and "limit" in done.stderr
    finally:
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
