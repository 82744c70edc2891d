"""`fabriclab validate published`: our models against every published measurement they can predict.

Prints one row per published number (Zhang et al., Samsi et al., Awan et al., Horovod's docs): the
published value, the prediction of today's models (`before`, `--models baseline`) and of the models
with the clusters' mechanisms (`after`, `--models mechanisms`), the error of each; then what each row
is, how each prediction was made and every input with its source (`--no-details` leaves those out).
Nothing is measured: it runs in seconds on any machine.

Try it: `fabriclab validate published --models both --format plain`.
"""

from __future__ import annotations

import sys

from typing import Optional

import typer

from fabriclab.cli.common import (
    FormatOption,
    JsonOption,
    Output,
    split_list,
    user_errors,
)

MODEL_CHOICES = {"baseline": ("baseline",), "mechanisms": ("mechanisms",), "both": ("baseline", "mechanisms")}


def register(validate_app: typer.Typer) -> None:
    """Add `published` to the `validate` group."""
    validate_app.command("published")(published)


def _progress(i: int, n: int, key: str) -> None:
    """One updating line on a terminal's stderr while the rows are predicted (a few seconds)."""
    sys.stderr.write(f"\r\033[Kpredicting row {i + 1}/{n}: {key}")
    sys.stderr.flush()


@user_errors
def published(
    models: str = typer.Option("both", help="Which models predict: baseline (today's what-if and "
                               "simulators), mechanisms (with the clusters' mechanisms) or both."),
    rows: Optional[str] = typer.Option(None, help="Only rows whose key starts with one of these, comma "
                                       "separated, e.g. zhang-,awan- (default: all)."),
    details: bool = typer.Option(True, help="Also print what each row is, how each prediction was made and "
                                 "every input with its source."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
) -> None:
    """Published measurements of real clusters beside our predictions, before and after the mechanisms."""
    from fabriclab.bench.published.rows import compare
    from fabriclab.report import published as report

    if models not in MODEL_CHOICES:
        raise ValueError(f"--models {models!r}: use baseline, mechanisms or both")
    model_sets = MODEL_CHOICES[models]
    keys = tuple(split_list(rows, "row list")) if rows else None
    out = Output(fmt, json_path)
    comparisons = compare(model_sets, keys, progress=_progress if sys.stderr.isatty() else None)
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K")  # clear the progress line before the table
    out.table(report.comparison_table(comparisons, model_sets))
    for line in report.summary_lines(comparisons, model_sets):
        out.note(line)
    if details:
        out.table(report.rows_table(comparisons))
        out.table(report.notes_table(comparisons, model_sets))
        out.table(report.inputs_table(comparisons, model_sets))
    out.record("validate.published", {"models": list(model_sets), "rows": list(keys or ())},
               {"rows": [c.as_dict() for c in comparisons]})
