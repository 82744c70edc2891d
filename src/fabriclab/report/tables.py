"""Render a table for people or programs, in any width, without ever cutting a number.

Commands build their tables as `rich.table.Table` (title, column headers, cell strings) and hand them to
`render`, which writes one of five formats:

* `table`: rich's boxed table for a terminal. No number is ever shortened. When the whole table is wider
  than the terminal, it is made narrower step by step: columns whose value is the same in every row move
  into one `column: value` line above the table; then long text cells wrap inside their column (numbers
  never wrap); then the unboxed `plain` form; only a table that still does not fit is printed *stacked*
  (one block per row, `header: value` per line), so an 80-column terminal still shows every digit.
* `plain`: fixed-width text like nccl-tests (`# title`, a header line, numbers right-aligned, text
  left-aligned), the default when stdout is not a terminal: a log of a run is readable at any width, no
  line over `PLAIN_WIDTH`. A text cell longer than `TEXT_CAP` characters does not widen its column for
  every row: it folds onto continuation lines (words whole); a table wider than `PLAIN_WIDTH` is printed
  in groups of columns, each led by the first column.
* `csv`: a header row and the rows (several tables are separated by a blank line).
* `json`: one JSON object per table and line: `{"title", "columns", "rows": [{column: cell}]}`.
* `markdown`: a GitHub table under a `### title` line.

Styling markup in cells (`[red]...[/red]`) is rendered by rich in `table`; the other formats print the text.

Try it: `fabriclab models --format plain`.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import re
import textwrap
from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

FORMATS = ("table", "plain", "csv", "json", "markdown")

_MARKUP = re.compile(r"\[/?[a-z0-9 #_.,=-]*\]")
# A cell that reads as a number: `0.750`, `-2.6 pt *`, `12.78 %`, `1.00x`, `8.309 s`, `1,024`, `1e-05`, `16 MB`,
# `$63.4M`.
_NUMBER = re.compile(r"^[<>~≈]?\s?[+-]?\$?(\d[\d,]*(\.\d*)?|\.\d+)([eE][+-]?\d+)?(\s?[A-Za-zµ%/]{1,6})?(\s?\*)?$")
_BLANK = ("", "-", "n/a", "—", "none")
# Text cells longer than this do not set their column's width in `plain` (no line padded to 500 characters).
TEXT_CAP = 40
# `plain` lines (a pipe, a log) fit this width: long text folds in its column, wide tables split their columns.
PLAIN_WIDTH = 160
# On a narrow terminal a text cell's word longer than this may be folded (not the first column's); shorter
# ones, link names such as `s0.gpu0->s0.nic0` and layouts, are never split.
FOLD_WORD = 32
# A markdown cell longer than this is folded with <br> between words.
MARKDOWN_CELL = 60


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


def is_number(text: str) -> bool:
    """Whether a cell reads as a number (with its unit or mark), so that it aligns right and never wraps."""
    return bool(_NUMBER.match(text.strip()))


def numeric_columns(columns: list[str], rows: list[list[str]]) -> list[bool]:
    """Per column: every cell that is not blank (`-`, `n/a`) is a number, and at least one is."""
    out = []
    for i in range(len(columns)):
        cells = [r[i].strip() for r in rows if r[i].strip() not in _BLANK]
        out.append(bool(cells) and all(is_number(c) for c in cells))
    return out


def constant_columns(columns: list[str], rows: list[list[str]]) -> list[int]:
    """Indices of the columns with one value in every row (of two rows or more)."""
    if len(rows) < 2:
        return []
    return [i for i in range(len(columns)) if len({r[i] for r in rows}) == 1]


def plain_text(title: str, columns: list[str], rows: list[list[str]], *, width: int | None = None) -> str:
    """Fixed-width text: `# title`, a `# `-prefixed header, rows indented two spaces; numbers right-aligned,
    text left-aligned. A text cell longer than its column (TEXT_CAP sets no column wider) folds onto
    continuation lines, words whole; the last column may run to `width` (PLAIN_WIDTH) first. A table wider
    than `width` is printed in groups of columns, each with the first column again."""
    width = width or PLAIN_WIDTH
    numeric = numeric_columns(columns, rows)
    widths = _plain_widths(columns, rows, numeric)
    groups = _plain_groups(widths, width)
    blocks = []
    for n, group in enumerate(groups):
        part = (f" (columns {group[1 if n else 0] + 1}-{group[-1] + 1} of {len(columns)}"
                + (f", with {columns[0]})" if n else ")")) if len(groups) > 1 else ""
        blocks.append(_plain_block(title + part if title or part else "", [columns[i] for i in group],
                                   [[r[i] for i in group] for r in rows], [widths[i] for i in group],
                                   [numeric[i] for i in group], width))
    return "".join(blocks)


def _plain_widths(columns: list[str], rows: list[list[str]], numeric: list[bool]) -> list[int]:
    widths = []
    for i, h in enumerate(columns):
        cells = [len(r[i]) for r in rows]
        if not numeric[i]:  # long text folds in TEXT_CAP characters, short text sets the width
            cells = [min(n, TEXT_CAP) for n in cells]
        widths.append(max([len(h)] + cells))
    return widths


def fit_width(table: Table, width: int = 80) -> list[Table]:
    """`table` alone when its `plain` lines fit `width`; else its columns in groups that do, each a table of
    its own led by the first column (the row's key, `#`) and titled `(columns a-b of n)`: a table too wide
    for an 80-column terminal or log is split in two (or more), never cut, in every format."""
    title, columns, rows = table_data(table)
    groups = _plain_groups(_plain_widths(columns, rows, numeric_columns(columns, rows)), width)
    if len(groups) == 1:
        return [table]
    parts = []
    for n, group in enumerate(groups):
        part = Table(title=f"{title} (columns {group[1 if n else 0] + 1}-{group[-1] + 1} of {len(columns)})")
        for i in group:
            part.add_column(columns[i], justify=table.columns[i].justify)
        for r in rows:
            part.add_row(*(r[i] for i in group))
        parts.append(part)
    return parts


def _plain_groups(widths: list[int], width: int) -> list[list[int]]:
    """Column indices in groups whose lines fit `width`, each after the first starting with column 0."""
    groups, current = [], [0]
    for i in range(1, len(widths)):
        if 2 + sum(widths[j] for j in current) + 2 * len(current) + widths[i] <= width or len(current) == 1:
            current.append(i)
        else:
            groups.append(current)
            current = [0, i]
    groups.append(current)
    return groups


def _plain_block(title: str, columns: list[str], rows: list[list[str]], widths: list[int], numeric: list[bool],
                 width: int) -> str:
    widths = list(widths)
    if not numeric[-1]:  # the last text column runs on to the line's width before it folds
        widths[-1] = max(widths[-1], width - 2 - sum(widths[:-1]) - 2 * (len(widths) - 1))

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if right else c.ljust(w) for c, w, right in zip(cells, widths, numeric))

    lines = [f"# {title}"] if title else []
    lines.append("# " + line(columns))
    for r in rows:
        parts = [[c] if right or len(c) <= w else textwrap.wrap(c, w, break_long_words=False, break_on_hyphens=False)
                 or [""] for c, w, right in zip(r, widths, numeric)]
        for k in range(max(len(p) for p in parts)):
            lines.append("  " + line([p[k] if k < len(p) else "" for p in parts]))
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
        return "| " + " | ".join(_md_cell(c) for c in cells) + " |"
    lines = [f"### {title}", ""] if title else []
    lines += [line(columns), "|" + "|".join("---" for _ in columns) + "|"]
    lines += [line(r) for r in rows]
    return "\n".join(lines) + "\n\n"


def _md_cell(text: str) -> str:
    """A markdown cell: `|` escaped, a cell longer than MARKDOWN_CELL folded at words with `<br>` (GitHub
    renders the breaks; the source line stays short)."""
    text = text.replace("|", "\\|")
    if len(text) <= MARKDOWN_CELL:
        return text
    return "<br>".join(textwrap.wrap(text, MARKDOWN_CELL, break_long_words=False, break_on_hyphens=False))


def stacked_text(title: str, columns: list[str], rows: list[list[str]], *, width: int | None = None) -> str:
    """One block per row, `header: value` per line (headers padded): for tables wider than the screen.
    With `width`, a long header puts its value on the next line and long text wraps (numbers never)."""
    pad = max((len(h) for h in columns), default=0)
    if width:
        pad = min(pad, width // 3)
    lines = [title] if title else []
    for i, r in enumerate(rows):
        lines.append(f"-- row {i + 1} of {len(rows)}")
        for h, c in zip(columns, r):
            if not width or len(h) <= pad and 4 + pad + len(c) <= width or is_number(c):
                lines.append(f"  {h.ljust(pad)}  {c}" if len(h) <= pad or not width else f"  {h}\n      {c}")
                continue
            indent = 4 + pad if len(h) <= pad else 6
            body = textwrap.wrap(c, width - indent, break_on_hyphens=False) or [""]
            first = f"  {h.ljust(pad)}  " if len(h) <= pad else f"  {h}\n{' ' * indent}"
            lines.append(first + ("\n" + " " * indent).join(body))
    return "\n".join(lines) + "\n"


def _render_rich(table: Table, file: TextIO, width: int | None, stacked: tuple | None = None) -> None:
    """Rich's table when it fits the width uncut; else narrower forms in turn (constant columns in a line
    above, text wrapped, plain, stacked), never an ellipsis and never a number split."""
    for column in table.columns:
        column.no_wrap = True
    console = Console(file=file, width=width, highlight=False)
    if _needed(console, table) <= console.width:
        console.print(table)
        return
    title, columns, rows = table_data(table)
    numeric = numeric_columns(columns, rows)
    same = constant_columns(columns, rows)
    kept = [i for i in range(len(columns)) if i not in same]
    narrow = copy.copy(table)
    narrow.columns = [copy.copy(table.columns[i]) for i in kept]
    for column, i in zip(narrow.columns, kept):
        column.justify = "right" if numeric[i] else "left"
    header = "; ".join(f"{columns[i]}: {rows[0][i]}" for i in same)
    if _needed(console, narrow) <= console.width:
        _print_narrow(console, narrow, title, header)
        return
    groups = _grouped(console, narrow, kept, columns, rows, numeric)
    if groups:
        console.print(Text("\n".join(t for t in (title, header) if t)))
        for part in groups:
            console.print(part)
        return
    if _wrap_text(console, narrow, kept, columns, rows, numeric):
        _print_narrow(console, narrow, title, header)
        return
    k_rows = [[r[i] for i in kept] for r in rows]
    k_columns = [columns[i] for i in kept]
    k_title = "\n".join(t for t in (title, header) if t)
    text = plain_text(k_title.replace("\n", "\n# "), k_columns, k_rows, width=console.width)
    if max(len(line) for line in text.splitlines()) <= console.width:
        file.write(text)  # the unboxed fixed-width form fits: columns stay side by side
        return
    if len(rows) == 1 and not stacked:  # one row: a key / value table, its values wrapped
        pairs = Table(title=k_title or None, title_justify="left")
        pairs.add_column("key")
        pairs.add_column("value")
        for c, v in zip(k_columns, k_rows[0]):
            pairs.add_row(Text(c), Text(v))
        _render_rich(pairs, file, width, stacked=(k_title, k_columns, k_rows))
        return
    if stacked:  # the key / value table of one row did not fit: that row, one line per value
        k_title, k_columns, k_rows = stacked
    groups = None if stacked else _column_groups(console, narrow, len(rows))
    if groups:
        if k_title:
            console.print(Text(k_title))
        for n, group in enumerate(groups):
            part = copy.copy(narrow)
            part.columns = [copy.copy(narrow.columns[j]) for j in group]
            part.title, part.title_justify = (f"columns {group[1] + 1}-{group[-1] + 1} of {len(kept)} "
                                              f"(with {k_columns[0]})" if n else None), "left"
            console.print(part)
        return
    file.write(stacked_text(k_title, k_columns, k_rows, width=console.width))


def _print_narrow(console: Console, narrow: Table, title: str, header: str) -> None:
    if header:  # the title, then the constant columns, then the table
        console.print(Text(f"{title}\n{header}" if title else header))
        narrow.title = None
    console.print(narrow)


def _column_groups(console: Console, table: Table, num_rows: int) -> list[list[int]] | None:
    """The columns of `table` in groups that each fit the console beside the first column (repeated in
    every group), in order; None where one column does not fit or the groups would print more lines
    than one block per row."""
    groups: list[list[int]] = []
    current = [0]
    for j in range(1, len(table.columns)):
        trial = copy.copy(table)
        trial.columns = [table.columns[i] for i in current + [j]]
        if _needed(console, trial) <= console.width:
            current.append(j)
        elif len(current) == 1:
            return None
        else:
            groups.append(current)
            current = [0, j]
    groups.append(current)
    if len(groups) * (num_rows + 5) >= num_rows * (len(table.columns) + 1):
        return None
    return groups


def _wrap_text(console: Console, table: Table, kept: list[int], columns: list[str], rows: list[list[str]],
               numeric: list[bool], fix_all: bool = False) -> bool:
    """Give the text columns of `table` fixed widths, no narrower than their longest word, so that it fits
    the console (the widest text column gives way first); False (table unchanged) where it cannot."""
    full = [max([len(columns[i])] + [len(r[i]) for r in rows]) for i in kept]
    words = [max(len(word) for text in [columns[i]] + [r[i] for r in rows] for word in (text.split() or [""]))
             for i in kept]
    # numbers whole; the first column (the row's name) with its words whole; other text may fold a word
    # longer than FOLD_WORD characters
    # numbers whole (their header may break between words)
    least = [max([len(r[i]) for r in rows] + [min(len(w), FOLD_WORD) for w in columns[i].split()]) if numeric[i]
             else longest if j == 0 else min(longest, max(FOLD_WORD, len(columns[i])))
             for j, (w, i, longest) in enumerate(zip(full, kept, words))]
    # a column's share follows its usual cell (the 90th percentile), not its one longest note
    typical = [max(1, sorted(len(r[i]) for r in rows)[int(0.9 * (len(rows) - 1))]) for i in kept]
    widths, over = list(full), _needed(console, table) - console.width
    while over > 0:
        # headers of numbers break first, then text columns shrink in proportion to their full width
        slack = [(numeric[kept[j]], w / typical[j], w, j) for j, (w, m) in enumerate(zip(widths, least)) if w > m]
        if not slack:
            return False
        j = max(slack)[3]
        widths[j] -= 1
        over -= 1
    for column, w, f in zip(table.columns, widths, full):
        if w < f:
            column.width, column.no_wrap, column.overflow = w, False, "fold"
        elif fix_all:
            column.width = w
    return True


def _grouped(console: Console, narrow: Table, kept: list[int], columns: list[str], rows: list[list[str]],
             numeric: list[bool]) -> list[Table] | None:
    """Where the first column repeats in runs (a row name over several lines of inputs), its value as a
    heading above each run and the other columns as one table per run, all of the same column widths
    (fitted, text wrapped): the width the first column took goes to the text. None where it does not
    apply or fit."""
    first = kept[0]
    runs: list[tuple[str, list[int]]] = []
    for i, r in enumerate(rows):
        if runs and runs[-1][0] == r[first]:
            runs[-1][1].append(i)
        else:
            runs.append((r[first], [i]))
    if numeric[first] or len(kept) < 3 or len(runs) * 2.5 > len(rows):
        return None
    template = copy.copy(narrow)
    template.columns = [copy.copy(c) for c in narrow.columns[1:]]
    template.box, template.title, template.show_edge = None, None, False
    for column in template.columns:
        column.width, column.no_wrap = None, True
    rest = kept[1:]
    # fixed widths, the same in every group's table (text wrapped where the whole does not fit)
    if not _wrap_text(console, template, rest, columns, rows, numeric, fix_all=True):
        return None
    tables = []
    for n, (label, members) in enumerate(runs):
        part = Table(box=None, show_header=n == 0, pad_edge=False, title=f"{columns[first]}: {label}",
                     title_justify="left", title_style="bold", header_style="bold")
        for column in template.columns:
            part.add_column(column.header, justify=column.justify, width=column.width, no_wrap=column.no_wrap,
                            overflow=column.overflow)
        for i in members:
            part.add_row(*(rows[i][j] for j in rest))
        tables.append(part)
    return tables


def _needed(console: Console, table: Table) -> int:
    """The width `table` needs to show every cell whole (measured without the console's width cap)."""
    return console.measure(table, options=console.options.update_width(10**6)).maximum
