"""Measured vs predicted collectives on a larger emulated cluster: the table and its summary, from records only.

Rows come from `fabriclab.bench.validate.collectives.predict.compare`: op, num_hosts, role (`fit`: the
calibration's own rows; `check`: the larger cluster, never fitted), size_bytes, measured_us (median of the
iterations), predicted_us, measured_busbw_GBps, predicted_busbw_GBps, error_pct (= predicted busbw /
measured - 1, in percent). The summary gives the largest and mean |error| per op and size band of the
check rows.

Try it: `sudo fabriclab validate collectives --ops allgather,alltoall --hosts 4 --calibrate-hosts 2`.
"""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from fabriclab.units import format_size

KIND = "validate.collectives"
# Colour of an error in the table: beyond this |error| it is red (the calibration's goal at 1-16 MB).
GOAL_PCT = 25.0


def _us(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1e3:.2f}" if value < 1e5 else f"{value / 1e3:.1f}"


def _error(pct: float | None) -> Text:
    if pct is None:
        return Text("-")
    return Text(f"{pct:+.1f}", style="green" if abs(pct) <= GOAL_PCT else "red")


def table(rows: list[dict], title: str = "") -> Table:
    """op, hosts, role, size, measured and predicted time (ms) and busbw (GB/s), error (%): under 80 columns."""
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for header in ("op", "hosts", "role", "size", "meas ms", "pred ms", "meas GB/s", "pred GB/s", "err%"):
        t.add_column(header, justify="left" if header in ("op", "role") else "right", no_wrap=True)
    for r in rows:
        predicted = r.get("predicted_busbw_GBps")
        t.add_row(r["op"], str(r["num_hosts"]), r["role"], format_size(r["size_bytes"]), _us(r["measured_us"]),
                  _us(r.get("predicted_us")), f"{r['measured_busbw_GBps']:.4f}",
                  "-" if predicted is None else f"{predicted:.4f}", _error(r.get("error_pct")))
    return t


def summary_lines(results: dict) -> list[str]:
    """The error per op and band of the predicted rows, the fit and what was not predicted, as sentences."""
    rows = results["rows"]
    hosts = sorted({r["num_hosts"] for r in rows})
    lines = [f"fit: {results['fit_mode']}; error = predicted busbw / measured - 1"]
    for fit in results["fits"]:
        if fit["parameters"] is None:
            lines.append(f"  fit of {'+'.join(fit['ops'])} refused: {fit['error']}")
            continue
        moved = [f"{name.split('.')[-1] if 'latencies' not in name else name.removeprefix('library.latencies.')}"
                 f" {_quantity(name, p['value'])} (prior {_quantity(name, p['prior'])})"
                 for name, p in fit["parameters"].items() if p["fitted"]]
        lines.append(f"  fit of {'+'.join(fit['ops'])}: " + ("; ".join(moved) or "every parameter at its prior"))
    for s in results["summary"]:
        lines.append(f"{s['op']} on {hosts[-1]} hosts, {s['band']}: max |error| {s['max_abs_error_pct']:.1f} %, "
                     f"mean {s['mean_abs_error_pct']:.1f} % over {s['rows']} rows")
    missing = sorted({r["op"] for r in rows if r.get("error_pct") is None})
    if missing:
        lines.append(f"measured, not predicted: {', '.join(missing)} (see the refused fit above)")
    return lines


def _quantity(name: str, value: float) -> str:
    if name.endswith("_Bps"):
        return f"{value / 1e9:.4g} GB/s"
    if name.endswith("_s") and not name.endswith("per_byte_s"):
        return f"{value * 1e6:.4g} us"
    return f"{value:.4g}"
