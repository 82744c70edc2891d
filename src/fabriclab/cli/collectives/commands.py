"""`fabriclab collectives`: list the algorithms and verify them in bulk (`show`: cli/collectives/show.py,
`bench`: cli/collectives/bench.py, both added to this group by `register`).

`verify` builds every schedule asked for (every collective, algorithm spec, rank count, element count
and, for reduce and broadcast, root 0 and the last rank), checks each with the symbolic verifier and
prints one table row per (collective, spec); it exits with 1 when any check fails. Before it builds
anything it checks the size of the job: at most 1024 ranks and 4096 chunks per schedule, and a sweep
estimated (from timings on this machine) to finish within `MAX_VERIFY_S`.

Try it: `fabriclab collectives verify --algo all --ranks 1-64`.
"""

import dataclasses
import sys
import time
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

import fabriclab.collectives.verify as verifier
from fabriclab.bench.schedule_limits import MAX_COUNT, MAX_SCHEDULE_RANKS, VerifyCost
from fabriclab.cli.common import (EXIT_FAILED, FormatOption, JsonOption, Output, StoreOption, err_console,
                                  split_list, user_errors)
from fabriclab.collectives import registry
from fabriclab.collectives.schedule import BROADCAST, REDUCE
from fabriclab.units import format_int_list, parse_int_list, parse_rank_range

app = typer.Typer(help="Collective algorithms as schedules: list, show, verify and benchmark them.",
                  no_args_is_help=True, rich_markup_mode=None)

MAX_FAILURES_SHOWN = 5
MAX_FAILURES_RECORDED = 100
# A verify sweep estimated (`bench.schedule_cost.VerifyCost`) to take longer than this is refused before
# it starts: split it, or verify fewer rank counts or algorithms.
MAX_VERIFY_S = 1800.0
MAX_CASES = 1_000_000
PROGRESS_EVERY_S = 30.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Case:
    """One schedule to build and verify."""

    collective: str
    """Collective name, e.g. `allreduce`."""
    spec: str
    """Algorithm spec, e.g. `chain:chunks=4`."""
    num_ranks: int
    """Number of ranks."""
    count: int
    """Elements in the buffer."""
    root: int
    """Root rank (0 unless the collective is rooted)."""
    user_spec: bool
    """True when the spec came from `--algo` (a build error is then bad input, exit 2)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outcome:
    """What building and verifying one case gave: no errors when it verified; no counts when the
    build failed, else the steps of the longest rank and the number of messages."""

    case: Case
    errors: list[str]
    num_steps: int | None = None
    num_messages: int | None = None


@app.command("list")
@user_errors
def list_algorithms(fmt: FormatOption = None) -> None:
    """Print every collective's algorithms with their parameters (and defaults) and a one-line doc."""
    out = Output(fmt)
    for collective in registry.COLLECTIVE_NAMES:
        table = Table("algorithm", "parameters", "description", title=collective, title_justify="left")
        for name, params, doc in registry.describe(collective):
            table.add_row(name, params or "-", doc)
        out.table(table)


@app.command()
@user_errors
def verify(
    algo: Annotated[str, typer.Option(help="'all' or a comma list of specs, e.g. ring,chain:chunks=8; "
                                           "a bare name checks all its verify parameterisations.")] = "all",
    ranks: Annotated[str, typer.Option(help="Rank counts: 3, 1-64 or 1,2,4,8.")] = "1-16",
    collective: Annotated[str, typer.Option(help="'all' or a comma list, e.g. allreduce,reduce.")] = "all",
    counts: Annotated[str, typer.Option(help="Element counts per buffer: 0,1,7,1001 or 0-9.")] = "0,1,7,1001",
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Build and symbolically verify schedules for many rank counts and buffer sizes."""
    out = Output(fmt, json_path, store)
    collectives = _collectives(collective)
    algos = None if algo.strip() == "all" else split_list(algo, "algorithm list")
    rank_counts = parse_rank_range(ranks, maximum=MAX_SCHEDULE_RANKS)
    element_counts = parse_int_list(counts, minimum=0, what="element count", maximum=MAX_COUNT)
    cases = _cases(collectives, algos, rank_counts, element_counts)
    outcomes = _check_all(cases)
    rows = _summarise(outcomes)
    failures = [{**dataclasses.asdict(o.case), "errors": o.errors} for o in outcomes if o.errors]
    out.table(_verify_table(rows))
    _print_failures(out, failures, len(cases))
    config = {"algo": algo, "collectives": collectives, "ranks": rank_counts, "counts": element_counts}
    results = {"num_checked": len(cases), "num_failed": len(failures), "rows": rows,
               "failures": failures[:MAX_FAILURES_RECORDED]}
    out.record("collectives.verify", config, results)
    if failures:
        raise typer.Exit(EXIT_FAILED)




def _check_all(cases: list[Case]) -> list[Outcome]:
    """Check every case; progress on stderr: a bar on a terminal, else a line every `PROGRESS_EVERY_S`."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    start = last = time.monotonic()
    outcomes = []
    with Progress(*columns, console=err_console, transient=True,
                  disable=not err_console.is_terminal) as progress:
        for i, case in enumerate(progress.track(cases, description="verifying"), 1):
            outcomes.append(_check(case))
            now = time.monotonic()
            if not err_console.is_terminal and now - last >= PROGRESS_EVERY_S:
                last = now
                print(f"verifying: {i:,} of {len(cases):,} schedules ({i / len(cases):.0%}), {now - start:.0f} s",
                      file=sys.stderr, flush=True)
    return outcomes




def _collectives(text: str) -> list[str]:
    if text.strip() == "all":
        return list(registry.COLLECTIVE_NAMES)
    names = split_list(text, "collective list")
    for name in names:
        if name not in registry.COLLECTIVE_NAMES:
            raise ValueError(f"unknown collective {name!r}: expected 'all' or a comma list of "
                             f"{', '.join(registry.COLLECTIVE_NAMES)}")
    return names


def _cases(collectives: list[str], algos: list[str] | None, rank_counts: list[int],
           counts: list[int]) -> list[Case]:
    """Every (collective, spec, ranks, count, root) to check; `algos=None` means all verify specs."""
    known = {c: registry.algorithm_names(c) for c in collectives}
    for spec in algos or []:
        base = _base_name(spec)
        if not any(base in names for names in known.values()):
            choices = sorted({n for names in known.values() for n in names})
            raise ValueError(f"unknown algorithm {base!r} for {', '.join(collectives)}: "
                             f"expected one of {', '.join(choices)}")
    plan = []  # (collective, ranks, roots, specs): checked for size before any case exists
    for c in collectives:
        for n in rank_counts:
            roots = sorted({0, n - 1}) if c in (REDUCE, BROADCAST) else [0]
            if algos is None:
                specs = [(s, False) for s in registry.verify_specs(c, n)]
            else:
                specs = [(s, True) for spec in algos for s in _expand(c, n, spec, known[c])]
            plan.append((c, n, roots, specs))
    num_cases = sum(len(specs) * len(counts) * len(roots) for _, _, roots, specs in plan)
    seconds = _sweep_seconds(plan, counts, VerifyCost(probe=False))
    if seconds > MAX_VERIFY_S:  # the quick upper bound is too high: count the messages of each spec
        seconds = _sweep_seconds(plan, counts, VerifyCost())
    if num_cases > MAX_CASES or seconds > MAX_VERIFY_S:
        length = f"about {seconds / 60:,.0f}" if seconds <= MAX_VERIFY_S else f"more than {MAX_VERIFY_S / 60:.0f}"
        raise ValueError(f"this sweep is {num_cases:,} schedules, {length} min of verification "
                         f"on this machine; the limit is {MAX_CASES:,} schedules and {MAX_VERIFY_S / 60:.0f} "
                         f"min: verify fewer --ranks, --counts, --algo or --collective at a time")
    return [Case(collective=c, spec=s, num_ranks=n, count=k, root=root, user_spec=user)
            for c, n, roots, specs in plan for s, user in specs for k in counts for root in roots]


def _sweep_seconds(plan: list, counts: list[int], cost: VerifyCost) -> float:
    """Estimated seconds of the sweep, up to the first sum past MAX_VERIFY_S (then the sweep is refused, and
    a 1,000-rank sweep is refused in a second instead of after a minute of counting)."""
    total = 0.0
    for c, n, roots, specs in plan:
        for s, user in specs:
            for k in counts:
                total += _seconds(cost, c, s, n, k, user) * len(roots)
                if total > MAX_VERIFY_S:
                    return total
    return total


def _seconds(cost: VerifyCost, collective: str, spec: str, num_ranks: int, count: int, user_spec: bool) -> float:
    """Estimated seconds of a case; a built-in spec that does not parse costs nothing (its build fails)."""
    try:
        return cost.seconds(collective, spec, num_ranks, count)
    except ValueError as exc:
        if user_spec:
            raise ValueError(f"{collective} {spec} (ranks={num_ranks}): {exc}") from None
        return 0.0


def _expand(collective: str, num_ranks: int, spec: str, known: list[str]) -> list[str]:
    """A bare name stands for its verify parameterisations; a spec with parameters for itself."""
    base = _base_name(spec)
    if base not in known:
        return []
    if ":" in registry.ALIASES.get(spec, spec):
        return [spec]
    matches = [s for s in registry.verify_specs(collective, num_ranks) if _base_name(s) == base]
    return matches or [spec]


def _base_name(spec: str) -> str:
    """Algorithm name of a spec, aliases resolved: `rhd` -> `butterfly`, `cb:group=8` -> `hierarchical`."""
    name = spec.split(":")[0].strip()
    return registry.ALIASES.get(name, name).split(":")[0]


def _check(case: Case) -> Outcome:
    """Build and verify one case; a build error of a spec given by the user is bad input (exit 2)."""
    try:
        schedule = registry.build_schedule(case.collective, case.spec, case.num_ranks, case.count,
                                           case.root)
    except ValueError as exc:
        if case.user_spec:
            raise ValueError(f"{case.collective} {case.spec} (ranks={case.num_ranks} count={case.count}"
                             f"): {exc}") from None
        return Outcome(case=case, errors=[f"build failed: {exc}"])
    except Exception as exc:  # a bug in an algorithm: report it as a failed check, keep sweeping
        return Outcome(case=case, errors=[f"build crashed: {type(exc).__name__}: {exc}"])
    try:
        result = verifier.verify(schedule)
    except Exception as exc:  # the verifier tripped over a malformed schedule
        return Outcome(case=case, errors=[f"verify crashed: {type(exc).__name__}: {exc}"])
    return Outcome(case=case, errors=[] if result.ok else list(result.errors),
                   num_steps=result.num_steps, num_messages=result.num_messages)


def _summarise(outcomes: list[Outcome]) -> list[dict]:
    """One row per (collective, spec): ranks and counts checked, step and message ranges, failures."""
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault((o.case.collective, o.case.spec), []).append(o)
    rows = []
    for (collective, spec), group in groups.items():
        built = [o for o in group if o.num_steps is not None]
        rows.append({"collective": collective, "algorithm": spec,
                     "ranks": format_int_list([o.case.num_ranks for o in group]),
                     "counts": sorted({o.case.count for o in group}),
                     "steps": _span([o.num_steps for o in built]),
                     "messages": _span([o.num_messages for o in built]),
                     "num_checked": len(group), "num_failed": sum(bool(o.errors) for o in group)})
    return rows


def _span(values: list[int]) -> str:
    lo, hi = min(values, default=None), max(values, default=None)
    return "-" if lo is None else str(lo) if lo == hi else f"{lo}-{hi}"


def _verify_table(rows: list[dict]) -> Table:
    table = Table(title="collectives verify", title_justify="left")
    for column in ("collective", "algorithm", "ranks", "counts", "steps", "messages", "result"):
        table.add_column(column, overflow="fold", no_wrap=column not in ("algorithm", "ranks"))
    for row in rows:
        failed = row["num_failed"]
        result = (Text(f"{failed}/{row['num_checked']} failed", style="red") if failed
                  else Text(f"ok ({row['num_checked']})", style="green"))
        table.add_row(row["collective"], Text(row["algorithm"]), row["ranks"],
                      ",".join(map(str, row["counts"])), row["steps"], row["messages"], result)
    return table


def _print_failures(out: Output, failures: list[dict], num_cases: int) -> None:
    if not failures:
        out.note(f"all {num_cases} schedules verified")
        return
    out.note(f"{len(failures)} of {num_cases} schedules failed; the first:")
    for f in failures[:MAX_FAILURES_SHOWN]:
        out.note(f"  {f['collective']} {f['spec']} ranks={f['num_ranks']} count={f['count']} root={f['root']}:")
        for error in f["errors"][:3]:
            out.note(f"    {error}")


# Whether `show` and `bench` (their own modules) are on `app` yet: remembered here rather than read back from
# typer's undocumented `registered_commands`.
_LATE_COMMANDS_ADDED: list[bool] = []


def register(main_app: typer.Typer) -> None:
    """Add the `collectives` group (list, verify, `show` and `bench`) to `main_app`."""
    from fabriclab.cli.collectives import bench as collectives_bench
    from fabriclab.cli.collectives import show as collectives_show

    if not _LATE_COMMANDS_ADDED:  # `register` runs once per process that builds the app, or again in tests
        collectives_show.register(app)
        collectives_bench.register(app)
        _LATE_COMMANDS_ADDED.append(True)
    main_app.add_typer(app, name="collectives")
