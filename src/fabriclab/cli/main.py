"""The `fabriclab` command: one typer app with a sub-app per command group, and `run`, the main job.

`fabriclab run` runs the main job on a built-in default; for now that is the short collectives
benchmark (ring, butterfly and the native all-reduce on 4 local ranks, sizes 1KB:16MB), the same code
as `fabriclab collectives bench` with its defaults.

Try it: `fabriclab run`.
"""

import typer

import fabriclab
from fabriclab.cli import (bench, collectives, data, emu, models, profile, simulate, stencil, train, validate,
                           whatif)
from fabriclab.cli.common import fail_usage, user_errors

app = typer.Typer(
    help="Run, simulate and compare collectives and data-parallel training on network fabrics.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(collectives.app, name="collectives")
simulate.register(app)
bench.register(app)
whatif.register(app)
models.register(app)
profile.register(app)
emu.register(app)
train.register(app)
data.register(app)
validate.register(app)
stencil.register(app)

try:
    import fabriclab.cli.collectives_bench as collectives_bench
except ModuleNotFoundError as exc:  # written in parallel; only its absence is tolerated, not its errors
    if exc.name != "fabriclab.cli.collectives_bench":
        raise
    collectives_bench = None
else:
    collectives_bench.register(collectives.app)


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


@app.command()
@user_errors
def run() -> None:
    """The main job on a built-in default: the short collectives benchmark on 4 local ranks."""
    if collectives_bench is None:
        raise fail_usage("the collectives benchmark (fabriclab.cli.collectives_bench) is not installed")
    raise typer.Exit(collectives_bench.run_default())


if __name__ == "__main__":
    app(prog_name="fabriclab")
