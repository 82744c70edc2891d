"""The conclusion of a collectives benchmark: which algorithm wins where, and by how much.

`verdict(rows)` reads the rows of `collectives bench` (or `fabriclab run`): per size, the algorithm with the
highest busbw wins; consecutive sizes with one winner make a band, said with the winner's margin over the
runner-up (the smallest and largest ratio of busbw in the band). Pure: no printing, no store.

Try it: `fabriclab run` (its last lines).
"""

from __future__ import annotations

from fabriclab.units import format_size


def _bands(rows: list[dict]) -> list[tuple[str, list[tuple[int, float, str]]]]:
    """(winner, [(size, margin over the runner-up, runner-up)]) for each run of sizes one algorithm wins."""
    sizes = sorted({r["size_bytes"] for r in rows})
    bands: list[tuple[str, list[tuple[int, float, str]]]] = []
    for size in sizes:
        ranked = sorted((r for r in rows if r["size_bytes"] == size and not r.get("num_wrong")),
                        key=lambda r: -r["busbw_GBps"])
        if len(ranked) < 2 or ranked[1]["busbw_GBps"] <= 0:
            continue
        best, second = ranked[0], ranked[1]
        point = (size, best["busbw_GBps"] / second["busbw_GBps"], second["algo"])
        if bands and bands[-1][0] == best["algo"]:
            bands[-1][1].append(point)
        else:
            bands.append((best["algo"], [point]))
    return bands


def verdict(rows: list[dict]) -> list[str]:
    """Lines that say which algorithm wins where and by how much; the largest size's busbw per algorithm."""
    bands = _bands(rows)
    if not bands:
        return ["no size was measured with two algorithms: nothing to compare"]
    wins: dict[str, int] = {}
    for winner, points in bands:
        wins[winner] = wins.get(winner, 0) + len(points)
    total = sum(wins.values())
    lines = [", ".join(f"{a} wins {n} of {total} sizes" for a, n in sorted(wins.items(), key=lambda x: -x[1]))]
    for winner, points in bands:
        lo, hi = points[0][0], points[-1][0]
        where = format_size(lo) if lo == hi else f"{format_size(lo)} to {format_size(hi)}"
        margins = [m for _, m, _ in points]
        by = f"{min(margins):.2f}x" if len(points) == 1 or max(margins) - min(margins) < 0.005 else \
            f"{min(margins):.2f}x to {max(margins):.2f}x"
        beaten = ", ".join(dict.fromkeys(r for _, _, r in points))
        lines.append(f"{winner} wins at {where}: {by} the busbw of the next best ({beaten})")
    top = max(r["size_bytes"] for r in rows)
    at_top = sorted((r for r in rows if r["size_bytes"] == top), key=lambda r: -r["busbw_GBps"])
    lines.append(f"at {format_size(top)}: " + ", ".join(f"{r['algo']} {r['busbw_GBps']:.3g} GB/s" for r in at_top)
                 + " busbw")
    wrong = sum(r.get("num_wrong") or 0 for r in rows)
    lines.append("every result checked correct" if not wrong else f"{wrong} wrong elements: see #wrong")
    return lines
