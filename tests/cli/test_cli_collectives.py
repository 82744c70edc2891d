"""Tests of `fabriclab collectives list|show|verify`: exit codes, output, and one-line input errors."""

import dataclasses
import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from fabriclab.cli.common import user_errors
from fabriclab.cli.main import app
from fabriclab.collectives import registry
from fabriclab.units import parse_size

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def plain(*args: str):
    """Run a command that prints a table, as fixed-width plain text: no terminal width matters."""
    return invoke(*args, "--format", "plain")


def assert_one_line_error(result, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert fragment in lines[0]
    assert "Traceback" not in result.output


def test_verify_passes_on_good_schedules():
    result = plain("collectives", "verify", "--algo", "ring,chain:chunks=3", "--ranks", "1-7",
                    "--collective", "allreduce,reduce", "--counts", "0,1,7,1001")
    assert result.exit_code == 0, result.output
    assert "allreduce" in result.stdout and "chain:chunks=3" in result.stdout
    assert "failed" not in result.stdout
    # allreduce: 2 specs x 7 rank counts x 4 counts; reduce also checks root n-1 (one root for n=1).
    assert f"all {2 * 7 * 4 + 2 * (4 + 6 * 8)} schedules verified" in result.stdout


def test_verify_all_algorithms_at_small_rank_counts():
    result = plain("collectives", "verify", "--algo", "all", "--ranks", "1-5,8", "--counts", "0,5,13")
    assert result.exit_code == 0, result.output
    for collective in registry.COLLECTIVE_NAMES:
        assert collective in result.stdout


def test_verify_bare_name_and_alias_expand_to_their_verify_specs():
    result = plain("collectives", "verify", "--algo", "rhd", "--ranks", "4", "--collective", "allreduce")
    assert result.exit_code == 0, result.output
    assert "butterfly:order=near" in result.stdout and "butterfly:order=far" in result.stdout


def test_verify_writes_a_record(tmp_path):
    path = tmp_path / "verify.json"
    result = invoke("collectives", "verify", "--algo", "ring", "--ranks", "2-3", "--collective",
                    "allgather", "--counts", "5", "--json", str(path))
    assert result.exit_code == 0, result.output
    record = json.loads(path.read_text())
    assert record["kind"] == "collectives.verify"
    assert record["config"]["ranks"] == [2, 3]
    assert record["results"]["num_checked"] == 2 and record["results"]["num_failed"] == 0
    assert record["results"]["rows"][0]["algorithm"] == "ring"


def test_verify_exits_1_and_shows_the_failure_of_a_broken_schedule(monkeypatch, tmp_path):
    real = registry.build_schedule

    def broken(collective, algo, num_ranks, count, root=0):
        s = real(collective, algo, num_ranks, count, root)
        if num_ranks < 3 or count < num_ranks:
            return s
        steps = list(s.steps)
        steps[-1] = steps[-1][:-1]  # the last rank skips its last step
        return dataclasses.replace(s, steps=tuple(steps))

    monkeypatch.setattr(registry, "build_schedule", broken)
    path = tmp_path / "verify.json"
    result = plain("collectives", "verify", "--algo", "ring", "--ranks", "2-4", "--collective",
                   "allreduce", "--counts", "1,8", "--json", str(path))
    assert result.exit_code == 1, result.output
    assert "2/6 failed" in result.stdout
    assert "2 of 6 schedules failed" in result.stdout
    assert "allreduce ring ranks=3 count=8 root=0:" in result.stdout
    record = json.loads(path.read_text())
    assert record["results"]["num_failed"] == 2
    assert record["results"]["failures"][0]["errors"]


def test_verify_reports_a_crashing_builder_as_a_failure(monkeypatch):
    def crash(*args, **kwargs):
        raise IndexError("oops")

    monkeypatch.setattr(registry, "build_schedule", crash)
    result = plain("collectives", "verify", "--ranks", "2", "--collective", "allgather", "--counts", "3")
    assert result.exit_code == 1, result.output
    assert "build crashed: IndexError: oops" in result.stdout


def test_show_prints_steps_per_rank():
    result = plain("collectives", "show", "--algo", "ring", "--ranks", "4")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("allreduce ring: 4 ranks, count 8, root 0, 4 chunks, 6 steps, 24 messages")
    assert "step 0\n  r0: send chunk 3 [6:8] -> r1; recv+reduce chunk 2 [4:6] <- r3\n" in out
    assert "recv+copy chunk" in out and "step 5\n" in out and "step 6\n" not in out
    assert out.rstrip().endswith("verify: ok (6 steps, 24 messages)")


def test_show_rooted_collective_with_count_and_trace():
    result = invoke("collectives", "show", "--algo", "binomial", "--ranks", "5", "--collective",
                    "broadcast", "--root", "3", "--count", "3", "--trace")
    assert result.exit_code == 0, result.output
    assert "broadcast binomial:chunks=1: 5 ranks, count 3, root 3" in result.stdout
    assert "r3: send chunk 0 [0:3] -> r" in result.stdout
    assert "rank 0 after step 0: [0:3]={3}" in result.stdout


def test_show_save_then_load_round_trips(tmp_path):
    path = tmp_path / "ring4.json"
    saved = invoke("collectives", "show", "--algo", "ring", "--ranks", "4", "--save", str(path))
    assert saved.exit_code == 0, saved.output
    loaded = invoke("collectives", "show", "--load", str(path))
    assert loaded.exit_code == 0, loaded.output
    assert loaded.stdout == saved.stdout


def test_show_load_of_a_tampered_schedule_fails_verification(tmp_path):
    path = tmp_path / "ring4.json"
    assert invoke("collectives", "show", "--algo", "ring", "--ranks", "4", "--save", str(path)).exit_code == 0
    data = json.loads(path.read_text())
    op = next(op for step in data["steps"][0] for op in step if op[0] == "recv_reduce")
    op[0] = "recv_copy"  # rank 0 overwrites instead of reducing: its contribution is lost
    path.write_text(json.dumps(data))
    result = invoke("collectives", "show", "--load", str(path))
    assert result.exit_code == 1, result.output
    assert "verify: FAILED" in result.stdout
    assert "rank" in result.stdout.split("verify: FAILED")[1]


def test_list_describes_every_collective():
    result = plain("collectives", "list")
    assert result.exit_code == 0, result.output
    for collective in registry.COLLECTIVE_NAMES:
        assert collective in result.stdout
    assert "ring" in result.stdout and "chunks" in result.stdout


@pytest.mark.parametrize("args, fragment", [
    (["collectives", "verify", "--algo", "nope"], "unknown algorithm 'nope'"),
    (["collectives", "verify", "--ranks", "0"], "invalid rank count '0': values start at 1"),
    (["collectives", "verify", "--ranks", "abc"], "invalid rank count 'abc'"),
    (["collectives", "verify", "--collective", "allreduce,foo"], "unknown collective 'foo'"),
    (["collectives", "verify", "--counts", "4KB"], "invalid element count '4KB'"),
    (["collectives", "verify", "--algo", "chain:chunks=x", "--collective", "allreduce"],
     "chunks=x is not a whole number"),
    (["collectives", "show", "--algo", "nope", "--ranks", "4"], "unknown allreduce algorithm 'nope'"),
    (["collectives", "show", "--algo", "ring", "--ranks", "0"], "values start at 1"),
    (["collectives", "show", "--algo", "ring", "--ranks", "2-4"], "show takes one"),
    (["collectives", "show", "--algo", "ring"], "give --algo and --ranks"),
    (["collectives", "show", "--algo", "binomial", "--ranks", "4", "--collective", "reduce", "--root",
      "4"], "root 4 is out of range"),
    (["collectives", "show", "--load", "/nonexistent/s.json"], "cannot read schedule file"),
    (["collectives", "show", "--load", "x.json", "--algo", "ring"], "drop --algo"),
])
def test_bad_input_is_one_error_line_and_exit_2(args, fragment):
    assert_one_line_error(invoke(*args), fragment)


def test_show_load_of_a_file_that_is_not_a_schedule(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    assert_one_line_error(invoke("collectives", "show", "--load", str(path)), "is not valid JSON")
    path.write_text(json.dumps({"schema": 1, "collective": "allreduce"}))
    assert_one_line_error(invoke("collectives", "show", "--load", str(path)), "not a fabriclab schedule")


def test_a_bad_size_unit_is_one_error_line():
    sized = typer.Typer()

    @sized.command()
    @user_errors
    def bench(size: str = "1KB") -> None:
        typer.echo(parse_size(size))

    assert runner.invoke(sized, ["--size", "64KB"]).stdout == "65536\n"
    assert_one_line_error(runner.invoke(sized, ["--size", "64XB"]), "invalid size '64XB'")


def test_typer_usage_errors_also_exit_2():
    assert invoke("collectives", "verify", "--no-such-option").exit_code == 2
    assert invoke("collectives", "show", "--count", "many").exit_code == 2


def test_help_and_version():
    result = invoke("--help")
    assert result.exit_code == 0 and "collectives" in result.stdout and "run" in result.stdout
    assert invoke("--version").stdout.startswith("fabriclab 0.1.0")


def test_console_script_error_has_no_traceback():
    done = subprocess.run([sys.executable, "-m", "fabriclab.cli.main", "collectives", "verify", "--ranks",
                           "abc"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "error: invalid rank count 'abc': expected one number, a range or a comma list: "
        "3, 1-64, 1,2,4,8, 1-4,16"]


def test_list_show_verify_and_the_help_of_the_run_commands_load_no_torch():
    code = """
import sys
from typer.testing import CliRunner
from fabriclab.cli.main import app
runner = CliRunner()
for args in (["collectives", "list"], ["collectives", "show", "--algo", "ring", "--ranks", "3"],
             ["collectives", "verify", "--ranks", "2-3", "--algo", "ring"], ["collectives", "bench", "--help"],
             ["train", "--help"], ["profile", "--help"], ["data", "make", "--help"], ["stencil", "run", "--help"],
             ["stencil", "simulate", "--ranks", "8", "--cells", "8"], ["collectives", "bench", "--np", "0"],
             ["train", "--steps", "0"]):
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 2), (args, result.output)
    assert "torch" not in sys.modules, args
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_json_dash_puts_the_record_alone_on_stdout():
    result = invoke("collectives", "verify", "--ranks", "2", "--algo", "ring", "--collective", "allgather",
                    "--json", "-")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["kind"] == "collectives.verify" and record["results"]["num_checked"] == 4
    assert "all 4 schedules verified" in result.stderr and "allgather" in result.stderr


def test_show_as_csv_is_a_table_of_every_op():
    result = invoke("collectives", "show", "--algo", "ring", "--ranks", "3", "--format", "csv")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "rank,step,op,chunk,start,stop,peer"
    assert len(lines) - 1 == 3 * 2 * 2 * 2  # 3 ranks x 4 steps x (send + receive)
    assert "verify: ok" in result.stderr
