"""A table whose rows are printed as they are measured: a long benchmark shows each result at once.

`RowStream(out, title, columns)` prints in the `--format` of `out` (`cli.common.Output`):

* `plain` (the default in a pipe): nccl-tests style, `# title`, a `# ` header and one fixed-width line
  per row, flushed as soon as the row exists; a killed run keeps every row it finished. Columns are as
  wide as their header or the width hint; a wider value widens its line, it is never cut.
* `csv`, `markdown`: the header, then each row as it comes.
* `table` (a terminal): one table, its rows printed as they come (fixed-width, nothing printed again at
  the end). Columns with one value for the whole run (`constant`) are said once under the title; where the
  header line is wider than the terminal, headers break into two lines at their unit (`busbw` over
  `(GB/s)`).
* `json`: the whole table by `finish()`; the rows go to stderr as they come only when stderr is a terminal
  and stdout is not (progress beside a file being written), never twice on one screen.

Try it: `fabriclab collectives bench --np 2 --sizes 1KB:1MB --format plain`.
"""

from __future__ import annotations

import csv
import sys
from typing import Sequence

from rich import box
from rich.table import Table
from rich.text import Text

from fabriclab.cli.common import STDOUT, Output, terminal_width
from fabriclab.report.tables import cell_text

STREAMED = ("plain", "csv", "markdown")


class RowStream:
    """One table printed row by row (see the module docstring)."""

    def __init__(self, out: Output, title: str, columns: Sequence[str], *,
                 widths: dict[str, int] | None = None, left: Sequence[str] = (),
                 constant: Sequence[str] = ()) -> None:
        self.out, self.title, self.columns = out, title, list(columns)
        self.left = set(left)
        self.table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for column in self.columns:
            self.table.add_column(column, justify="left" if column in self.left else "right", no_wrap=True)
        self.live = out.fmt == "table"
        self.streamed = out.fmt in STREAMED or self.live
        # the table's stream: stdout, unless `--json -` owns it
        self.file = sys.stderr if out.json_path == STDOUT or not self.streamed else sys.stdout
        self.progress = out.fmt == "json" and sys.stderr.isatty() and not sys.stdout.isatty()
        # on a terminal, constant columns are said once under the title
        self.constant = [i for i, c in enumerate(self.columns) if self.live and c in constant]
        self.shown = [i for i in range(len(self.columns)) if i not in self.constant]
        self.widths = [max(len(c), (widths or {}).get(c, 0)) for c in self.columns]
        self.headers = [[c] for c in self.columns]
        if self.live and self._width() > (terminal_width(self.file) or 80):
            self.headers = [_two_lines(c) for c in self.columns]
            self.widths = [max(max(map(len, h)), (widths or {}).get(c, 0)) for h, c in zip(self.headers, self.columns)]
        self.started = False

    def _width(self) -> int:
        return 2 + sum(self.widths[i] + 2 for i in self.shown) - 2

    def row(self, cells: Sequence[str | Text]) -> None:
        """Print one row now (and keep it for `finish`)."""
        self.table.add_row(*cells)
        texts = [cell_text(c) for c in cells]
        if not self.streamed:
            if self.progress:
                sys.stderr.write("  " + "  ".join(self._just(t, i) for i, t in enumerate(texts)).rstrip() + "\n")
            return
        if not self.started:
            # the first row (the smallest size, the slowest bandwidth) widens any column its value passes,
            # so that no row is wider than the header printed above it
            self.widths = [max(w, len(t)) for w, t in zip(self.widths, texts)]
            if self.constant:  # their value, from the first row, once under the title
                self.title += "\n# " + ", ".join(f"{self.columns[i]} {texts[i]}" for i in self.constant)
            self._header()
            self.started = True
        if self.out.fmt == "csv":
            csv.writer(self.file, lineterminator="\n").writerow(texts)
        elif self.out.fmt == "markdown":
            self.file.write("| " + " | ".join(t.replace("|", "\\|") for t in texts) + " |\n")
        else:
            self.file.write("  " + "  ".join(self._just(texts[i], i) for i in self.shown).rstrip() + "\n")
        self.file.flush()

    def finish(self) -> None:
        """Print the whole table where the rows could not be streamed (json); else the header of a table
        without rows."""
        if not self.started and self.streamed:
            self._header()
        if not self.streamed:
            self.out.table(self.table)

    def _header(self) -> None:
        if self.out.fmt == "csv":
            csv.writer(self.file, lineterminator="\n").writerow(self.columns)
        elif self.out.fmt == "markdown":
            self.file.write(f"### {self.title}\n\n| " + " | ".join(self.columns) + " |\n|"
                            + "|".join("---" for _ in self.columns) + "|\n")
        else:
            lines = max(len(h) for h in self.headers)
            heads = ["# " + "  ".join(self._just((["" ] * (lines - len(self.headers[i])) + self.headers[i])[k], i)
                                      for i in self.shown).rstrip() for k in range(lines)]
            self.file.write(f"# {self.title}\n" + "\n".join(heads) + "\n")
        self.file.flush()

    def _just(self, text: str, i: int) -> str:
        width = self.widths[i]
        return text.ljust(width) if self.columns[i] in self.left else text.rjust(width)


def _two_lines(header: str) -> list[str]:
    """A header broken before its unit or at its last space (`busbw(GB/s)` -> `busbw`, `(GB/s)`)."""
    for mark in ("(", " "):
        at = header.rfind(mark)
        if at > 0:
            return [header[:at].rstrip(), header[at:].strip()]
    return [header]
