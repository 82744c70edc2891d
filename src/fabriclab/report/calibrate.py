"""What a calibration's residuals say, for people: the busbw each error was computed from, a summary per
size band that covers every size, and where the model's time falls from one size to the next larger
because NCCL's tuning switches algorithm or protocol there.

nccl-tests prints busbw with two decimals, so a small size reads `0.00` GB/s while its time (and the
error, computed from it) is exact: `measured_busbw` gives the busbw the error compares with. Bands:
`BANDS` (up to 8 KB, 16-512 KB, 1-32 MB, >= 64 MB); the calibration's goals keep their own bands
(`nccl.fit.BANDS`).

Try it: `fabriclab calibrate nccl-tests examples/nccl-tests-a100/nccl_{2,4,8,16}.log --out a100.json`.
"""

from __future__ import annotations

import statistics
from typing import Any

from fabriclab.collectives.schedule import bus_bandwidth_factor

# Size bands of the summary lines: (name, lowest size, highest size or None), every size in one.
BANDS = (("<= 8 KB", 0, 8 << 10), ("16-512 KB", 16 << 10, 512 << 10), ("1-32 MB", 1 << 20, 32 << 20),
         (">= 64 MB", 64 << 20, None))


def _get(r: Any, key: str) -> Any:
    return r[key] if isinstance(r, dict) else getattr(r, key)


def measured_busbw(r: Any) -> float:
    """The measured busbw the row's error compares with: predicted / (1 + error), from the log's time."""
    return _get(r, "predicted_busbw_GBps") / (1 + _get(r, "error_pct") / 100)


def predicted_time_s(r: Any) -> float:
    """The model's time for the row: size x bus factor / predicted busbw."""
    factor = bus_bandwidth_factor(_get(r, "collective"), _get(r, "num_gpus"))
    return _get(r, "size_bytes") * factor / (_get(r, "predicted_busbw_GBps") * 1e9)


def band_summary(residuals: list) -> list[dict]:
    """Per log (GPU count and collective) and band: rows, median and max |error| in percent."""
    out = []
    keys = list(dict.fromkeys((_get(r, "num_gpus"), _get(r, "collective")) for r in residuals))
    for gpus, collective in keys:
        for name, lo, hi in BANDS:
            errors = [abs(_get(r, "error_pct")) for r in residuals
                      if (_get(r, "num_gpus"), _get(r, "collective")) == (gpus, collective)
                      and lo <= _get(r, "size_bytes") and (hi is None or _get(r, "size_bytes") <= hi)]
            if errors:
                out.append({"num_gpus": gpus, "collective": collective, "band": name, "rows": len(errors),
                            "median_abs_error_pct": statistics.median(errors), "max_abs_error_pct": max(errors)})
    return out


def band_table_rows(residuals: list) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of a table: per GPU count (and collective), each band's `median / max` |error| %."""
    summary = band_summary(residuals)
    several = len({s["collective"] for s in summary}) > 1
    bands = [name for name, _, _ in BANDS if any(s["band"] == name for s in summary)]
    rows = []
    for key in dict.fromkeys((s["num_gpus"], s["collective"]) for s in summary):
        cells = {s["band"]: f"{s['median_abs_error_pct']:.1f} / {s['max_abs_error_pct']:.1f}"
                 for s in summary if (s["num_gpus"], s["collective"]) == key}
        rows.append([str(key[0]), *([key[1]] if several else []), *(cells.get(b, "-") for b in bands)])
    return ["GPUs", *(["collective"] if several else []), *bands], rows


def switch_notes(residuals: list) -> list[str]:
    """Where the model's time for a size is below its time for the next smaller size of the same log
    (a larger message predicted faster): NCCL's tuning switches algorithm or protocol between them."""
    notes = []
    by_log: dict[tuple, list] = {}
    for r in residuals:
        by_log.setdefault((_get(r, "source"), _get(r, "num_gpus"), _get(r, "collective")), []).append(r)
    for rows in by_log.values():
        rows = sorted(rows, key=lambda r: _get(r, "size_bytes"))
        for small, big in zip(rows, rows[1:]):
            t_small, t_big = predicted_time_s(small), predicted_time_s(big)
            if t_big < t_small:
                change = (f"{_get(small, 'choice')} -> {_get(big, 'choice')}" if _get(small, 'choice') !=
                          _get(big, 'choice') else f"{_get(big, 'choice')}, NCCL's channel or thread count")
                notes.append(f"{_get(big, 'num_gpus')} GPUs, {_size(_get(small, 'size_bytes'))} -> "
                             f"{_size(_get(big, 'size_bytes'))}: the model's time falls ({t_small * 1e6:.4g} -> "
                             f"{t_big * 1e6:.4g} us) where NCCL's tuning switches {change}")
    return notes


def _size(n: int) -> str:
    for unit, shift in (("GB", 30), ("MB", 20), ("KB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n}B"
