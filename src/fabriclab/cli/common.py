"""What every command shares: the one-line error for bad input, `--format`, `--json`, `--store`, output.

Output: a command builds rich tables and hands them to `Output.table`, which renders them in the chosen
`--format` (see `fabriclab.report.tables`: never a cut number; `plain` when stdout is not a terminal).
When stdout carries machine output (`--format csv|json`, or `--json -`), human lines (`Output.note`) and
tables other than the machine output go to stderr, so stdout stays parseable. `Output.record` writes
the run's record to `--json PATH` (`-` = stdout) and adds it to the results store.

Output paths are checked before the work (`check_output_path`, `check_output_dir`); if a write still
fails after the work, the record is saved to a temporary file that the error line names, so the
result is never lost.

A `ValueError` that escapes a command decorated with `@user_errors` is bad user input: it prints one
red line `error: <message>` to stderr and exits with code 2, the code typer uses for its own usage
errors; no traceback. Failed checks exit with 1 (`EXIT_FAILED`).

Try it: `fabriclab collectives verify --ranks 0` (prints one error line, exits 2).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Optional, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from fabriclab.record import make_record, write_record
from fabriclab.report.tables import FORMATS, check_format, render

EXIT_FAILED = 1
EXIT_USAGE = 2

# Piped or captured output gets a wide console so tables stay readable; COLUMNS still wins.
_WIDTH = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 160
console = Console(highlight=False, width=_WIDTH)
err_console = Console(stderr=True, highlight=False, width=_WIDTH)

JsonOption = Annotated[
    Optional[Path],
    typer.Option("--json", metavar="PATH",
                 help="Write a machine-readable record of this run (config, versions, host, results) "
                      "to PATH; - writes it to stdout."),
]
FormatOption = Annotated[
    Optional[str],
    typer.Option("--format", metavar="FORMAT",
                 help=f"Output format: {'|'.join(FORMATS)} (default: table on a terminal, plain "
                      "otherwise; numbers are never cut)."),
]
StoreOption = Annotated[
    Optional[Path],
    typer.Option("--store", metavar="PATH",
                 help="Results store (SQLite) this run's record is added to, or `off` (default: "
                      "$FABRICLAB_STORE, else ~/.local/share/fabriclab/results.db)."),
]
STDOUT = Path("-")
# A line of human output in a pipe or file is wrapped at this width (words whole): a log stays readable
# in a terminal of any width and greppable, with no 2,000-character line.
PIPE_WIDTH = 160

# The command line of this run (`fabriclab plan --model ...`), set by the `fabriclab` entry point for the
# run and written into its record: the report and `results show` name a record by what made it.
_COMMAND_LINE: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar("command_line", default=None)


@contextlib.contextmanager
def command_line(args: list[str]):
    """Within the block, records are stamped with `fabriclab ARGS...`."""
    token = _COMMAND_LINE.set(("fabriclab", *map(str, args)))
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)

F = TypeVar("F", bound=Callable[..., Any])


def print_error(message: object) -> None:
    """Print `error: <message>` as one red line on stderr (bad input and failed runs alike)."""
    err_console.print(f"error: {message}", style="red", markup=False, soft_wrap=True)


def fail_usage(message: str) -> typer.Exit:
    """Print `error: <message>`; returns the exit (code 2) to raise."""
    print_error(message)
    return typer.Exit(EXIT_USAGE)


def user_errors(command: F) -> F:
    """Decorate a command so that a ValueError from user input becomes `fail_usage(message)`."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ValueError as exc:
            raise fail_usage(str(exc)) from None

    return wrapper  # type: ignore[return-value]


def save_record(path: Path | None, kind: str, config: dict, results: Any,
                store: Path | None = None, top: dict | None = None, where: dict | None = None) -> dict | None:
    """Write the run's record to `path` (`-`: stdout) when given, add it to the store; returns it (None
    when it goes nowhere: no --json and the store off, so no git or host facts are gathered). `where`,
    when given, gets the record's `id` and `store` path once it is in the store."""
    if path is None and _store_path(store) is None:
        return None
    record = make_record(kind, config, results, top)
    if _COMMAND_LINE.get() is not None:
        record["command"] = list(_COMMAND_LINE.get())
    if path is not None:
        _write_record_safely(path, record)
    record_id = _store_record(record, store)
    if where is not None and record_id is not None:
        where.update(id=record_id, store=_store_path(store))
    return record


def _write_record_safely(path: Path, record: dict) -> None:
    """Write `record`; if that fails after the work, keep it in a temporary file and say where."""
    if path == STDOUT:
        sys.stdout.write(_record_json(record))
        sys.stdout.flush()
        return
    try:
        write_record(path, record)
    except OSError as exc:
        kept = _keep_in_temp(record)
        raise ValueError(f"cannot write the record to {path} ({exc.strerror or exc}); "
                         f"the record is kept in {kept}") from None
    err_console.print(f"record written to {path}", markup=False, soft_wrap=True)


def _keep_in_temp(record: dict) -> str:
    """Write `record` to a new temporary file, so a result whose destination failed is not lost; its path."""
    import tempfile

    fd, kept = tempfile.mkstemp(prefix="fabriclab-record-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        f.write(_record_json(record))
    return kept


def _record_json(record: dict) -> str:
    import json

    return json.dumps(record, indent=2, allow_nan=False) + "\n"


def _store_path(store: Path | None) -> Path | None:
    """The store this run's record goes to, or None when the store is off (`--store off` or
    FABRICLAB_STORE=off; a store file named `off` is `--store ./off`)."""
    if store is None and os.environ.get("FABRICLAB_STORE", "").strip() == "off":
        return None
    if store is not None and str(store) == "off":
        return None
    from fabriclab.report.store import resolve_store_path

    return resolve_store_path(store)


def check_store(store: Path | None) -> None:
    """Before the work: the results store must be a writable file path, or a ValueError says what to do."""
    path = _store_path(store)
    if path is not None:
        check_output_path(path, "--store" if store is not None else "the results store (FABRICLAB_STORE)")
        from fabriclab.report.store import check_store_file

        check_store_file(path)


def _store_record(record: dict, store: Path | None) -> int | None:
    """Add the record to the results store and return its id; if that fails, keep it in a temporary file
    and say where."""
    path = _store_path(store)
    if path is None:
        return None
    from fabriclab.report import store as results_store

    try:
        return results_store.add_record(record, path)
    except (ValueError, OSError) as exc:
        kept = _keep_in_temp(record)
        err_console.print(f"warning: the record was not added to the results store ({exc}); it is kept in "
                          f"{kept}", style="yellow", markup=False, soft_wrap=True)
        return None


def write_trace_file(path: Path, trace: dict, written: str) -> int:
    """Write a Chrome/Perfetto trace as JSON and say `written` on stderr; a failed write is one error line
    and EXIT_FAILED (the run's record is still written by the caller)."""
    import json

    try:
        path.write_text(json.dumps(trace) + "\n")
    except OSError as exc:
        print_error(f"cannot write the trace to {path}: {exc.strerror or exc}")
        return EXIT_FAILED
    print(written, file=sys.stderr)
    return 0


def check_output_path(path: Path | None, option: str = "--json") -> None:
    """Before the work: `path` (a file to write) must be writable, or a ValueError says what to change."""
    if path is None or path == STDOUT:
        return
    if path.exists() and path.is_dir():
        raise ValueError(f"{option} {path}: that is a directory; give a file path")
    parent = _existing_parent(path)
    if not parent.is_dir():
        raise ValueError(f"{option} {path}: {parent} is a file, not a directory")
    if path.exists() and not os.access(path, os.W_OK) or not path.exists() and not os.access(parent, os.W_OK):
        raise ValueError(f"{option} {path}: not writable here; give a path in a writable directory")
    if _in_system_tree(path) and path != Path("/dev/null"):
        raise ValueError(f"{option} {path}: not a regular file location; give a path in a writable directory")


def check_output_file(path: Path | None, option: str = "--out") -> None:
    """Before the work: `path`, a file the command writes itself (a cluster file), is writable in a folder
    that exists (a record's folders are created; a cluster file's missing folder was a traceback after the
    work), or a ValueError says what to change."""
    check_output_path(path, option)
    if path is not None and path != STDOUT and not path.parent.is_dir():
        raise ValueError(f"{option} {path}: the folder {path.parent} does not exist; create it first or give a "
                         f"path in an existing folder")


def check_trace_prefix(prefix: Path | None, option: str = "--out") -> None:
    """Before the work: the files a Chakra prefix names (PREFIX.0.et, PREFIX.comm_groups.json) can be
    written, or a ValueError says what to change (a folder of that name was found only after minutes of
    work)."""
    if prefix is None:
        return
    if prefix.name in ("", ".", ".."):  # `--chakra ''` is Path('.'): it wrote .0.et, .1.et, ... here, hidden
        raise ValueError(f"{option} {'' if str(prefix) == '.' else str(prefix)!r}: give a file prefix such as "
                         f"traces/step (the files are PREFIX.<rank>.et), not an empty path or a folder")
    from fabriclab.workload.chakra import comm_groups_path

    check_output_dir(prefix.parent, option)
    check_output_path(Path(f"{prefix}.0.et"), option)
    check_output_path(comm_groups_path(prefix), option)


def check_output_dir(path: Path | None, option: str = "--out") -> None:
    """Before the work: `path` (a folder to create or fill) must be usable, or a ValueError says why."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option} {path}: that is a file; give a directory (it is created if missing)")
    parent = _existing_parent(path)
    if not parent.is_dir():
        raise ValueError(f"{option} {path}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"{option} {path}: {parent} is not writable; give a writable directory")
    if _in_system_tree(path):
        raise ValueError(f"{option} {path}: not a place for files; give a writable directory")


def _in_system_tree(path: Path) -> bool:
    """Whether `path` resolves into /proc, /sys or /dev: root passes the access checks there, but what is
    written is not kept as a file."""
    return str(path.resolve()).startswith(("/proc/", "/sys/", "/dev/"))


def _existing_parent(path: Path) -> Path:
    parent = path if path.is_dir() else path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent


class Output:
    """Where a command's tables, notes and record go, for one run (see the module docstring)."""

    def __init__(self, fmt: str | None = None, json_path: Path | None = None, store: Path | None = None):
        self.fmt = check_format(fmt) if fmt is not None else ("table" if sys.stdout.isatty() else "plain")
        self.json_path = json_path
        self.store = store
        self.machine_stdout = self.fmt in ("csv", "json") or json_path == STDOUT
        self.saved: dict = {}  # the record's `id` and `store` once it is in the store
        check_output_path(json_path)
        check_store(store)

    def table(self, table: Table) -> None:
        """Render a table on stdout (stderr when `--json -` owns stdout and the format is human)."""
        human_to_stderr = self.json_path == STDOUT
        file = sys.stderr if human_to_stderr else sys.stdout
        render(table, self.fmt, file, width=terminal_width(file))
        file.flush()

    def note(self, text: str) -> None:
        """A human line: stdout for table/plain/markdown output, stderr when stdout is for programs."""
        file = sys.stderr if self.machine_stdout else sys.stdout
        file.write(wrap_for_terminal(text.rstrip("\n"), file) + "\n")
        file.flush()

    def record(self, kind: str, config: dict, results: Any, top: dict | None = None) -> dict | None:
        """Write the record to `--json` (if given) and the results store; returns the record. `top`:
        headline numbers also at the record's top level."""
        return save_record(self.json_path, kind, config, results, self.store, top, where=self.saved)


def wrap_for_terminal(text: str, file) -> str:
    """`text` with each line wrapped at the terminal's width when `file` is a terminal, at PIPE_WIDTH in a
    pipe (continuations indented two spaces). Words are never split, so no number or name is cut."""
    try:
        tty = file.isatty()
    except (AttributeError, ValueError):
        tty = False
    width = terminal_width(file) if tty else PIPE_WIDTH
    if not width:
        return text
    import textwrap

    return "\n".join(line if len(line) <= width else textwrap.fill(
        line, width=width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
        for line in text.split("\n"))


def terminal_width(file) -> int | None:
    """The width rich should use: the terminal's (COLUMNS wins), or None for a pipe (then unused)."""
    if "COLUMNS" in os.environ:
        try:
            return max(int(os.environ["COLUMNS"]), 20)
        except ValueError:
            return 80
    if file.isatty():
        return os.get_terminal_size(file.fileno()).columns
    return 80


def split_list(text: str, what: str) -> list[str]:
    """Items of a comma-separated option value, stripped; empty items are an error."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise ValueError(f"invalid {what} {text!r}: expected a comma-separated list without empty items")
    return items
