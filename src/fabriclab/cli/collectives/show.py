"""`fabriclab collectives show`: one schedule step by step, verified; saved to or loaded from JSON.

`show` prints the per-rank operations of one schedule (as a table of ops with `--format csv|json|markdown`),
verifies it with the symbolic verifier (exit 1 when it fails), and can save it as JSON (`--save`) or show and
verify a saved one (`--load`).

Try it: `fabriclab collectives show --algo ring --ranks 4`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

import fabriclab.collectives.verify as verifier
from fabriclab.bench.schedule_limits import MAX_COUNT, MAX_SCHEDULE_RANKS, schedule_work
from fabriclab.cli.common import (EXIT_FAILED, FormatOption, Output, check_output_path, err_console,
                                  print_error, user_errors)
from fabriclab.collectives import registry
from fabriclab.collectives.schedule import RECV_COPY, RECV_REDUCE, SEND, Op, Schedule
from fabriclab.units import parse_rank_range

OP_LABELS = {SEND: "send", RECV_REDUCE: "recv+reduce", RECV_COPY: "recv+copy"}


def register(app: typer.Typer) -> None:
    """Add `show` to the `collectives` sub-app."""
    app.command("show")(show)


@user_errors
def show(
    algo: Annotated[Optional[str], typer.Option(help="Algorithm spec, e.g. ring or chain:chunks=4.")] = None,
    ranks: Annotated[Optional[str], typer.Option(help="Number of ranks, e.g. 4.")] = None,
    collective: Annotated[Optional[str], typer.Option(help="Collective.", show_default="allreduce")] = None,
    count: Annotated[Optional[int], typer.Option(help="Elements in the buffer.",
                                                 show_default="2 x ranks")] = None,
    root: Annotated[Optional[int], typer.Option(help="Root of reduce/broadcast.", show_default="0")] = None,
    save: Annotated[Optional[Path], typer.Option(metavar="PATH", help="Save the schedule as JSON.")] = None,
    load: Annotated[Optional[Path], typer.Option(metavar="PATH", help="Show a saved schedule.")] = None,
    trace: Annotated[bool, typer.Option(help="Also print what each rank holds after each step.")] = False,
    fmt: FormatOption = None,
) -> None:
    """Print one schedule step by step (per rank: send / recv+reduce / recv+copy) and verify it.

    With --format csv, json or markdown the schedule is printed as a table of its operations."""
    out = Output(fmt)
    check_output_path(save, "--save")
    if load is not None:
        if any(x is not None for x in (algo, ranks, collective, count, root)):
            raise ValueError("--load shows the schedule saved in the file; drop --algo, --ranks, "
                             "--collective, --count and --root")
        schedule = load_schedule(load)
    elif algo is None or ranks is None:
        raise ValueError("give --algo and --ranks (e.g. --algo ring --ranks 4), or --load PATH")
    else:
        num_ranks = parse_rank_range(ranks, maximum=MAX_SCHEDULE_RANKS)
        if len(num_ranks) != 1:
            raise ValueError(f"--ranks {ranks!r} names {len(num_ranks)} rank counts; show takes one, e.g. 4")
        if count is not None and not 0 <= count <= MAX_COUNT:
            raise ValueError(f"--count {count}: give a number of elements from 0 to {MAX_COUNT}")
        schedule_work(collective or "allreduce", algo.strip(), num_ranks[0])
        schedule = registry.build_schedule(collective or "allreduce", algo.strip(), num_ranks[0],
                                           2 * num_ranks[0] if count is None else count, root or 0)
    if save is not None:
        _save_schedule(schedule, save)
    if out.fmt in ("table", "plain"):
        for line in format_schedule(schedule):
            out.note(line)
    else:
        out.table(ops_table(schedule))
    result = verifier.verify(schedule, trace=trace)
    if trace:
        out.note("\n".join(["trace (what each rank holds after each of its steps):", *result.trace]))
    if result.ok:
        out.note(f"verify: ok ({result.num_steps} steps, {result.num_messages} messages)")
        return
    out.note("verify: FAILED")
    for error in result.errors:
        out.note(f"  {error}")
    raise typer.Exit(EXIT_FAILED)


def _save_schedule(schedule: Schedule, path: Path) -> None:
    """Write the schedule; a write that fails is one error line, and the schedule is still shown."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(schedule.to_json() + "\n")
    except OSError as exc:
        print_error(f"cannot save the schedule to {path}: {exc.strerror or exc}")
        return
    err_console.print(f"schedule saved to {path}", markup=False, soft_wrap=True)


def load_schedule(path: Path) -> Schedule:
    """A schedule read from a JSON file written by `show --save`; ValueError says what is wrong."""
    from fabriclab.textfile import read_text

    try:
        text = read_text(path, "schedule file")
    except OSError as exc:
        raise ValueError(f"cannot read schedule file {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: schedule file is not valid JSON: {exc}") from None
    hint = "give a file saved by `collectives show --save`"
    if not isinstance(data, dict):
        kind = {list: "an array", type(None): "null", str: "a string", bool: "true or false"}.get(type(data),
                                                                                                "a number")
        raise ValueError(f"{path}: not a fabriclab schedule: the file holds {kind}, not a JSON object; {hint}")
    try:
        schedule = Schedule.from_dict(data)
    except (AttributeError, IndexError, TypeError, AssertionError, ValueError) as exc:
        text = str(exc) if str(exc).startswith("not a fabriclab schedule") else f"not a fabriclab schedule ({exc})"
        raise ValueError(f"{path}: {text}; {hint}") from None
    if not 1 <= schedule.num_ranks <= MAX_SCHEDULE_RANKS:
        raise ValueError(f"{path}: the schedule has {schedule.num_ranks} ranks; show takes 1 to "
                         f"{MAX_SCHEDULE_RANKS}")
    return schedule


def ops_table(s: Schedule) -> Table:
    """Every operation of a schedule as a row: rank, step, op, chunk, its element range and the peer."""
    table = Table(title=f"{s.collective} {s.algorithm}: {s.num_ranks} ranks, count {s.count}, root {s.root}",
                  title_justify="left")
    for column in ("rank", "step", "op", "chunk", "start", "stop", "peer"):
        table.add_column(column, justify="left" if column == "op" else "right")
    for r in range(s.num_ranks):
        for k, step in enumerate(s.steps[r]):
            for op in step:
                exists = 0 <= op.chunk < len(s.chunks)
                start, length = s.chunks[op.chunk] if exists else (-1, 0)
                table.add_row(str(r), str(k), OP_LABELS.get(op.kind, op.kind), str(op.chunk), str(start),
                              str(start + length if exists else -1), str(op.peer))
    return table


def format_schedule(s: Schedule) -> list[str]:
    """Readable lines: a header, then per step index the ops of every rank that has that step."""
    lines = [f"{s.collective} {s.algorithm}: {s.num_ranks} ranks, count {s.count}, root {s.root}, "
             f"{len(s.chunks)} chunks, {s.max_steps} steps, {s.num_messages} messages",
             "(step k is each rank's own k-th step; ranks do not synchronise between steps)"]
    for k in range(s.max_steps):
        lines.append(f"step {k}")
        for r in range(s.num_ranks):
            if k < len(s.steps[r]):
                lines.append(f"  r{r}: " + "; ".join(_format_op(s, op) for op in s.steps[r][k]))
    return lines


def _format_op(s: Schedule, op: Op) -> str:
    exists = 0 <= op.chunk < len(s.chunks)
    where = f"[{s.chunks[op.chunk][0]}:{sum(s.chunks[op.chunk])}]" if exists else "[missing]"
    arrow = "->" if op.kind == SEND else "<-"
    return f"{OP_LABELS.get(op.kind, op.kind)} chunk {op.chunk} {where} {arrow} r{op.peer}"
