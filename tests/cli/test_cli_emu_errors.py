"""`fabriclab emu` without root: bad options and a machine without root or iproute2 give one error line."""

from __future__ import annotations

from typer.testing import CliRunner

from fabriclab.emu import netns


def assert_one_line_error(result, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_cli_without_root_or_iproute2_prints_one_line(emu_app, monkeypatch):
    runner = CliRunner()
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    for args in (["emu", "down"], ["emu", "status"], ["emu", "run", "--", "true"],
                 ["emu", "up", "--topology", "star", "--hosts", "2"]):
        assert_one_line_error(runner.invoke(emu_app, args), "needs root")
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.shutil, "which", lambda tool: None)
    assert_one_line_error(runner.invoke(emu_app, ["emu", "down"]), "install iproute2")


def test_cli_rejects_bad_options(emu_app):
    runner = CliRunner()
    assert_one_line_error(runner.invoke(emu_app, ["emu", "up", "--preset", "25gbe", "--link", "1Gbps"]),
                          "drop --link")
    assert_one_line_error(runner.invoke(emu_app, ["emu", "up", "--scale", "1/10"]), "--dilation")
    assert_one_line_error(runner.invoke(emu_app, ["emu", "up", "--dilation", "0.5"]), "D >= 1")
    assert_one_line_error(runner.invoke(emu_app, ["emu", "up", "--preset", "10gbe"]), "100g-opa")
