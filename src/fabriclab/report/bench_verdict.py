"""The conclusion of a collectives benchmark: per size a winner and its margin, or "within noise".

`verdict(rows)` reads the rows of `collectives bench` (or `fabriclab run`): each row keeps its algorithm's
median time, the confidence interval of that median and the number of iterations (`bench.noise`). Per
size the fastest algorithm by median *wins* when its interval lies below every other's, said with the
ratio of the medians and the ratio beyond the noise (the next interval's lower bound over the winner's
upper bound); otherwise it is *within noise* of those whose intervals overlap its own, said with the
spread (the half-width of the widest interval compared, +-%) and the gap between the two fastest
medians. Then a line per winner with its sizes, one with the sizes within noise, the largest size's
busbw, and the correctness check. A wrong result never wins. Rows of records from before the intervals
were kept name no winner. Pure: no printing.

Try it: `fabriclab run` (its last lines).
"""

from __future__ import annotations

import textwrap

from fabriclab.bench.noise import Spread, Verdict, compare
from fabriclab.units import format_size

WIDTH = 80  # the conclusion is for people: one line each, readable on 80 columns


def _spread(row: dict, confidence: float) -> Spread | None:
    """The row's median and interval, or None for a row without them (an older record)."""
    if row.get("time_us_ci_low") is None or row.get("time_ci_coverage") is None:
        return None
    return Spread(median=row["time_us_median"], low=row["time_us_ci_low"], high=row["time_us_ci_high"],
                  num_samples=row.get("iters", 0), coverage=row["time_ci_coverage"],
                  covered=row["time_ci_coverage"] >= confidence - 1e-12)


def size_verdicts(rows: list[dict], confidence: float = 0.95) -> list[tuple[int, Verdict | None]]:
    """(size, verdict) for every size, smallest first; None where no row of the size has an interval.
    Rows with a wrong result take no part."""
    out: list[tuple[int, Verdict | None]] = []
    for size in sorted({r["size_bytes"] for r in rows}):
        spreads = {r["algo"]: _spread(r, confidence) for r in rows
                   if r["size_bytes"] == size and not r.get("num_wrong")}
        known = {algo: s for algo, s in spreads.items() if s is not None}
        out.append((size, compare(known) if known and len(known) == len(spreads) else None))
    return out


def percent(fraction: float) -> str:
    """`4.1%`, `12%`, `0.41%`: two significant digits below 10 %, never cut to `0%`."""
    value = fraction * 100
    return f"{value:.2g}%" if abs(value) < 9.95 else f"{value:.0f}%"


def describe(verdict: Verdict | None) -> str:
    """`butterfly wins by 1.29x over native (>= 1.08x beyond noise)`: the ratio of the medians, and of the
    nearest bounds of the intervals; or `within noise (spread +-12%): native, butterfly; gap 2%`."""
    if verdict is None:
        return "no interval recorded: no winner named"
    if len(verdict.ranked) < 2:
        return f"{verdict.ranked[0]} alone: nothing to compare"
    if verdict.winner is not None:
        low = verdict.margin_low  # > 1 for a winner: three decimals where two would round it to 1.00
        return (f"{verdict.winner} wins by {verdict.margin:.2f}x over {verdict.ranked[1]} "
                f"(>= {low:.{3 if low < 1.01 else 2}f}x beyond noise)")
    return (f"within noise (spread +-{percent(verdict.spread)}): {', '.join(verdict.tied)}; "
            f"gap {percent(verdict.margin - 1)}")


def verdict_records(rows: list[dict], confidence: float = 0.95) -> list[dict]:
    """The verdict of every size as plain data, for the record."""
    iters = {r["size_bytes"]: r.get("iters") for r in rows}
    stops = {r["size_bytes"]: r.get("stop") for r in rows}
    return [{"size_bytes": size, "winner": v.winner if v else None, "tied": list(v.tied) if v else [],
             "ranked": list(v.ranked) if v else [], "margin": v.margin if v else None,
             "margin_low": v.margin_low if v else None,
             "spread": v.spread if v else None, "iters": iters[size], "stop": stops[size],
             "confidence": confidence, "verdict": describe(v)} for size, v in size_verdicts(rows, confidence)]


def _ranges(sizes: list[int], chosen: list[int]) -> str:
    """`1KB to 16KB, 64KB`: runs of consecutive measured sizes among `chosen`."""
    runs: list[list[int]] = []
    for size in chosen:
        if runs and sizes.index(size) == sizes.index(runs[-1][-1]) + 1:
            runs[-1].append(size)
        else:
            runs.append([size])
    return ", ".join(format_size(r[0]) if len(r) == 1 else f"{format_size(r[0])} to {format_size(r[-1])}"
                     for r in runs)


def verdict(rows: list[dict], confidence: float = 0.95) -> list[str]:
    """The conclusion's lines: a summary, one line per size, the winners' sizes, the sizes within noise,
    the largest size's busbw per algorithm and the correctness check."""
    verdicts = size_verdicts(rows, confidence)
    if not verdicts or all(v is None or len(v.ranked) < 2 for _, v in verdicts):
        return ["no size was measured with two algorithms: nothing to compare"]
    sizes = [size for size, _ in verdicts]
    won = {size: v.winner for size, v in verdicts if v is not None and v.winner is not None}
    noisy = [size for size, v in verdicts if size not in won]
    lines = [f"a winner at {len(won)} of {len(sizes)} sizes, {len(noisy)} within noise",
             f"by median time and its {confidence:.0%} interval; n: iterations each"]
    iters = {r["size_bytes"]: r.get("iters", 0) for r in rows}
    width = max(len(format_size(s)) for s in sizes)
    lines += [f"{format_size(size):>{width}}  n={iters[size]:<4} {describe(v)}" for size, v in verdicts]
    for winner in dict.fromkeys(won.values()):
        lines += _wrapped(f"{winner} wins at " + _ranges(sizes, [s for s in sizes if won.get(s) == winner]))
    if noisy:
        lines += _wrapped("within noise at " + _ranges(sizes, noisy))
    top = max(sizes)
    at_top = sorted((r for r in rows if r["size_bytes"] == top), key=lambda r: -r["busbw_GBps"])
    lines += _wrapped(f"at {format_size(top)}: " + ", ".join(f"{r['algo']} {r['busbw_GBps']:.3g} GB/s"
                                                             for r in at_top) + " busbw")
    wrong = sum(r.get("num_wrong") or 0 for r in rows)
    lines.append("every result checked correct" if not wrong else f"{wrong} wrong elements: see #wrong")
    return lines


def _wrapped(text: str) -> list[str]:
    """`text` in lines that fit WIDTH after the conclusion's two-space indent (words whole)."""
    return textwrap.wrap(text, width=WIDTH - 2, subsequent_indent="  ", break_long_words=False,
                         break_on_hyphens=False)
