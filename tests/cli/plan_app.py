"""The `plan` command in a test app of its own, and the one way its tests invoke it (80 columns, no store).

Imported by the plan CLI tests (pytest puts this folder on the import path for the tests in it)."""

import typer
from typer.testing import CliRunner

from fabriclab.cli import plan as plan_cli

runner = CliRunner()
app = typer.Typer()


@app.callback()
def _main() -> None:
    """Test app holding the plan command (the lead registers it in main.py)."""


plan_cli.register(app)


def invoke(*args: str, target_app=app):
    return runner.invoke(target_app, list(args), env={"COLUMNS": "80", "FABRICLAB_STORE": "off"})
