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
import json
import math
import re
from typing import Any, Callable, Iterable

from fabriclab.report.store_views import LONG_LIST, Stored, command_of, result_tables, summarise_numbers

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
    distinct: Callable[[Stored], str] | None = None
    """What tells two records apart (their configuration): when given, the newest record of each distinct
    configuration is drawn (up to `keep` of them) and the runs it repeats are listed, not drawn."""

    def takes(self, kind: str) -> bool:
        return any(kind == k or (k.endswith("*") and (kind == k[:-1] or kind.startswith(k[:-1] + ".")))
                   for k in self.kinds)


def config_key(stored: Stored) -> str:
    """A record's configuration as one string (for `Section.distinct`): the same run twice has the same."""
    return json.dumps(stored.record.get("config"), sort_keys=True, default=str)


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


# A record's table of more columns than this and at most 6 rows is shown sideways (a row per column).
WIDE_COLUMNS = 8
# Tables longer than this fold into a <details> under their caption: the figure above says it first.
FOLD_ROWS = 12


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], *, caption: str = "", fold: bool | None = None) -> str:
    """An HTML table; cells are HTML already (use `esc`, `num`, `pct`). A table of more than FOLD_ROWS rows
    (or `fold=True`) is collapsible, closed, its caption and row count on the summary line."""
    rows = [list(r) for r in rows]
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td class="num">{c}</td>' if c.startswith('<a class="n') or c == "-"
                                    else f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    folded = len(rows) > FOLD_ROWS if fold is None else fold
    cap = f"<caption>{caption}</caption>" if caption and not folded else ""
    html_table = f'<div class="tbl"><table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
    if not folded:
        return html_table
    what = caption or "the numbers"
    return (f'<details class="tbl"><summary>Table: {what} ({len(rows)} rows)</summary>{html_table}</details>')


def histogram_svg(values: list[float], *, bins: int = 12, width: int = 120, height: int = 22) -> str:
    """A small inline SVG histogram of `values` (no script, nothing fetched), titled with its range."""
    lo, hi = min(values), max(values)
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / (hi - lo) * bins)) if hi > lo else 0] += 1
    top, bar = max(counts), width / bins
    rects = "".join(f'<rect x="{i * bar:.1f}" y="{height - c / top * height:.1f}" width="{bar - 1:.1f}" '
                    f'height="{c / top * height:.1f}"/>' for i, c in enumerate(counts) if c)
    return (f'<svg class="hist" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="histogram of {len(values)} values from {fmt(lo)} to {fmt(hi)}">'
            f"<title>{len(values)} values, {bins} bins from {esc(fmt(lo))} to {esc(fmt(hi))}</title>{rects}</svg>")


def value_cell(value: Any, stored: Stored) -> str:
    """A cell of a record's value: a number linked to its record; a long list of numbers as count, min,
    median, max and a histogram (not one value per line); other lists as short text."""
    if isinstance(value, list) and len(value) > LONG_LIST:
        summary = summarise_numbers(value)
        if summary:
            return (f"{summary['count']} values: min {num(summary['min'], stored)}, median "
                    f"{num(summary['median'], stored)}, max {num(summary['max'], stored)} "
                    + histogram_svg([v for v in value if v is not None]))
        return esc(f"{len(value)} items: " + ", ".join(map(str, value[:4])) + ", ...")
    if isinstance(value, list):
        return esc(", ".join(fmt(v) for v in value)) or "-"
    return num(value, stored) if value != "" else "-"


def rows_table(stored: Stored, *, limit: int = 60, caption: str = "") -> str:
    """Every result of a record as tables (its rows; each part of a dict of results; the rest as key /
    value), long lists summarised; the first `limit` rows of each (the rest: `results show`)."""
    tables = result_tables(stored.record.get("results"), summarise=False)
    if not tables:
        return "<p>(no results in this record)</p>"
    out = []
    for name, rows in tables:
        columns: dict[str, None] = {}
        for row in rows:
            columns.update(dict.fromkeys(row))
        shown = [[value_cell(r.get(c), stored) for c in columns] for r in rows[:limit]]
        if len(columns) > WIDE_COLUMNS and len(rows) <= 6:  # a few wide rows read better turned sideways
            heads = ["", *(f"row {i + 1}" for i in range(len(shown)))]
            sideways = [[esc(c.replace("_", " "))] + [row[j] for row in shown] for j, c in enumerate(columns)]
            title = (caption + (f" {esc(name)}" if name else "")).strip() or "results"
            out.append(table(heads, sideways, caption=title))
            continue
        more = (f" First {limit} of {len(rows)} rows; all: <code>fabriclab results show {stored.id}</code>."
                if len(rows) > limit else "")
        title = (caption + (f" {esc(name)}" if name else "")).strip() or "results"
        out.append(table([c.replace("_", " ") for c in columns], shown, caption=(title + more).strip()))
    return "".join(out)


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
            return (f"{x / 1e9:g}G" if x >= 1e9 else f"{x / 1e6:g}M" if x >= 1e6 else f"{x / 1e3:g}k" if x >= 1e4
                    else f"{x:g}" if x >= 1e-4 else f"{x:.12f}".rstrip("0"))  # 0.00001, never 1e-05

    finite = [v for v in values if isinstance(v, (int, float)) and v > 0 and math.isfinite(v)]
    axis = ax.yaxis if which == "y" else ax.xaxis
    if finite and max(finite) / min(finite) >= 20:
        getattr(ax, f"set_{which}scale")("log")
        axis.set_major_formatter(PlainLog(labelOnlyBase=False))
        axis.set_minor_formatter(PlainLog(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
        label = label.replace(")", ", log scale)") if label.endswith(")") else label + " (log scale)"
    getattr(ax, f"set_{which}label")(label)


def distinct_ticks(text: Callable[[float, int], str]):
    """A matplotlib tick formatter that writes each tick as `text(value, digits)` with the fewest significant
    digits (3 at least) that keep every label of the axis distinct: ticks 1,236,000 / 1,236,200 / 1,236,400
    read 1.236M, 1.2362M, 1.2364M, never 1.236M three times."""
    from matplotlib.ticker import Formatter

    class Distinct(Formatter):
        digits = 3

        def __call__(self, x, pos=None):
            return text(x, self.digits)

        def format_ticks(self, values):
            for self.digits in range(3, 16):
                labels = [text(v, self.digits) for v in values]
                if len(set(labels)) == len(labels):
                    break
            return labels

    return Distinct()


def dollar_axis(ax, which: str) -> None:
    """Tick labels of a US-dollar axis as $40k, $1.2M (not 1e6 under the axis), distinct (`distinct_ticks`)."""
    from matplotlib.ticker import FuncFormatter

    def dollars(x, digits=3):
        return (f"${x / 1e6:.{digits}g}M" if abs(x) >= 1e6 else f"${x / 1e3:.{digits}g}k" if abs(x) >= 1e3
                else f"${x:.{digits}g}")

    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_formatter(distinct_ticks(dollars))
    if getattr(ax, f"get_{which}scale")() == "log":  # minor ticks labelled at 2x and 5x of a decade
        def minor(x, pos=None):
            return dollars(x) if x > 0 and round(x / 10 ** math.floor(math.log10(x))) in (2, 5) else ""
        axis.set_minor_formatter(FuncFormatter(minor))


def time_axis(ax, which: str, values: Iterable[Any], what: str) -> float:
    """Label an axis of times in seconds in the unit that reads best (s, ms or us) and return the factor
    the caller multiplies its seconds by (1, 1e3 or 1e6): `time per step (ms)`, not `1e-05` seconds."""
    finite = [abs(v) for v in values if isinstance(v, (int, float)) and v and math.isfinite(v)]
    top = max(finite) if finite else 1.0
    unit, factor = ("s", 1.0) if top >= 1 else ("ms", 1e3) if top >= 1e-3 else ("us", 1e6)
    getattr(ax, f"set_{which}label")(f"{what} ({unit})")
    return factor


def min_span(ax, values: Iterable[Any], span: float, *, ceiling: float | None = None) -> None:
    """Give the y axis at least `span` (centred on the data, not above `ceiling`), so that a difference of
    0.001 is not drawn as a cliff."""
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not finite:
        return
    lo, hi = min(finite), max(finite)
    if hi - lo >= span:
        return
    mid = (lo + hi) / 2
    top = mid + span / 2
    if ceiling is not None and top > ceiling:
        top = ceiling
    ax.set_ylim(top - span, top)


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


def each(render: Callable[[Stored], str]) -> Callable[[list[Stored]], str]:
    """A section's `render` that draws every record with `render`, each `safely`."""
    return lambda records: "".join(safely(render, s) for s in records)


def safely(render: Callable[[Stored], str], stored: Stored) -> str:
    """`render(stored)`, or a note and the record's rows when its results are not shaped as expected."""
    try:
        return render(stored)
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as exc:
        return (f'<p class="note">Record {stored.id} could not be drawn ({esc(type(exc).__name__)}: '
                f"{esc(exc)}); its numbers follow.</p>" + rows_table(stored))
