"""What every command shares: the one-line error for bad input, the `--json PATH` record option.

A `ValueError` that escapes a command decorated with `@user_errors` is bad user input: it prints one
red line `error: <message>` to stderr and exits with code 2, the code typer uses for its own usage
errors; no traceback. Failed checks exit with 1 (`EXIT_FAILED`).

Try it: `fabriclab collectives verify --ranks 0` (prints one error line, exits 2).
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Optional, TypeVar

import typer
from rich.console import Console

from fabriclab.record import make_record, write_record

EXIT_FAILED = 1
EXIT_USAGE = 2

# Piped or captured output gets a wide console so tables stay readable; COLUMNS still wins.
_WIDTH = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 160
console = Console(highlight=False, width=_WIDTH)
err_console = Console(stderr=True, highlight=False, width=_WIDTH)

JsonOption = Annotated[
    Optional[Path],
    typer.Option("--json", metavar="PATH", dir_okay=False,
                 help="Write a machine-readable record of this run (config, versions, host, results)."),
]

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


def save_record(path: Path | None, kind: str, config: dict, results: Any) -> None:
    """Write the run's record to `path` when `--json PATH` was given, and say where."""
    if path is None:
        return
    write_record(path, make_record(kind, config, results))
    err_console.print(f"record written to {path}", markup=False, soft_wrap=True)


def split_list(text: str, what: str) -> list[str]:
    """Items of a comma-separated option value, stripped; empty items are an error."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise ValueError(f"invalid {what} {text!r}: expected a comma-separated list without empty items")
    return items
