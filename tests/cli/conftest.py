"""Fixtures of the CLI tests.

`emu_app` is a typer app with only the `emu` group registered, as `cli/main.py` registers it (the root
probe `emu_root` is in tests/conftest.py). The CLI tests of `report` and `results` reuse the helpers of
the report tests (`sample_records`, `store_samples`): their folder is put on the import path, as pytest
does for the tests in it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import typer

from fabriclab.cli import emu as emu_cli

REPORT_TESTS = str(Path(__file__).resolve().parent.parent / "report")
if REPORT_TESTS not in sys.path:
    sys.path.insert(0, REPORT_TESTS)


def group_app(module) -> typer.Typer:
    """A typer app with only `module`'s command group registered, as `cli/main.py` registers it."""
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """fabriclab (test app)."""

    module.register(app)
    return app


@pytest.fixture(scope="session")
def make_group_app():
    """`group_app`, for tests that build their app once per module."""
    return group_app


@pytest.fixture
def emu_app() -> typer.Typer:
    """A typer app with only the `emu` group registered."""
    return group_app(emu_cli)
