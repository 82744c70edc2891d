"""A table whose rows are printed as they are measured: a long benchmark shows each result at once.

`RowStream(out, title, columns)` prints in the `--format` of `out` (`cli.common.Output`):

* `plain` (the default in a pipe): nccl-tests style, `# title`, a `# ` header and one fixed-width line
  per row, flushed as soon as the row exists; a killed run keeps every row it finished. Columns are as
  wide as their header or the width hint; a wider value widens its line, it is never cut.
* `csv`, `markdown`: the header, then each row as it comes.
* `table` (a terminal) and `json`: each row as a plain line on stderr as it comes (progress), then the
  whole table in that format on stdout by `finish()`.

Try it: `fabriclab collectives bench --np 2 --sizes 1KB:1MB --format plain`.
"""

from __future__ import annotations

import csv
import sys
from typing import Sequence

from rich import box
from rich.table import Table
from rich.text import Text

from fabriclab.cli.common import STDOUT, Output
from fabriclab.report.tables import cell_text

STREAMED = ("plain", "csv", "markdown")


class RowStream:
    """One table printed row by row (see the module docstring)."""

    def __init__(self, out: Output, title: str, columns: Sequence[str], *,
                 widths: dict[str, int] | None = None, left: Sequence[str] = ()) -> None:
        self.out, self.title, self.columns = out, title, list(columns)
        self.left = set(left)
        self.widths = [max(len(c), (widths or {}).get(c, 0)) for c in self.columns]
        self.table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for column in self.columns:
            self.table.add_column(column, justify="left" if column in self.left else "right", no_wrap=True)
        self.streamed = out.fmt in STREAMED
        # the table's stream: stdout, unless `--json -` owns it
        self.file = sys.stderr if out.json_path == STDOUT or not self.streamed else sys.stdout
        self.started = False

    def row(self, cells: Sequence[str | Text]) -> None:
        """Print one row now (and keep it for `finish`)."""
        self.table.add_row(*cells)
        texts = [cell_text(c) for c in cells]
        if not self.started:
            self._header()
            self.started = True
        if self.out.fmt == "csv":
            csv.writer(self.file, lineterminator="\n").writerow(texts)
        elif self.out.fmt == "markdown":
            self.file.write("| " + " | ".join(t.replace("|", "\\|") for t in texts) + " |\n")
        else:
            self.file.write("  " + "  ".join(self._just(t, i) for i, t in enumerate(texts)).rstrip() + "\n")
        self.file.flush()

    def finish(self) -> None:
        """Print the whole table where the rows could not be streamed (table, json formats)."""
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
            self.file.write(f"# {self.title}\n# "
                            + "  ".join(self._just(c, i) for i, c in enumerate(self.columns)).rstrip() + "\n")
        self.file.flush()

    def _just(self, text: str, i: int) -> str:
        width = self.widths[i]
        return text.ljust(width) if self.columns[i] in self.left else text.rjust(width)
