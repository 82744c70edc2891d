"""The `fabriclab` command: one typer app whose command groups load only when they are used.

`fabriclab --help` lists every command from the table below without importing any of them, so it starts
in a fraction of a second; `fabriclab simulate ...` imports the simulate module only (and never torch:
torch is imported inside the commands that run it). `fabriclab run` runs the main job on a built-in
default, the short collectives benchmark (ring, butterfly and the native all-reduce on 4 local ranks,
sizes 1KB:16MB), the same code as `fabriclab collectives bench` with its defaults.

Try it: `fabriclab --help`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

import typer

try:  # typer >= 0.25 carries its own copy of click; older typers use click itself
    from typer import _click as click
    from typer._click import exceptions as click_errors
    from typer.exceptions import Abort
except ImportError:  # pragma: no cover
    import click
    from click import exceptions as click_errors
    from click.exceptions import Abort
from typer.core import TyperCommand, TyperGroup, TyperOption

import fabriclab
from fabriclab.cli.common import print_error, user_errors

_type_of = TyperOption.display_type_rich


def _flag_type(self: TyperOption, ctx: click.Context) -> str | None:
    """The value type help shows beside an option; none beside a flag (`--baseline`, not `<bool>`)."""
    return None if self.is_flag else _type_of(self, ctx)


TyperOption.display_type_rich = _flag_type

# name -> (module, one-line help); the module's `register(app)` adds the command or group `name`.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("fabriclab.cli.main", "The main job on a built-in default: the short collectives benchmark on 4 "
                                  "local ranks."),
    "collectives": ("fabriclab.cli.collectives.commands", "Collective algorithms as schedules: list, show, verify and "
                                                 "benchmark them."),
    "simulate": ("fabriclab.cli.simulate", "Simulate collectives on modelled fabrics (flow-level, max-min "
                                           "sharing)."),
    "whatif": ("fabriclab.cli.whatif", "What-if: scaling factor from a profile, a fusion policy and a "
                                       "collective cost."),
    "chakra": ("fabriclab.cli.chakra", "Chakra execution traces (ASTRA-sim's .et files): show, run on a cluster."),
    "plan": ("fabriclab.cli.plan", "How much network to buy: scaling, throughput and cost of fabrics and "
                                   "topologies for a model."),
    "calibrate": ("fabriclab.cli.calibrate", "Fit a cluster model to real measurements (nccl-tests "
                                             "output)."),
    "validate": ("fabriclab.cli.validate", "Predictions against measurements: the emulated cluster, and the "
                                           "papers' published numbers."),
    "models": ("fabriclab.cli.models", "List the model zoo: parameters, MB (fp32) and forward GFLOPs per "
                                       "sample; or one model's layers."),
    "profile": ("fabriclab.cli.profile", "Profile a zoo model on this machine (per-layer and gradient-ready "
                                         "times)."),
    "train": ("fabriclab.cli.train", "Train a model data-parallel and report throughput, scaling and "
                                     "communication, tf_cnn_benchmarks style."),
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


def load_command(name: str) -> click.Command:
    """Import the module behind `name` and return its click command (a group for command groups)."""
    if name == "run":
        return typer.main.get_command(_run_app)
    module = importlib.import_module(COMMANDS[name][0])
    holder = typer.Typer(add_completion=False)
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

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, current_spellings(args))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if _available(name)]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS or not _available(name):
            return None
        if self._listing:  # the top-level help needs only the name and the line of help
            return TyperCommand(name, help=COMMANDS[name][1], short_help=COMMANDS[name][1])
        return load_command(name)

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """Run; click's usage errors (unknown option, `--np abc`) become one `error:` line, exit 2."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except getattr(click_errors, "NoArgsIsHelpError", ()) as exc:
            exc.show()  # a group called without a command: its help, exit 2 as click does
            sys.exit(exc.exit_code)
        except click_errors.UsageError as exc:
            where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
            print_error(exc.format_message().replace("\n", " ") + where)
            sys.exit(exc.exit_code)
        except click_errors.ClickException as exc:
            print_error(exc.format_message().replace("\n", " "))
            sys.exit(exc.exit_code)
        except Abort:
            print_error("interrupted")
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    cls=LazyGroup,
    help="Run, simulate and compare collectives and data-parallel training on network fabrics.",
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
    """Run, simulate and compare collectives and data-parallel training on network fabrics."""


_run_app = typer.Typer(add_completion=False)


@_run_app.command("run")
@user_errors
def run() -> None:
    """The main job on a built-in default: the short collectives benchmark on 4 local ranks."""
    from fabriclab.cli.collectives import bench as collectives_bench

    raise typer.Exit(collectives_bench.run_default())


def register(holder: typer.Typer) -> None:
    """Add `run` to `holder` (COMMANDS lists this module for it)."""
    holder.command("run")(run)


if __name__ == "__main__":
    app(prog_name="fabriclab")
