"""Noise margins for benchmarks that name a winner: the median, its interval, the rule, repetition.

A benchmark on a shared machine (two cores, four ranks, other jobs) sees times that vary several-fold
from one iteration to the next (a 1 KB all-reduce on 4 Gloo ranks here: 1.4 to 12 ms, 5th to 95th
percentile); five iterations and "the higher busbw wins" named a different winner on each run (issue 47:
native won 10, 9 and 13 of 15 sizes, some "wins" at 1.00x). Here:

* **The spread of one candidate** (`median_interval`): the median of its timings and a distribution-free
  confidence interval of that median from order statistics. Of n timings, the number below the true
  median is Binomial(n, 1/2), so the interval [x_(j), x_(n+1-j)] (sorted, 1-based) holds the median with
  probability 1 - 2 P(B <= j-1); j is the largest rank that keeps this at or above `confidence` (exact
  up to 1,000 timings, the normal approximation above). Why the median and order statistics: other jobs
  only ever add time, so timings are skewed with a long upper tail; the median ignores the tail, and the
  interval assumes no distribution (no normality, no bootstrap: the same timings give the same answer).
  Too few timings for the confidence (fewer than 6 at 95 %) give the sample range, marked not `covered`.
* **The rule** (`compare`, lower time is better): the fastest candidate by median *wins* when its
  interval lies entirely below every other candidate's (its upper bound under their lower bounds), both
  covered. Otherwise it is *within noise* of every candidate whose interval overlaps its own. Two disjoint
  95 % intervals are stronger evidence than a 5 % test (about 0.5 % for equal widths), which leaves room
  for the repeated looks of the adaptive loop below and for the many sizes of a sweep: a run may say
  "within noise" where a difference is real but small, and should not name opposite winners in two runs.
* **The spread said** is the relative half-width of an interval, (high - low) / 2 / median, the largest
  among the candidates compared; the gap is the ratio of the medians minus one.
* **Repetition** (`repeat`): measure a round of `round_iters` timings per candidate, apply the rule, and
  measure again until the fastest is clear of the others, or every candidate tied with it has an interval
  narrower than +-`resolution` (then they differ by less than the benchmark can usefully tell: 2 % by
  default, the size of effects a CPU's clock and cache state shift by run to run), or a cap is hit:
  `max_iters` timings per candidate, or `max_time_s` seconds (a round never starts if the rate so far
  says it would not end in time; the first round always runs), or more rounds look futile: intervals
  narrow as 1/sqrt(n), so the timings the caps still allow can clear a gap only about
  sqrt(n / n_cap) times today's half-widths; when the gap between the two fastest medians is under half
  of that (from the third round on), the time goes to the next comparison instead (`futile`).

numpy and the standard library only: the CLI formats verdicts without torch.

Try it: `fabriclab run` (its conclusion: per size a winner and its margin, or "within noise").
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

# Above this many timings the binomial tail is taken from the normal approximation (exact sums of
# binomial coefficients grow slow; at 1,000 the two differ by less than one rank).
EXACT_UP_TO = 1000
# Why a repetition stopped (the record keeps it).
CLEAR, RESOLVED, FUTILE, ALONE = "clear", "resolved", "futile", "alone"
ITERATION_CAP, TIME_CAP = "iteration cap", "time cap"
# Giving up early (`futile`): after this many rounds, when the gap is under this share of what the caps'
# timings could clear. Chosen by simulation on 200 timings of a 1 KB all-reduce on 4 ranks over 2 busy
# cores (iteration times from 1.4 to 12 ms), three candidates, 20 ms a round of each, caps 200 and 3 s:
# equal candidates stop after 0.7 s instead of 3 s, a 30 % faster one is named 68 % of the time instead
# of 41 % with a plain 1.5 s cap, in the same mean time; no equal one was ever named.
FUTILITY_ROUNDS, FUTILITY_SLACK = 3, 0.5


@dataclass(frozen=True, kw_only=True)
class NoiseRule:
    """When a difference counts: the confidence of each interval and the resolution worth measuring for."""

    confidence: float = 0.95
    """Probability that a candidate's interval holds its true median (0.5 to 0.999)."""
    resolution: float = 0.02
    """Relative half-width under which tied candidates stop being measured (0 to 0.5): smaller
    differences are called within noise rather than chased."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.confidence) and 0.5 <= self.confidence <= 0.999):
            raise ValueError(f"confidence {self.confidence}: give a probability from 0.5 to 0.999, e.g. 0.95")
        if not (math.isfinite(self.resolution) and 0 <= self.resolution <= 0.5):
            raise ValueError(f"resolution {self.resolution}: give a relative width from 0 to 0.5, e.g. 0.02")


@dataclass(frozen=True, kw_only=True)
class RepeatCap:
    """How much repetition one comparison (one size of a sweep) may take."""

    round_iters: int = 10
    """Timings per candidate in each round (the first round always runs in full)."""
    max_iters: int = 200
    """Most timings per candidate; no round goes past it."""
    max_time_s: float = 3.0
    """Most seconds of measuring; a round that would end later by the rate so far does not start."""

    def __post_init__(self) -> None:
        if self.round_iters < 1 or self.max_iters < self.round_iters:
            raise ValueError(f"need 1 <= iters <= max iters, got {self.round_iters} and {self.max_iters}: "
                             f"raise the cap (e.g. max iters {max(self.round_iters, 1) * 10}) or lower iters")
        if not (math.isfinite(self.max_time_s) and self.max_time_s > 0):
            raise ValueError(f"max time {self.max_time_s}: give a finite number of seconds > 0, e.g. 3")


@dataclass(frozen=True, kw_only=True)
class Spread:
    """One candidate's timings summed up: the median and its confidence interval."""

    median: float
    """Median of the timings."""
    low: float
    """Lower bound of the interval of the median (an order statistic)."""
    high: float
    """Upper bound of the interval of the median."""
    num_samples: int
    """Timings it comes from."""
    coverage: float
    """Probability that [low, high] holds the true median (exact for the order statistics chosen)."""
    covered: bool
    """Whether `coverage` reaches the confidence asked for (enough timings)."""

    @property
    def relative(self) -> float:
        """Half-width of the interval over the median (0.05: +-5 %); inf for a zero median."""
        return (self.high - self.low) / 2 / self.median if self.median > 0 else math.inf


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """The comparison of candidates at one point (one size): a winner, or who is within noise of whom."""

    ranked: tuple[str, ...]
    """Candidates by median time, fastest first."""
    winner: str | None
    """The fastest, when its interval is below every other's; None when it is within noise of one."""
    tied: tuple[str, ...]
    """The fastest and every candidate within noise of it (the winner alone when there is one)."""
    margin: float
    """Median time of the second fastest over the fastest's (>= 1; 1 with one candidate)."""
    margin_low: float
    """The margin beyond the noise: the lowest lower bound of another's interval over the fastest's upper
    bound (> 1 exactly when there is a winner; 1 with one candidate)."""
    spread: float
    """Largest relative half-width among the intervals compared (winner and second, or the tied)."""
    num_samples: int
    """Fewest timings of any candidate."""


def _tail_rank(n: int, confidence: float) -> tuple[int, float]:
    """(j, coverage): the largest 1-based rank j with 1 - 2 P(B <= j-1) >= confidence, B ~ Bin(n, 1/2);
    j = 0 when even the sample range falls short (its coverage is returned then)."""
    alpha = 1.0 - confidence
    if n > EXACT_UP_TO:
        z = statistics.NormalDist().inv_cdf(1 - alpha / 2)
        j = max(int(math.floor(n / 2 - z * math.sqrt(n) / 2)), 1)
        return j, confidence
    total, cumulative, j = 2 ** n, 0, 0
    for i in range(n // 2 + 1):
        cumulative += math.comb(n, i)  # P(B <= i) x 2^n
        if 2 * cumulative / total > alpha:
            break
        j = i + 1
    tail = sum(math.comb(n, i) for i in range(max(j, 1))) / total
    return j, 1.0 - 2.0 * tail


def median_interval(samples: Sequence[float], confidence: float = 0.95) -> Spread:
    """The median of `samples` and its order-statistic confidence interval (module docstring)."""
    values = np.sort(np.asarray(samples, dtype=float))
    n = len(values)
    if n == 0:
        raise ValueError("no timings to summarise: measure at least one iteration")
    j, coverage = _tail_rank(n, confidence)
    rank = max(j, 1)
    return Spread(median=float(np.median(values)), low=float(values[rank - 1]), high=float(values[n - rank]),
                  num_samples=n, coverage=coverage, covered=j >= 1)


def _clear(best: Spread, other: Spread) -> bool:
    """Whether `best` is faster than `other` beyond the noise: both covered, intervals disjoint."""
    return best.covered and other.covered and best.high < other.low


def compare(spreads: Mapping[str, Spread]) -> Verdict:
    """The rule (module docstring): the fastest median wins when its interval is clear of every other's."""
    if not spreads:
        raise ValueError("nothing to compare: give at least one candidate's timings")
    ranked = tuple(sorted(spreads, key=lambda name: (spreads[name].median, name)))
    best = spreads[ranked[0]]
    tied = (ranked[0],) + tuple(name for name in ranked[1:] if not _clear(best, spreads[name]))
    winner = ranked[0] if len(ranked) > 1 and len(tied) == 1 else None
    compared = ranked[:2] if winner else tied
    second = spreads[ranked[1]].median if len(ranked) > 1 else best.median
    margin = second / best.median if best.median > 0 else math.inf
    lowest = min((spreads[name].low for name in ranked[1:]), default=best.high)
    margin_low = lowest / best.high if best.high > 0 else math.inf
    return Verdict(ranked=ranked, winner=winner, tied=tied, margin=margin, margin_low=margin_low,
                   spread=max(spreads[name].relative for name in compared),
                   num_samples=min(s.num_samples for s in spreads.values()))


@dataclass(frozen=True, kw_only=True)
class Repeated:
    """What `repeat` measured and concluded."""

    samples: dict[str, list[float]]
    """Every timing of every candidate, in the order measured."""
    spreads: dict[str, Spread]
    """Each candidate's median and interval."""
    verdict: Verdict
    """The rule applied to the last spreads."""
    stop: str
    """Why it stopped: clear, resolved, futile, iteration cap, time cap, or alone (one candidate)."""
    elapsed_s: float
    """Seconds of measuring, as `measure` reported them."""


def next_round(num_samples: int, elapsed_s: float, cap: RepeatCap) -> int:
    """Timings per candidate in the next round: a full round, less what the caps leave (0: stop)."""
    left = cap.max_iters - num_samples
    if elapsed_s > 0:
        left = min(left, int((cap.max_time_s - elapsed_s) / (elapsed_s / num_samples)))
    return max(min(cap.round_iters, left), 0)


def stop_reason(verdict: Verdict, spreads: Mapping[str, Spread], rule: NoiseRule, cap: RepeatCap,
                elapsed_s: float) -> str | None:
    """Why measuring should stop now, or None to measure another round."""
    if len(spreads) < 2:
        return ALONE
    if verdict.winner is not None:
        return CLEAR
    if all(spreads[name].covered and spreads[name].relative <= rule.resolution for name in verdict.tied):
        return RESOLVED
    if verdict.num_samples >= cap.max_iters:
        return ITERATION_CAP
    if next_round(verdict.num_samples, elapsed_s, cap) < 1:
        return TIME_CAP
    if futile(verdict, spreads, cap, elapsed_s):
        return FUTILE
    return None


def futile(verdict: Verdict, spreads: Mapping[str, Spread], cap: RepeatCap, elapsed_s: float) -> bool:
    """Whether the caps leave little hope of a winner (module docstring): at the timings they still allow,
    with intervals shrunk as 1/sqrt(n), half the width the rule needs would still exceed today's gap
    between the fastest median and that of one candidate within noise of it. Judged from the
    FUTILITY_ROUNDS-th round on; it can only end a comparison without a winner, never name one."""
    n = verdict.num_samples
    if n < FUTILITY_ROUNDS * cap.round_iters or len(verdict.tied) < 2:
        return False
    reach = cap.max_iters if elapsed_s <= 0 else min(cap.max_iters, int(n * cap.max_time_s / elapsed_s))
    shrink = math.sqrt(n / max(reach, n))
    best = spreads[verdict.ranked[0]]
    for name in verdict.tied[1:]:
        other = spreads[name]
        needed = (best.high - best.median) + (other.median - other.low)  # gap that would clear the intervals
        if other.median - best.median <= FUTILITY_SLACK * needed * shrink:
            return True
    return False


def repeat(measure: Callable[[int], tuple[Mapping[str, Sequence[float]], float]], *, cap: RepeatCap,
           rule: NoiseRule = NoiseRule(),
           on_round: Callable[[Verdict, float, str | None], None] | None = None) -> Repeated:
    """Measure rounds until the verdict is known or a cap is hit.

    `measure(count)` times every candidate `count` more times and returns ({name: new timings}, seconds
    elapsed since the first round began). In a multi-rank benchmark every rank must return the same
    numbers (gathered), so that all ranks stop after the same round. `on_round(verdict, elapsed_s, stop)`
    follows every round (progress); `stop` is None when another round follows."""
    samples: dict[str, list[float]] = {}
    count = cap.round_iters
    while True:
        new, elapsed_s = measure(count)
        for name, values in new.items():
            samples.setdefault(name, []).extend(float(v) for v in values)
        spreads = {name: median_interval(values, rule.confidence) for name, values in samples.items()}
        verdict = compare(spreads)
        stop = stop_reason(verdict, spreads, rule, cap, elapsed_s)
        if on_round is not None:
            on_round(verdict, elapsed_s, stop)
        if stop is not None:
            return Repeated(samples=samples, spreads=spreads, verdict=verdict, stop=stop, elapsed_s=elapsed_s)
        count = next_round(verdict.num_samples, elapsed_s, cap)
