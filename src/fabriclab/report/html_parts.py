"""Building blocks of the HTML report: escaped text, numbers that link to their record, tables, figures.

Figures are matplotlib `Figure`s drawn without pyplot (no global state, Agg only) and embedded as base64
PNG, so the page is one file that opens offline. Every number a table shows is a link to the record it
came from (`#rec-ID`, the record's metadata at the bottom of the page).

Try it: `fabriclab report --out report/`.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import math
import re
from typing import Any, Callable, Iterable

from fabriclab.report.store_views import Stored, command_of, result_rows

# 100 dpi: a 7 x 4.2 inch figure is 700 x 420 pixels, sharp enough and a ~40 kB PNG.
DPI = 100
_NUMERIC_TEXT = re.compile(r"^[+-]?\d[\d./eE+-]*$")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Section:
    """One section of the report: which record kinds it draws and how."""

    key: str
    """Anchor of the section (`#key`)."""
    title: str
    """Heading."""
    kinds: tuple[str, ...]
    """Record kinds it draws; a kind ending in `*` takes the kind and its sub-kinds."""
    fill: str
    """The command that adds records for it (shown while it has none)."""
    intro: str
    """What it shows and where it comes from (HTML)."""
    render: Callable[[list[Stored]], str]
    """HTML of the section's body from its records (newest first)."""
    keep: int = 3
    """Records of one kind drawn (the newest); older ones are listed with links."""
    pooled: tuple[str, ...] = ()
    """Kinds whose records together make one figure (one run per point): all are drawn."""

    def takes(self, kind: str) -> bool:
        return any(kind == k or (k.endswith("*") and (kind == k[:-1] or kind.startswith(k[:-1] + ".")))
                   for k in self.kinds)


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def anchor(stored: Stored) -> str:
    return f"rec-{stored.id}"


def fmt(value: Any, digits: int = 4) -> str:
    """A number as people read it: ints whole, floats to `digits` significant digits; `-` for None."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 10**digits else f"{value:.{digits}g}"  # 15,098, not 1.51e+04
    return str(value)


def num(value: Any, stored: Stored, digits: int = 4, suffix: str = "") -> str:
    """A number (or a number kept as text, such as a ratio `1/4`) linked to its record; other text is
    escaped, not linked."""
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if numeric or (isinstance(value, str) and _NUMERIC_TEXT.match(value)):
        return (f'<a class="n" href="#{anchor(stored)}" title="record {stored.id}">'
                f"{esc(fmt(value, digits))}{esc(suffix)}</a>")
    return esc(fmt(value, digits))


def pct(value: Any, stored: Stored) -> str:
    """A signed percentage (an error) linked to its record, coloured when beyond 10 %."""
    if not isinstance(value, (int, float)) or value is None or not math.isfinite(value):
        return "-"
    cls = "bad" if abs(value) > 10 else "ok"
    return (f'<a class="n {cls}" href="#{anchor(stored)}" title="record {stored.id}">'
            f"{value:+.1f}%</a>")


def error_pct(predicted: Any, measured: Any) -> float | None:
    """(predicted - measured) / measured in percent, None where either is missing or measured is 0."""
    if not all(isinstance(v, (int, float)) and v is not None and math.isfinite(v) for v in (predicted, measured)):
        return None
    return (predicted - measured) / measured * 100 if measured else None


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], *, caption: str = "") -> str:
    """An HTML table; cells are HTML already (use `esc`, `num`, `pct`)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td class="num">{c}</td>' if c.startswith('<a class="n') or c == "-"
                                    else f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    cap = f"<caption>{caption}</caption>" if caption else ""
    return f'<div class="tbl"><table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def rows_table(stored: Stored, *, limit: int = 60, caption: str = "") -> str:
    """Every result row of a record as a table (the first `limit` rows; the rest: `results show`)."""
    rows = result_rows(stored.record.get("results"))
    if not rows:
        return "<p>(no results in this record)</p>"
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    shown = [[num(r.get(c), stored) for c in columns] for r in rows[:limit]]
    more = (f" First {limit} of {len(rows)} rows; all: <code>fabriclab results show {stored.id}</code>."
            if len(rows) > limit else "")
    return table(list(columns), shown, caption=(caption + more).strip())


def new_figure(width_in: float = 7.0, height_in: float = 4.2, ncols: int = 1):
    """A Figure and its axes, drawn with Agg, without pyplot's global state."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), dpi=DPI)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, (axes[0] if ncols == 1 else list(axes))


def log_axis(ax, which: str, values: Iterable[Any], label: str) -> None:
    """Label the x or y axis; log scale (plain-number ticks) when the positive values span 20x or more,
    else linear: a log axis over a narrow range has no readable ticks."""
    from matplotlib.ticker import LogFormatter

    class PlainLog(LogFormatter):  # LogFormatter picks the ticks to label; they read 0.6 or 20k, not 6e-01
        def __call__(self, x, pos=None):
            if not super().__call__(x, pos):
                return ""
            return f"{x / 1e6:g}M" if x >= 1e6 else f"{x / 1e3:g}k" if x >= 1e4 else f"{x:g}"

    finite = [v for v in values if isinstance(v, (int, float)) and v > 0 and math.isfinite(v)]
    axis = ax.yaxis if which == "y" else ax.xaxis
    if finite and max(finite) / min(finite) >= 20:
        getattr(ax, f"set_{which}scale")("log")
        axis.set_major_formatter(PlainLog(labelOnlyBase=False))
        axis.set_minor_formatter(PlainLog(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
        label = label.replace(")", ", log scale)") if label.endswith(")") else label + " (log scale)"
    getattr(ax, f"set_{which}label")(label)


def figure(fig, *, alt: str, caption: str) -> str:
    """The figure as an inline PNG with its alt text, and a caption (HTML) that names its record(s)."""
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    width, height = (round(v) for v in fig.get_size_inches() * DPI)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" width="{width}" height="{height}" '
            f'alt="{esc(alt)}"><figcaption>{caption}</figcaption></figure>')


def source(stored: Stored) -> str:
    """`record N (command, time, git, host)` with a link to the record's metadata."""
    r = stored.record
    git = (r.get("git") or {}).get("revision")
    host = (r.get("host") or {}).get("hostname")
    return (f'<a href="#{anchor(stored)}">record {stored.id}</a> (<code>{esc(command_of(r))}</code>, '
            f"{esc(stored.created_utc.replace('T', ' ').replace('+00:00', ' UTC'))}, "
            f"git {esc(git[:10] if git else 'unknown')}, host {esc(host or 'unknown')})")


def sources(records: Iterable[Stored]) -> str:
    return "; ".join(source(s) for s in records)


def series_style(i: int) -> dict:
    """Colour and marker of the i-th series, so that lines stay apart in grey print too."""
    markers = "osD^vPX*"
    return {"color": f"C{i % 10}", "marker": markers[i % len(markers)]}


def safely(render: Callable[[Stored], str], stored: Stored) -> str:
    """`render(stored)`, or a note and the record's rows when its results are not shaped as expected."""
    try:
        return render(stored)
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as exc:
        return (f'<p class="note">Record {stored.id} could not be drawn ({esc(type(exc).__name__)}: '
                f"{esc(exc)}); its numbers follow.</p>" + rows_table(stored))
