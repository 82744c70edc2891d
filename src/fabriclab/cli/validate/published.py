"""`fabriclab validate published`: our models against every published measurement they can predict.

Prints one row per published number (Zhang et al., Samsi et al., Awan et al., Horovod's docs): the
published value, the prediction of today's models (`before`, `--models baseline`) and of the models
with the clusters' mechanisms (`after`, `--models mechanisms`), the error of each; then what each row
is, how each prediction was made and every input with its source (`--no-details` leaves those out).
Nothing is measured: it runs in seconds on any machine.

Try it: `fabriclab validate published --models both --format plain`.
"""

from __future__ import annotations

from typing import Optional

import typer

from fabriclab.cli.common import (
    FormatOption,
    JsonOption,
    Output,
    split_list,
    user_errors,
)
from fabriclab.cli.points_options import ProcessesOption, ResumeOption, SchedulerOption, point_runner

MODEL_CHOICES = {"baseline": ("baseline",), "mechanisms": ("mechanisms",), "both": ("baseline", "mechanisms")}


def register(validate_app: typer.Typer) -> None:
    """Add `published` to the `validate` group."""
    validate_app.command("published")(published)


@user_errors
def published(
    models: str = typer.Option("both", help="Which models predict: baseline (today's what-if and "
                               "simulators), mechanisms (with the clusters' mechanisms) or both."),
    rows: Optional[str] = typer.Option(None, help="Only rows whose key starts with one of these, comma "
                                       "separated, e.g. zhang-,awan- (default: all)."),
    details: bool = typer.Option(True, help="Also print what each row is, how each prediction was made and "
                                 "every input with its source."),
    scheduler: SchedulerOption = None, processes: ProcessesOption = None, resume: ResumeOption = False,
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
    with point_runner(scheduler, processes, resume, None, "published rows") as runner:
        comparisons = compare(model_sets, keys, run_points=runner)
    out.table(report.comparison_table(comparisons, model_sets))
    for line in report.summary_lines(comparisons, model_sets):
        out.note(line)
    if details:
        out.table(report.rows_table(comparisons))
        out.table(report.notes_table(comparisons, model_sets))
        out.table(report.inputs_table(comparisons, model_sets))
    out.record("validate.published", {"models": list(model_sets), "rows": list(keys or ())},
               {"rows": [c.as_dict() for c in comparisons]})
