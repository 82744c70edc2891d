"""Noise margins (`bench.noise`): the median's order-statistic interval, the rule that names a winner only
beyond the noise, and the repetition that stops when the winner is clear or a cap is hit. Synthetic
timings only: nothing here measures time, so nothing can flake."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fabriclab.bench.noise import (ALONE, CLEAR, FUTILE, ITERATION_CAP, RESOLVED, TIME_CAP, NoiseRule, RepeatCap,
                                   compare, median_interval, next_round, repeat)


def test_the_interval_of_the_median_is_a_pair_of_order_statistics_with_its_binomial_coverage():
    spread = median_interval(list(range(10, 0, -1)))  # 1..10, unsorted
    # Bin(10, 1/2): P(B <= 1) = 11/1024, so [x_(2), x_(9)] holds the median with 1 - 22/1024 >= 0.95
    assert (spread.median, spread.low, spread.high) == (5.5, 2.0, 9.0)
    assert spread.coverage == pytest.approx(1 - 22 / 1024) and spread.covered and spread.num_samples == 10
    assert spread.relative == pytest.approx(3.5 / 5.5)
    # five timings cannot reach 95 % (the range holds the median with 1 - 2/32): the range, not covered
    few = median_interval([3.0, 1.0, 2.0, 5.0, 4.0])
    assert (few.low, few.high, few.covered) == (1.0, 5.0, False) and few.coverage == pytest.approx(1 - 2 / 32)
    # above the exact range the normal approximation takes over without a jump
    exact, approx = median_interval(np.arange(1000.0)), median_interval(np.arange(1001.0))
    assert abs(exact.low - approx.low) <= 1 and abs(exact.high - approx.high) <= 2
    with pytest.raises(ValueError, match="measure at least one"):
        median_interval([])


def test_clearly_separated_timings_name_a_winner_with_its_margin():
    fast, slow = np.linspace(0.9, 1.1, 20), np.linspace(1.9, 2.1, 20)
    verdict = compare({"slow": median_interval(slow), "fast": median_interval(fast)})
    assert verdict.winner == "fast" and verdict.tied == ("fast",) and verdict.ranked == ("fast", "slow")
    assert verdict.margin == pytest.approx(2.0) and 1.5 < verdict.margin_low < 2.0
    assert verdict.num_samples == 20


def test_overlapping_timings_are_within_noise_of_each_other_not_of_a_clearly_slower_one():
    rng = np.random.default_rng(7)
    a, b = rng.uniform(0.5, 1.5, 40), rng.uniform(0.55, 1.55, 40)
    slow = rng.uniform(5.0, 6.0, 40)
    verdict = compare({name: median_interval(v) for name, v in (("a", a), ("b", b), ("slow", slow))})
    assert verdict.winner is None and set(verdict.tied) == {"a", "b"} and verdict.ranked[-1] == "slow"
    assert verdict.spread > 0.1 and verdict.margin_low < 1


def test_too_few_timings_never_name_a_winner_however_far_apart():
    verdict = compare({"fast": median_interval([1.0, 1.0, 1.0]), "slow": median_interval([9.0, 9.0, 9.0])})
    assert verdict.winner is None and verdict.tied == ("fast", "slow")


def _rounds(samples: dict, seconds_per_iteration: float = 0.0):
    """A `measure` that serves `samples` round by round, with a clock that advances by the iterations."""
    taken = [0]
    calls = []

    def measure(count: int):
        calls.append(count)
        start, taken[0] = taken[0], taken[0] + count
        return {name: values[start:taken[0]] for name, values in samples.items()}, taken[0] * seconds_per_iteration

    return measure, calls


def test_repetition_stops_as_soon_as_the_winner_is_clear():
    measure, calls = _rounds({"fast": np.linspace(0.9, 1.1, 100), "slow": np.linspace(1.9, 2.1, 100)})
    progress = []
    result = repeat(measure, cap=RepeatCap(round_iters=10, max_iters=100, max_time_s=60),
                    on_round=lambda verdict, elapsed, stop: progress.append(stop))
    assert result.stop == CLEAR and calls == [10] and result.verdict.winner == "fast"
    assert progress == [CLEAR] and len(result.samples["fast"]) == 10


def test_repetition_of_overlapping_candidates_stops_at_the_iteration_cap_with_its_last_round_trimmed():
    rng = np.random.default_rng(3)
    noisy = {"a": rng.uniform(1, 3, 100), "b": rng.uniform(1, 3, 100)}
    measure, calls = _rounds(noisy)
    progress = []
    result = repeat(measure, cap=RepeatCap(round_iters=10, max_iters=25, max_time_s=60),
                    on_round=lambda verdict, elapsed, stop: progress.append(stop))
    assert result.stop == ITERATION_CAP and calls == [10, 10, 5] and result.verdict.num_samples == 25
    assert progress == [None, None, ITERATION_CAP] and result.verdict.winner is None


def test_repetition_stops_at_the_time_cap_before_a_round_that_would_not_end_in_time():
    rng = np.random.default_rng(4)
    measure, calls = _rounds({"a": rng.uniform(1, 3, 100), "b": rng.uniform(1, 3, 100)}, seconds_per_iteration=0.1)
    result = repeat(measure, cap=RepeatCap(round_iters=10, max_iters=100, max_time_s=2.5), rule=NoiseRule())
    # 10 in 1 s, 10 more by 2 s; then 0.5 s left fits 5 at 0.1 s each, and after those nothing fits
    assert result.stop == TIME_CAP and calls == [10, 10, 5] and result.elapsed_s == pytest.approx(2.5)
    assert next_round(25, 2.5, RepeatCap(round_iters=10, max_iters=100, max_time_s=2.5)) == 0


def test_equal_candidates_give_up_after_three_rounds_where_the_caps_could_not_separate_them():
    rng = np.random.default_rng(5)
    wide = rng.uniform(1, 3, 1000)
    measure, calls = _rounds({"a": wide, "b": wide.copy()})  # the same timings: a gap of 0
    result = repeat(measure, cap=RepeatCap(round_iters=10, max_iters=1000, max_time_s=60))
    assert result.stop == FUTILE and calls == [10, 10, 10] and result.verdict.winner is None


def test_a_real_difference_hidden_in_wide_noise_is_not_given_up_on():
    rng = np.random.default_rng(6)
    measure, calls = _rounds({"fast": rng.uniform(1, 3, 1000), "slow": rng.uniform(1.6, 3.6, 1000)})
    result = repeat(measure, cap=RepeatCap(round_iters=10, max_iters=1000, max_time_s=60))
    assert result.stop == CLEAR and result.verdict.winner == "fast" and len(calls) > 1


def test_tied_candidates_measured_finer_than_the_resolution_stop_as_within_noise():
    same = np.linspace(0.995, 1.005, 100)
    measure, calls = _rounds({"a": same, "b": same.copy()})
    result = repeat(measure, cap=RepeatCap(round_iters=10, max_iters=100, max_time_s=60),
                    rule=NoiseRule(resolution=0.02))
    assert result.stop == RESOLVED and calls == [10] and result.verdict.winner is None


def test_one_candidate_is_measured_once_and_compared_with_nothing():
    measure, calls = _rounds({"only": np.ones(50)})
    result = repeat(measure, cap=RepeatCap(round_iters=10, max_iters=50, max_time_s=60))
    assert result.stop == ALONE and calls == [10] and result.verdict.winner is None
    assert result.verdict.margin == 1.0


@pytest.mark.parametrize("make, fragment", [
    (lambda: NoiseRule(confidence=0.3), "confidence 0.3: give a probability from 0.5"),
    (lambda: NoiseRule(confidence=math.nan), "confidence nan"),
    (lambda: NoiseRule(resolution=-0.1), "resolution -0.1"),
    (lambda: RepeatCap(round_iters=20, max_iters=10), "need 1 <= iters <= max iters, got 20 and 10"),
    (lambda: RepeatCap(round_iters=0), "need 1 <= iters"),
    (lambda: RepeatCap(max_time_s=math.inf), "max time inf: give a finite number of seconds"),
])
def test_bad_parameters_say_what_to_change(make, fragment):
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(")):
        make()
