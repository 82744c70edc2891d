"""The parallel trainer computes what one rank computes: over 3 steps, the loss of every layout (each
parallelism alone, ZeRO stages, MoE with EP, and 3D mixes up to 8 ranks) equals the 1-rank run of the same
model, seed and global batch. In float64 the only differences are the order of floating-point sums, so the
tolerance is 1e-9 relative; the 1-rank trainer itself matches a plain PyTorch loop (torch.optim.Adam)."""

import functools
from dataclasses import replace

import pytest

from fabriclab.runtime.llm.reference import plain_loop, run_single
from fabriclab.runtime.llm.trainer import LlmTrainConfig, run_llm_train
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import load_model

STEPS = 3
REL = 1e-9


def config(model: str, num_gpus: int = 1, *, sp: bool = True, zero: int = 0, **sizes) -> LlmTrainConfig:
    par = ParallelConfig(num_gpus=num_gpus, gbs=8, seq=16, mbs=sizes.pop("mbs", 1), zero=zero,
                         sequence_parallel=sp and sizes.get("tp", 1) > 1, **sizes)
    return LlmTrainConfig(spec=load_model(model), par=par, steps=STEPS, dtype="float64", timeout_s=60)


@functools.cache
def reference(model: str) -> tuple[float, ...]:
    return tuple(run_single(config(model))["losses"])


def assert_same(losses, expected):
    assert len(losses) == len(expected) == STEPS
    for got, want in zip(losses, expected):
        assert got == pytest.approx(want, rel=REL)
    assert losses[-1] < losses[0]  # it learns


@pytest.mark.parametrize("model", ["gpt-tiny", "moe-tiny"])
def test_one_rank_is_a_plain_pytorch_loop(model):
    c = config(model, mbs=2)
    assert_same(run_single(c)["losses"], plain_loop(c)["losses"])


CASES = {
    "tp2-no-sequence-parallel": ("gpt-tiny", 2, dict(tp=2, sp=False)),
    "pp2-interleaved-vp2": ("gpt-tiny", 2, dict(pp=2, vp=2)),
    "dp2-zero0": ("gpt-tiny", 2, dict(zero=0)),
    "dp2-zero3": ("gpt-tiny", 2, dict(zero=3)),
    "moe-ep2": ("moe-tiny", 2, dict(ep=2)),
    "3d-tp2-sp-pp2-1f1b-dp2-zero1": ("gpt-tiny", 8, dict(tp=2, pp=2, zero=1)),
    "moe-tp2-pp2-ep2-dp2-zero2": ("moe-tiny", 8, dict(tp=2, pp=2, ep=2, zero=2, sp=False)),
}


@functools.cache
def run_case(case: str) -> dict:
    model, n, sizes = CASES[case]
    return run_llm_train(config(model, n, **sizes))


@pytest.mark.parametrize("case", list(CASES))
def test_parallel_run_matches_one_rank(case):
    result = run_case(case)
    assert_same(result["losses"], reference(CASES[case][0]))
    assert len(result["step_times_s"]) == STEPS and all(t > 0 for t in result["step_times_s"])


def test_bytes_per_communicator_follow_the_layout():
    """In the 3D run (TP2 with sequence parallelism, PP2, DP2, float64), per step and rank: PP sends one
    activation slice per micro-batch (forward on stage 0, gradient back on stage 1); TP all-gathers and
    reduce-scatters every layer's input twice (attention, MLP) per direction, plus the embedding's gather
    (stage 0), the head's gather and reduce-scatter and the vocabulary-parallel loss (3 values a token) on
    stage 1, and sums the norms' gradients once; DP reduce-scatters and all-gathers the chunk's shard."""
    case = "3d-tp2-sp-pp2-1f1b-dp2-zero1"
    model, n, sizes = CASES[case]
    c, result = config(model, n, **sizes), run_case(case)
    par, spec = c.par, c.spec
    m, h, layers = par.num_microbatches, spec.hidden_size, spec.num_layers // par.pp
    act = par.mbs * par.seq * h * 8
    stage_of = {r: rank // 4 for r, rank in enumerate(range(8))}
    for r, b in enumerate(result["per_rank_bytes"]):
        last = stage_of[r] == 1
        assert b["pp"] == m * act / par.tp, r
        per_mb = 8 * layers * act + (2 * act + 3 * par.mbs * par.seq * 8 if last else act)
        norms = (2 * layers + (1 if last else 0)) * h * 8
        assert b["tp"] == m * per_mb + norms, r
        padded = -(-result["params_per_rank"][r] // par.dp) * par.dp
        assert b["dp"] == 2 * padded * 8 and b["ep"] == 0, r  # reduce-scatter in, all-gather out


def test_what_the_trainer_cannot_split_is_a_clear_error():
    with pytest.raises(ValueError, match="--ep 2 needs an MoE model"):
        config("gpt-tiny", 2, ep=2)
    with pytest.raises(ValueError, match="heads"):
        config("gpt-tiny", 8, tp=8)
    with pytest.raises(ValueError, match="--cp"):
        config("gpt-tiny", 2, cp=2)


def test_float32_zero_runs_its_rings_on_the_schedule_executor_and_matches_one_rank():
    """In float32 ZeRO's reduce-scatter and all-gather run as the executor's rings (4 ranks here); float32
    sums in another order: 1e-5 relative."""
    c32 = replace(config("gpt-tiny", 4, zero=1), dtype="float32")
    want = run_single(replace(config("gpt-tiny"), dtype="float32"))["losses"]
    got = run_llm_train(c32)["losses"]
    assert got == pytest.approx(want, rel=1e-5) and got[-1] < got[0]
