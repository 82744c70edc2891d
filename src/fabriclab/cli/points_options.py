"""Where a plan's or sweep's points run, defined once: `--scheduler`, `--processes`, `--resume`.

`plan`, `simulate sweep`, `whatif` sweeps and `validate published` take these three options and build a
`report.points.runner.PointRunner` with `point_runner(...)`: the points run in this process (the default),
on `--processes N` local processes, or on the Dask cluster at `--scheduler tcp://HOST:PORT`
(`FABRICLAB_SCHEDULER` when the option is not given). Finished points go to the results store as they
finish; `--resume` reads back those of the same configuration instead of running them again.

Try it: `fabriclab plan --model resnet50 --processes 2 --resume`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

SCHEDULER_ENV = "FABRICLAB_SCHEDULER"

SchedulerOption = Annotated[Optional[str], typer.Option(
    "--scheduler", metavar="tcp://HOST:PORT", help=f"Run the points on this Dask scheduler's workers "
    f"(`dask scheduler`, `dask worker`; default ${SCHEDULER_ENV}, else this machine).")]
ProcessesOption = Annotated[Optional[str], typer.Option(
    "--processes", metavar="N", help="Local processes that run the points (default 1: this process).")]
ResumeOption = Annotated[bool, typer.Option(
    "--resume", help="Skip the points of this same configuration already in the results store.")]


def point_runner(scheduler: str | None, processes: str | None, resume: bool, store: Path | None, what: str):
    """The PointRunner of the parsed options (bad values: a ValueError that says what to change)."""
    from fabriclab.cli.common import _store_path
    from fabriclab.cli.options import parse_count
    from fabriclab.report.points.runner import PointRunner

    scheduler = scheduler or os.environ.get(SCHEDULER_ENV, "").strip() or None
    count = 1 if processes is None else parse_count(processes, "--processes")
    return PointRunner(scheduler=scheduler, workers=count, resume=resume, store=_store_path(store), what=what)
