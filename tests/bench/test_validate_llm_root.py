"""`validate emulated --workload llm` for real (root): gpt-mini PP2 x DP2 on a 4-host emulated star at
50 Mbit/s, measured against whatif llm. Network-bound on purpose, in the regime the emulator reproduces: the
links' goodput is measured in the star first (TCP through tbf moves less than its framing allows), the
2-core machine's CPU sharing stretches compute (a 1-rank calibration cannot see it), and the links' tbf
bucket (at least 128 KiB) passes a smaller message unshaped after idle, so gpt-tiny's 16 KB activations
and 0.5 MB gradient buffers are partly unshaped while gpt-mini's 8 MB buffers are not.

Beware, as for every root test: it tears down any emulated cluster that is up on this machine.
"""

import pytest

from fabriclab.bench.validate.llm import LlmValidateConfig, run_llm_validation

pytestmark = [pytest.mark.root, pytest.mark.slow(
    "tests/bench/test_validate_root.py validates on an emulated star, tests/bench/test_validate_llm.py predicts this "
    "layout and compares")]


def test_gpt_mini_pp2_dp2_step_on_an_emulated_star_meets_the_goals(emu_root):
    config = LlmValidateConfig(model="gpt-mini", hosts=4, gpus_per_server=1, tp=1, pp=2, gbs=4, link_Bps=6.25e6,
                               steps=6, warmup=2, timeout_s=240)
    result = run_llm_validation(config)
    rows = {r["part"]: r for r in result["rows"]}
    assert result["measured"]["bytes_per_step"]["dp"] > 0 and result["measured"]["bytes_per_step"]["pp"] > 0
    assert 0.5 < result["calibration"]["link_efficiency"] < 1448 / 1514 + 0.02  # TCP through tbf: below framing
    assert rows["dp"]["share"] > 0.3  # the network dominates, as the layout is meant to
    # the measured ranks and the simulated stage in one trace, on the simulator's threads
    events = result["trace"]["traceEvents"]
    assert {e["pid"] for e in events} == {0, 1, 2, 3, 1000}
    threads = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"}
    assert {n for p, n in threads if p == 0} == {n for p, n in threads if p == 1000}
    judged = {p: f"{r['error']:+.1%}" for p, r in rows.items() if r["ok"] is not None}
    assert result["passed"], f"errors of the judged parts: {judged}"
