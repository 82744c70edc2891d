"""`fabriclab results`: list, show, export and diff the records in the results store.

Every command that runs or simulates something adds its record to the store (`--store PATH`, else
$FABRICLAB_STORE, else ~/.local/share/fabriclab/results.db; see `fabriclab.report.store`). These
commands only read it.

Try it: `fabriclab results list --since 1d`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from fabriclab.cli.common import FormatOption, Output, check_output_path, err_console, user_errors
from fabriclab.report import store as results_store
from fabriclab.report.store_views import (EXPORT_FORMATS, ROW_PRESENT, command_of, export, flatten, result_rows,
                                           result_tables)

app = typer.Typer(help="The results store: list, show, export and diff the records of past runs.",
                  no_args_is_help=True)

StoreOption = Annotated[Optional[Path], typer.Option(
    "--store", metavar="PATH", dir_okay=False,
    help="Results store to read (default: $FABRICLAB_STORE, else ~/.local/share/fabriclab/results.db, "
         "or under $XDG_DATA_HOME).")]
CommandOption = Annotated[Optional[str], typer.Option(
    "--command", metavar="C", help="Only records of this command, e.g. whatif, simulate, bench.train "
                                   "(a group keeps its sub-commands).")]
SinceOption = Annotated[Optional[str], typer.Option(
    "--since", metavar="WHEN", help="Only records since a date (2026-11-01, UTC) or within an age (3h, 1d, 2w).")]
# Cells longer than this are cut in `show` tables of result rows (the full record: --format json).
_SHOWN = 60
# Rows of one table `show` prints (a stored trace has thousands); the rest: --format json or export.
_SHOWN_ROWS = 60


def read_records(store: Path | None, **kwargs) -> list:
    """The store's records (`list_records`' filters); rows that are no fabriclab record are left out and named
    in one warning line on stderr, so one bad row does not hide the others."""
    skipped: list[tuple[int, str]] = []
    found = results_store.list_records(store, skipped=skipped, **kwargs)
    if skipped:
        shown = "; ".join(f"{rid} ({why})" for rid, why in skipped[:5]) + ("; ..." if len(skipped) > 5 else "")
        err_console.print(f"warning: {len(skipped)} row{'s' if len(skipped) > 1 else ''} of "
                          f"{results_store.resolve_store_path(store)} skipped, not fabriclab records: {shown}; "
                          f"`fabriclab results show ID` says how to remove one", style="yellow", markup=False,
                          soft_wrap=True)
    return found


def register(main_app: typer.Typer) -> None:
    """Add the `results` group to the main app."""
    main_app.add_typer(app, name="results")


@app.command("list")
@user_errors
def list_cmd(command: CommandOption = None, since: SinceOption = None, store: StoreOption = None,
             fmt: FormatOption = None) -> None:
    """One line per record: id, command, time (UTC), git revision, host, number of result rows."""
    out = Output(fmt)
    path = results_store.resolve_store_path(store)
    found = read_records(path, command=command, since=since)
    table = Table(title=f"records in {path}")
    for col in ("id", "kind", "created (UTC)", "git", "host", "rows"):
        table.add_column(col, justify="right" if col in ("id", "rows") else "left")
    for s in found:
        table.add_row(str(s.id), escape(s.kind), s.created_utc.replace("+00:00", ""), _git(s.record),
                      str((s.record.get("host") or {}).get("hostname") or "-"),
                      str(len(result_rows(s.record.get("results")))))
    if not found:
        out.note(f"no records in {path}" + (" match" if command or since else "") +
                 "; every run adds its record there, e.g. `fabriclab whatif`")
        return
    out.table(table)


@app.command("show")
@user_errors
def show_cmd(record_id: Annotated[int, typer.Argument(metavar="ID", help="Record id (see `results list`).")],
             store: StoreOption = None, fmt: FormatOption = None) -> None:
    """One record: where it came from, its config and its results (`--format json`: the record itself)."""
    s = results_store.get_record(record_id, store)
    if fmt == "json":
        typer.echo(json.dumps({"id": s.id, **s.record, "nulled_keys": list(s.nulled_keys)}, indent=2))
        return
    out = Output(fmt)
    r = s.record
    meta = Table(title=f"record {s.id}: {s.kind}")
    meta.add_column("key")
    meta.add_column("value")
    host = r.get("host") or {}
    facts = {"command": command_of(r), "created (UTC)": s.created_utc, "git": _git(r, short=False),
             "host": f"{host.get('hostname', '-')}: {host.get('cpu_model') or '-'}, "
                     f"{host.get('num_cpus', '-')} CPUs, {host.get('os', '-')}",
             "versions": ", ".join(f"{k} {v}" for k, v in (r.get("versions") or {}).items())}
    if s.nulled_keys:
        facts["stored as null"] = ", ".join(s.nulled_keys) + " (not finite numbers)"
    facts.update({f"config.{k}": _text(v) for k, v in flatten(r.get("config") or {}).items()})
    for k, v in facts.items():
        meta.add_row(escape(k), escape(v))
    out.table(meta)
    for name, rows in result_tables(r.get("results")):
        columns: dict[str, None] = {}
        for row in rows:
            columns.update(dict.fromkeys(row))
        what = f"results: {name}" if name else "results"
        shown = f"the first {_SHOWN_ROWS} of {len(rows)} rows" if len(rows) > _SHOWN_ROWS else f"{len(rows)} rows"
        results = Table(title=f"record {s.id}: {what} ({shown})")
        for col in columns:
            results.add_column(escape(col or "value"))
        for row in rows[:_SHOWN_ROWS]:
            results.add_row(*(_text(row.get(c), cut=True) for c in columns))
        out.table(results)
        if len(rows) > _SHOWN_ROWS:
            out.note(f"{len(rows) - _SHOWN_ROWS} more rows of {what}: `fabriclab results show {s.id} --format json` "
                     f"or `fabriclab results export --ids {s.id}`")


@app.command("export")
@user_errors
def export_cmd(fmt: Annotated[str, typer.Option("--format", metavar="csv|json",
                                                help="csv: one line per result row; json: the records.")] = "csv",
               out: Annotated[Optional[Path], typer.Option("--out", metavar="PATH", dir_okay=False,
                                                           help="Write here (default: stdout).")] = None,
               command: CommandOption = None, since: SinceOption = None,
               ids: Annotated[Optional[str], typer.Option("--ids", metavar="IDS", help="Only these ids, e.g. 3,5-9.")] = None,
               store: StoreOption = None) -> None:
    """Export records as CSV (id, kind, time, git, host, config.*, then each result row's fields) or JSON."""
    from fabriclab.units import parse_int_list

    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"--format {fmt!r}: export writes {' or '.join(EXPORT_FORMATS)}")
    check_output_path(out, "--out")
    chosen = parse_int_list(ids, minimum=1, what="--ids") if ids else None
    text = export(read_records(store, command=command, since=since, ids=chosen), fmt)
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)
        typer.echo(f"wrote {out}", err=True)


@app.command("diff")
@user_errors
def diff_cmd(a: Annotated[int, typer.Argument(metavar="ID", help="First record.")],
             b: Annotated[int, typer.Argument(metavar="ID", help="Second record.")],
             any_kind: Annotated[bool, typer.Option("--any-kind", help="Compare records of different kinds "
                                                                       "too (lists every key of both).")] = False,
             store: StoreOption = None, fmt: FormatOption = None) -> None:
    """Config and metric changes between two records of one kind, side by side (only keys that differ)."""
    out = Output(fmt)
    ra, rb = results_store.get_record(a, store), results_store.get_record(b, store)
    if ra.kind != rb.kind and not any_kind:  # nothing lines up: every key of both would be listed
        raise ValueError(f"record {a} is a {ra.kind!r} record and record {b} a {rb.kind!r} one: diff two "
                         f"records of one kind (see `fabriclab results list --command {ra.kind}`), or add "
                         f"--any-kind to list every key")
    rows = results_store.diff(ra, rb)
    table = Table(title=f"record {a} ({ra.kind}) vs record {b} ({rb.kind}): {len(rows)} keys differ")
    for col in ("key", f"#{a}", f"#{b}", "change"):
        table.add_column(col, justify="left" if col == "key" else "right")
    for d in rows:
        if d.relative_change is not None:
            change = f"{d.relative_change:+.2%}"
        elif d.a == ROW_PRESENT or d.b == ROW_PRESENT:
            change = f"only in #{a}" if d.a == ROW_PRESENT else f"only in #{b}"
        else:
            change = ""
        table.add_row(escape(d.key), _text(d.a), _text(d.b), change)
    if not rows:
        out.note(f"records {a} and {b} hold the same config, results, versions, git revision and host")
        return
    out.table(table)


def _git(record: dict, short: bool = True) -> str:
    git = record.get("git") or {}
    rev = git.get("revision")
    if not rev:
        return "-"
    return (rev[:10] if short else rev) + (" (local changes)" if git.get("dirty") and not short else
                                           "*" if git.get("dirty") else "")


def _text(value: Any, cut: bool = False) -> str:
    """A cell (markup escaped): `-` for None, JSON for lists; numbers in full, never rounded; long lists
    cut in `show`."""
    if value is None:
        return "-"
    text = json.dumps(value) if isinstance(value, (list, dict)) else str(value)
    if cut and isinstance(value, (list, dict)) and len(text) > _SHOWN:
        text = text[:_SHOWN - 12] + f"... ({len(value)} items)"
    return escape(text)
