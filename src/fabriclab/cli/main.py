"""The `fabriclab` command: one typer app whose command groups load only when they are used.

`fabriclab --help` lists every command from the table below without importing any of them, so it starts
in a fraction of a second; `fabriclab simulate ...` imports the simulate module only (and never torch:
torch is imported inside the commands that run it). `fabriclab run` runs the main job on a built-in
default, the short collectives benchmark (ring, butterfly and the native all-reduce on 4 local ranks,
sizes 1KB:16MB, each size repeated until its winner is clear of the noise or a cap is hit), the same code
as `fabriclab collectives bench`, and ends with its conclusion (`report/bench_verdict.py`: per size the
winner and by how much, or "within noise" and the spread), its record and the next commands.

Try it: `fabriclab --help`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup  # typer's documented classes for custom commands and groups

import fabriclab
from fabriclab.cli.common import (FormatOption, JsonOption, Output, StoreOption, command_line, print_error,
                                  user_errors)
from fabriclab.cli.signals import Terminated, sigterm_as_interrupt

# click's error classes, reached through typer's public `BadParameter` (a click `UsageError`) rather than by
# import: typer before 0.26 raises click's own, typer 0.26 and later its private copy of click, and a private
# module may move in any release (`from typer import _click` broke every command once). `Abort` is public.
_CLICK_ERRORS = {cls.__name__: cls for cls in typer.BadParameter.__mro__}
UsageError = _CLICK_ERRORS["UsageError"]
ClickException = _CLICK_ERRORS["ClickException"]
Command = Any  # a click command (click's own or typer's copy): for annotations only

# name -> (module, one-line help); the module's `register(app)` adds the command or group `name`.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("fabriclab.cli.main", "The main job on a built-in default: ring, butterfly and the native "
                                  "all-reduce on 4 local ranks, and which wins where."),
    "collectives": ("fabriclab.cli.collectives.commands", "Collective algorithms as schedules: list, show, verify and "
                                                 "benchmark them."),
    "simulate": ("fabriclab.cli.simulate", "Simulate collectives on modelled fabrics (flow-level, max-min "
                                           "sharing)."),
    "whatif": ("fabriclab.cli.whatif", "What-if: an LLM's training step on a cluster (`whatif llm`), or a CNN's "
                                       "scaling from a profile, a fusion policy and a collective cost."),
    "chakra": ("fabriclab.cli.chakra", "Chakra execution traces (ASTRA-sim's .et files): show, run on a cluster."),
    "plan": ("fabriclab.cli.plan", "How much network to buy: an LLM's layout, tokens/s and cost per cluster "
                                   "(`plan --model llama3-70b`), or a CNN's scaling per fabric and topology."),
    "cluster": ("fabriclab.cli.cluster", "Cluster presets and files: show what a prediction takes from one, or "
                                         "export it as a file to edit."),
    "calibrate": ("fabriclab.cli.calibrate", "Fit a cluster model to real measurements: nccl-tests logs "
                                             "(`calibrate nccl-tests`), a training step (`calibrate step`)."),
    "validate": ("fabriclab.cli.validate", "Predictions against measurements: the emulated cluster, and the "
                                           "papers' published numbers."),
    "models": ("fabriclab.cli.models", "List the model zoo, CNNs and LLMs: parameters, MB (fp32) and forward "
                                       "GFLOPs per sample; or one model's layers."),
    "profile": ("fabriclab.cli.profile", "Profile a zoo model on this machine (per-layer and gradient-ready "
                                         "times)."),
    "train": ("fabriclab.cli.train", "Train for real: a CNN data-parallel (tf_cnn_benchmarks style) or a "
                                     "transformer with TP x PP x DP (x EP); throughput and communication."),
    "data": ("fabriclab.cli.data", "Datasets for `fabriclab train`: synthetic images as TFRecord shards."),
    "stencil": ("fabriclab.cli.stencil", "CFD-like stencil mini-app (Samsi et al.'s CartDG): run, emulated "
                                         "scaling, simulation."),
    "emu": ("fabriclab.cli.emu", "Emulated cluster in this box (root): namespaces as hosts, shaped links, "
                                 "launcher."),
    "bench": ("fabriclab.cli.bench", "Benchmarks: CLI start-up, simulator, what-if and plan speed, trainer "
                                     "modes vs DDP, fabrics."),
    "results": ("fabriclab.cli.results", "The results store: list, show, export and diff the records of "
                                         "past runs."),
    "report": ("fabriclab.cli.report", "Write one self-contained HTML report from the records in the "
                                       "results store."),
}


def _available(name: str) -> bool:
    """Whether the module behind `name` is installed (commands still being written are left out)."""
    module = COMMANDS[name][0]
    return module == __name__ or importlib.util.find_spec(module) is not None


def load_command(name: str) -> Command:
    """Import the module behind `name` and return its click command (a group for command groups)."""
    if name == "run":
        return typer.main.get_command(_run_app)
    module = importlib.import_module(COMMANDS[name][0])
    # Plain help, as the top level's: typer's rich help shows `<bool>` beside a flag in some versions, and the
    # holder's markup mode is the one every command below it is built with.
    holder = typer.Typer(add_completion=False, rich_markup_mode=None)
    holder.callback()(lambda: None)  # a callback keeps the holder a group even with one command
    module.register(holder)
    group = typer.main.get_command(holder)
    command = group.commands.get(name)
    assert command is not None, f"{module.__name__}.register did not add {name!r}"
    return command


# Old spellings of renamed options, still accepted but no longer shown: the count of GPUs in one server
# had four names before it became `--gpus-per-server` everywhere.
OLD_SPELLINGS = {"--gpus-per-host": "--gpus-per-server", "--gpus-per-node": "--gpus-per-server",
                 "--ranks-per-node": "--gpus-per-server"}


def current_spellings(args: list[str]) -> list[str]:
    """`args` with old option spellings replaced (`--gpus-per-host=2` too); nothing after `--` changes."""
    out = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + list(args[i:])
        name, eq, value = arg.partition("=")
        out.append(OLD_SPELLINGS[name] + eq + value if name in OLD_SPELLINGS else arg)
    return out


class LazyGroup(TyperGroup):
    """A group that lists commands from COMMANDS and imports one only when it is run (or its help shown)."""

    _listing = False

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, current_spellings(args))

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return [name for name in COMMANDS if _available(name)]

    def get_command(self, ctx: typer.Context, name: str) -> Command | None:
        if name not in COMMANDS or not _available(name):
            return None
        if self._listing:  # the top-level help needs only the name and the line of help
            return TyperCommand(name, help=COMMANDS[name][1], short_help=COMMANDS[name][1])
        return load_command(name)

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """Run; click's usage errors (unknown option, `--np abc`) become one `error:` line, exit 2."""
        argv = kwargs.get("args", args[0] if args else None)
        argv = sys.argv[1:] if argv is None else list(argv)
        if not standalone_mode:
            with command_line(argv):
                return super().main(*args, standalone_mode=False, **kwargs)
        try:
            with sigterm_as_interrupt(), command_line(argv):
                code = super().main(*args, standalone_mode=False, **kwargs)
        except UsageError as exc:
            # click >= 8.2: a group called without a command raises a usage error whose message is the
            # group's help (told by the public `get_help`, not by the class's name, which other versions lack)
            if exc.ctx is not None and exc.format_message() == exc.ctx.get_help():
                exc.show()  # its help, exit 2 as click does
                sys.exit(exc.exit_code)
            where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
            print_error(exc.format_message().replace("\n", " ") + where)
            sys.exit(exc.exit_code)
        except ClickException as exc:
            print_error(exc.format_message().replace("\n", " "))
            sys.exit(exc.exit_code)
        except typer.Abort:
            print_error("interrupted")
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: typer.Context) -> Any:
        """Run the command; Ctrl-C and SIGTERM (`cli/signals.py`) end it with one line and exit 130.

        Caught here, not left to typer: typer versions differ (`Aborted!` after a blank line, or nothing)."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            print_error("terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted")
            raise typer.Exit(130) from None

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


# The LLM questions, named where a new user looks first (click keeps `\b` paragraphs unwrapped).
EPILOG = "\b\n" + "\n".join((
    "LLM training, first steps:",
    "  fabriclab models                       the zoo: CNNs and LLMs",
    "  fabriclab whatif llm --model llama3-70b --gpus 1024 --tp 8 --pp 4",
    "                                         one training step on a cluster",
    "  fabriclab plan --model llama3-70b --gpus 1024,4096",
    "                                         which cluster and layout to buy",
    "  fabriclab calibrate step               the compute efficiency, measured",
    "  fabriclab report                       every record on one HTML page"))

app = typer.Typer(
    cls=LazyGroup,
    help="Run, simulate and compare collectives, CNN and LLM training on network fabrics.",
    epilog=EPILOG,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
    add_completion=False,  # shell completion is not offered: `--install-completion` edits the user's rc file
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fabriclab {fabriclab.__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Run, simulate and compare collectives, CNN and LLM training on network fabrics."""


_run_app = typer.Typer(add_completion=False, rich_markup_mode=None)  # plain help, as in load_command


# What a new user runs after the main job.
NEXT = ("fabriclab report (every record on one HTML page)",
        "fabriclab collectives bench --np 4 --sizes 1KB:256MB (a longer sweep, any algorithm)",
        "fabriclab simulate collective --cluster dgx-h100 --gpus 1024 (the collective predicted at scale)",
        "fabriclab whatif llm --model llama3-70b --gpus 1024 --tp 8 --pp 4 (an LLM training step)")


@_run_app.command("run")
@user_errors
def run(fmt: FormatOption = None, json_path: JsonOption = None, store: StoreOption = None) -> None:
    """The main job on a built-in default: ring, butterfly and the native all-reduce on 4 local ranks, then
    which algorithm wins where (or is within noise), the record and the next commands."""
    from fabriclab.cli.collectives import bench as collectives_bench

    out = Output(fmt, json_path, store)
    code = collectives_bench.execute(collectives_bench.DEFAULT_CONFIG, out, conclusion_to_stdout=True)
    saved = out.saved
    out.note(f"record {saved['id']} in {saved['store']} (fabriclab results show {saved['id']})" if saved
             else "record: not stored (--store off)" + (f"; written to {json_path}" if json_path else ""))
    out.note("next: " + "\n      ".join(NEXT))
    raise typer.Exit(code)


def register(holder: typer.Typer) -> None:
    """Add `run` to `holder` (COMMANDS lists this module for it)."""
    holder.command("run")(run)


if __name__ == "__main__":
    app(prog_name="fabriclab")
