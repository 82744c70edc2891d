"""Render a table for people or programs, in any width, without ever cutting a number.

Commands build their tables as `rich.table.Table` (title, column headers, cell strings) and hand them to
`render`, which writes one of five formats:

* `table`: rich's boxed table for a terminal. No cell is shortened: every column keeps its full width;
  when the whole table is wider than the terminal, it is printed *stacked* instead (one block per row,
  `header: value` per line; or as `plain` text where that fits), so an 80-column terminal still shows
  every digit.
* `plain`: fixed-width text like nccl-tests (`# title`, a header line, right-aligned columns), the
  default when stdout is not a terminal: a log of a run is readable and greppable at any width.
* `csv`: a header row and the rows (several tables are separated by a blank line).
* `json`: one JSON object per table and line: `{"title", "columns", "rows": [{column: cell}]}`.
* `markdown`: a GitHub table under a `### title` line.

Styling markup in cells (`[red]...[/red]`) is rendered by rich in `table`; the other formats print the text.

Try it: `fabriclab models --format plain`.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

FORMATS = ("table", "plain", "csv", "json", "markdown")

_MARKUP = re.compile(r"\[/?[a-z0-9 #_.,=-]*\]")


def check_format(fmt: str) -> str:
    """`fmt` if it is one of FORMATS; else a ValueError that lists them."""
    if fmt not in FORMATS:
        raise ValueError(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
    return fmt


def cell_text(cell: object) -> str:
    """The plain text of a rich cell: a str with its markup removed, a Text's plain string."""
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        try:
            return Text.from_markup(cell).plain
        except Exception:  # not valid markup: the string is the text
            return cell
    return str(cell)


def table_data(table: Table) -> tuple[str, list[str], list[list[str]]]:
    """Title, column headers and rows (as plain strings) of a rich table."""
    title = cell_text(table.title) if table.title is not None else ""
    columns = [cell_text(c.header) for c in table.columns]
    cells = [[cell_text(c) for c in col.cells] for col in table.columns]
    num_rows = max((len(c) for c in cells), default=0)
    rows = [[col[i] if i < len(col) else "" for col in cells] for i in range(num_rows)]
    return title, columns, rows


def render(table: Table, fmt: str, file: TextIO, *, width: int | None = None) -> None:
    """Write `table` to `file` in `fmt` (one of FORMATS); `width` only matters for `table`."""
    check_format(fmt)
    if fmt == "table":
        _render_rich(table, file, width)
        return
    title, columns, rows = table_data(table)
    writer = {"plain": plain_text, "csv": csv_text, "json": json_text, "markdown": markdown_text}[fmt]
    file.write(writer(title, columns, rows))


def plain_text(title: str, columns: list[str], rows: list[list[str]]) -> str:
    """Fixed-width text: `# title`, a `# `-prefixed header, rows indented two spaces, right-aligned."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(columns)]
    lines = [f"# {title}"] if title else []
    lines.append("# " + "  ".join(h.rjust(w) for h, w in zip(columns, widths)))
    lines += ["  " + "  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def csv_text(title: str, columns: list[str], rows: list[list[str]]) -> str:
    """A header row and the rows, RFC 4180 quoting; the title is not part of CSV."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buf.getvalue()


def json_text(title: str, columns: list[str], rows: list[list[str]]) -> str:
    """One line of JSON: the title, the columns and each row as an object keyed by column."""
    return json.dumps({"title": title, "columns": columns,
                       "rows": [dict(zip(columns, r)) for r in rows]}) + "\n"


def markdown_text(title: str, columns: list[str], rows: list[list[str]]) -> str:
    """A GitHub markdown table, `|` in cells escaped, under `### title`."""
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
    lines = [f"### {title}", ""] if title else []
    lines += [line(columns), "|" + "|".join("---" for _ in columns) + "|"]
    lines += [line(r) for r in rows]
    return "\n".join(lines) + "\n\n"


def stacked_text(title: str, columns: list[str], rows: list[list[str]]) -> str:
    """One block per row, `header: value` per line (headers padded): for tables wider than the screen."""
    pad = max((len(h) for h in columns), default=0)
    lines = [title] if title else []
    for i, r in enumerate(rows):
        lines.append(f"-- row {i + 1} of {len(rows)}")
        lines += [f"  {h.ljust(pad)}  {c}" for h, c in zip(columns, r)]
    return "\n".join(lines) + "\n"


def _render_rich(table: Table, file: TextIO, width: int | None) -> None:
    """Rich's table when it fits the width uncut, else the stacked form (never an ellipsis)."""
    for column in table.columns:
        column.no_wrap = True
    console = Console(file=file, width=width, highlight=False)
    # measured without the console's width cap: the width the table needs to show every cell whole
    needed = console.measure(table, options=console.options.update_width(10**6)).maximum
    if needed <= console.width:
        console.print(table)
        return
    title, columns, rows = table_data(table)
    text = plain_text(title, columns, rows)
    if max(len(line) for line in text.splitlines()) <= console.width:
        file.write(text)  # the unboxed fixed-width form fits: columns stay side by side
    else:
        file.write(stacked_text(title, columns, rows))
