"""`fabriclab report`: one self-contained HTML page from the records in the results store.

Try it: `fabriclab report --out report/` (then open report/index.html; it needs no network).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from fabriclab.cli.common import check_output_dir, user_errors
from fabriclab.cli.results import StoreOption, read_records


def register(main_app: typer.Typer) -> None:
    """Add the `report` command to the main app."""
    main_app.command("report")(report_cmd)


@user_errors
def report_cmd(
    out: Annotated[Path, typer.Option("--out", metavar="DIR",
                                      help="Folder for index.html (created if missing).")] = Path("report"),
    ids: Annotated[Optional[str], typer.Option("--ids", metavar="IDS", help="Only these records, e.g. 3,5-9 (default: all).")] = None,
    since: Annotated[Optional[str], typer.Option("--since", metavar="WHEN",
                                                 help="Only records since a date (2026-11-01) or an age (1d).")] = None,
    store: StoreOption = None,
) -> None:
    """Write DIR/index.html: the papers' figures beside fabriclab's numbers, from the store's records only."""
    from fabriclab.report import store as results_store
    from fabriclab.report.html import write_report
    from fabriclab.units import parse_int_list

    check_output_dir(out)
    chosen = parse_int_list(ids, minimum=1, what="--ids") if ids else None
    path = results_store.resolve_store_path(store)
    records = read_records(path, ids=chosen, since=since)
    if not records:
        typer.echo(f"note: no records in {path}" + (" match" if since else "") +
                   "; the report lists the commands that fill each section", err=True)
    page = write_report(out, records, store=path)
    typer.echo(f"wrote {page} ({len(records)} records, {page.stat().st_size / 1e6:.2f} MB)")
