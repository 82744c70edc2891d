"""Every command of `fabriclab --help`: its `--help` works, and the cheap ones run with their defaults (or
the smallest valid arguments) and exit 0. The click tree of `fabriclab.cli.main.app` is walked, so a new
command must be listed here, in RUNS or in SKIPS with the reason it is not run (root, minutes of work).

Commands run in-process (typer's CliRunner), each with a results store of the test's own.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from fabriclab.cli.main import app

LOGS = Path(__file__).resolve().parents[2] / "examples" / "nccl-tests-a100"

# (command path, arguments) in the order they run ("{tmp}": a temporary folder): later commands read what
# earlier ones wrote (the calibrated cluster, the records in the store).
RUNS: list[tuple[str, list[str]]] = [
    ("simulate collective", []),
    ("simulate collective", ["--topology", "torus", "--hosts", "16", "--size", "1MB", "--format", "json"]),
    ("simulate sweep", ["--hosts", "128", "--methods", "ring", "--out", "{tmp}/sweep"]),
    ("simulate jobs", ["--cluster", "roce-h100", "--job", "allreduce:64:64MiB", "--job", "alltoall:32:16MiB",
                       "--placement", "scattered", "--busy", "0.5", "--seeds", "2"]),
    ("whatif", []),
    ("whatif", ["--cost", "simulated", "--workers", "8", "--bandwidth", "10Gbps"]),
    ("whatif reproduce", ["--out", "{tmp}/whatif"]),
    ("whatif llm", ["--gpus", "16", "--tp", "2", "--pp", "2", "--gbs", "32", "--seq", "2048",
                    "--trace", "{tmp}/llm.trace.json"]),
    ("calibrate step", ["--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--pp", "2", "--gbs", "32",
                        "--seq", "2048", "--step-time", "2.5s", "--out", "{tmp}/h100-step.json"]),
    ("calibrate kernels", ["--out", "{tmp}/h100-kernels.json"]),
    ("cluster show", ["dgx-h100", "--nic-rate", "800Gbps"]),
    ("cluster list", []),
    ("cluster export", ["dgx-h100", "--out", "{tmp}/dgx-h100.json"]),
    ("models", []),
    ("models", ["resnet50", "--format", "csv"]),
    ("collectives list", []),
    ("collectives verify", ["--algo", "ring,butterfly", "--ranks", "1-6"]),
    ("collectives show", ["--algo", "ring", "--ranks", "4"]),
    ("plan", ["--gpus", "64", "--fabrics", "25gbe", "--bisection", "1"]),
    ("calibrate nccl-tests", [str(LOGS / f"nccl_{n}.log") for n in (2, 4, 8)] + ["--out", "{tmp}/a100.json"]),
    ("simulate collective", ["--cluster", "{tmp}/a100.json", "--gpus", "16", "--sizes", "1MB:4MB",
                             "--format", "nccl-tests"]),
    ("validate published", ["--rows", "zhang-"]),
    ("stencil simulate", ["--ranks", "64", "--fabrics", "25gbe"]),
    ("chakra example", ["--out", "{tmp}/chakra/demo"]),
    ("chakra show", ["{tmp}/chakra/demo"]),
    ("chakra run", ["{tmp}/chakra/demo", "--cluster", "dgx-h100"]),
    ("data make", ["--out", "{tmp}/shards", "--shards", "2", "--images", "4"]),
    ("bench sim", ["--cases", "ring-256"]),
    ("bench whatif", []),
    ("bench llm-step", ["--repeats", "1"]),
    ("bench overhead", ["--model", "googlenet", "--image-size", "32", "--batch-size", "2", "--steps", "2",
                        "--warmup", "1", "--rounds", "1"]),
    ("results list", []),
    ("results export", ["--format", "json"]),
    ("results show", ["1"]),
    ("results diff", ["1", "2"]),
    ("report", ["--out", "{tmp}/report"]),
]
NEEDS_LOGS = {"calibrate nccl-tests", "--cluster"}
SKIPS: dict[str, str] = {
    "run": "starts 4 torch ranks for ~20 s; tests/bench/test_bench_collectives.py runs the benchmark",
    "collectives bench": "starts torch ranks; tests/cli/test_cli_collectives_bench.py runs it",
    "profile": "profiles a zoo model with torch; tests/workload/test_profiler.py covers it",
    "validate nccl-tests": "fits and predicts the whole corpus (~13 s); tests/cli/test_cli_validate_nccl.py runs it",
    "profile kernels": "measures a GPU's kernels; tests/cli/test_cli_kernels.py runs --device cpu --quick",
    "profile add-cost": "times torch vector adds up to 640 MiB; tests/workload/test_profiler.py covers it",
    "train": "trains with torch ranks for minutes; tests/cli/test_cli_train.py covers it",
    "stencil run": "runs torch ranks; tests/runtime/test_stencil_cli.py covers it",
    "stencil scale": "needs root (emulated cluster) and minutes",
    "emu up": "needs root and changes this machine's namespaces; tests/emu/test_emu_cli.py covers it",
    "emu run": "needs root and a cluster that is up; tests/emu/test_emu_cli.py covers it",
    "emu down": "needs root and removes the default state file's cluster; tests/cli/test_cli_emu.py covers it",
    "emu status": "needs root; tests/emu/test_emu_cli.py covers it",
    "validate emulated": "needs root and minutes of measurement; tests/bench/test_validate_root.py covers it",
    "bench train-llm": "trains the transformer beside a plain loop and DTensor for a minute",
    "validate collectives": "needs root and minutes of emulated 2-4 host runs; "
                            "tests/bench/test_validate_collectives_root.py covers it",
    "bench cli": "times 20 fresh processes (~15 s); `fabriclab bench cli` is the benchmark itself",
    "bench cluster": "plans 500 points three times and starts a Dask cluster (~1 min); tests/report/points covers "
                     "the cluster",
    "bench plan": "plans 375 options (~10 s, the benchmark's own budget)",
    "bench plan-llm": "plans llama3-405b on 16,384 GPUs twice, runs its peer and plans deepseek-v3 (~70 s); "
                      "tests/plan/test_plan_llm.py covers the search",
    "bench train": "trains 15 modes with torch ranks for minutes",
    "bench fabrics": "needs root and trains in the emulated cluster for minutes",
    "bench astra-sim": "needs ASTRA-sim's binary (../shared/tools/astra-sim); tests/cli/test_cli_bench_astra.py "
                       "runs it where it is",
    "bench simai": "runs SimAI's ns-3 binary for seconds to minutes; tests/bench/test_simai.py runs it where it is",
}


def _leaves() -> list[str]:
    """Every command path, and every group that runs by itself (invoke_without_command)."""
    root = typer.main.get_command(app)
    context_type = type(root.make_context("fabriclab", ["--help"], resilient_parsing=True))
    paths: list[str] = []

    def walk(cmd, path: list[str], ctx) -> None:
        if not hasattr(cmd, "list_commands"):
            paths.append(" ".join(path))
            return
        if path and getattr(cmd, "invoke_without_command", False):
            paths.append(" ".join(path))
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            assert sub is not None, f"{' '.join(path + [name])} is listed but does not load"
            walk(sub, path + [name], context_type(sub, parent=ctx, info_name=name))

    walk(root, [], context_type(root, info_name="fabriclab"))
    return paths


LEAVES = _leaves()


def test_every_command_is_run_or_skipped_with_a_reason():
    run = {path for path, _ in RUNS}
    unknown = [p for p in LEAVES if p not in run and p not in SKIPS]
    assert not unknown, f"classify these commands in RUNS or SKIPS: {unknown}"
    gone = [p for p in [*run, *SKIPS] if p not in LEAVES and p.split()[0] in {q.split()[0] for q in LEAVES}]
    assert not gone, f"these commands are no longer in the CLI: {gone}"


def test_help_of_the_main_command_lists_every_group():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0, result.output
    for group in {p.split()[0] for p in LEAVES}:
        assert group in result.output


@pytest.mark.parametrize("path", LEAVES)
def test_help_works(path):
    result = CliRunner().invoke(app, [*path.split(), "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output and "Traceback" not in result.output


def _raised(result) -> str:
    """The last lines of the traceback of an exception the command raised (CliRunner keeps it apart from the
    output, so a missing module would otherwise show as a bare "exit 1")."""
    if result.exception is None or isinstance(result.exception, SystemExit):
        return ""
    lines = "".join(traceback.format_exception(*result.exc_info)).rstrip().splitlines()
    return "\nraised:\n" + "\n".join(lines[-12:])


def test_a_raised_exception_shows_its_traceback_in_the_failure():
    def fine() -> None:
        raise typer.Exit(2)

    def boom() -> None:
        import no_such_module_for_the_smoke_test  # noqa: F401

    apps = [typer.Typer(), typer.Typer()]
    apps[0].command()(fine)
    apps[1].command()(boom)
    assert _raised(CliRunner().invoke(apps[0], [])) == ""  # an exit is not an exception
    shown = _raised(CliRunner().invoke(apps[1], []))
    assert "ModuleNotFoundError: No module named 'no_such_module_for_the_smoke_test'" in shown
    assert "in boom" in shown


def test_cheap_commands_run_with_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICLAB_STORE", str(tmp_path / "results.db"))
    monkeypatch.chdir(tmp_path)
    failures, times = [], {}
    for path, args in RUNS:
        if path not in LEAVES or (not LOGS.is_dir() and NEEDS_LOGS & {path, *args}):
            continue  # a command still being written, or the shared nccl-tests logs are not here
        argv = [*path.split(), *(a.replace("{tmp}", str(tmp_path)) for a in args)]
        t0 = time.perf_counter()
        result = CliRunner().invoke(app, argv, env={"COLUMNS": "80"})
        times[" ".join(argv)] = time.perf_counter() - t0
        if result.exit_code != 0 or "Traceback" in result.output:
            failures.append(f"{' '.join(argv)}: exit {result.exit_code}\n{result.output[-1500:]}"
                            f"{_raised(result)}")
    assert not failures, "\n\n".join(failures)
    slow = {k: round(v, 1) for k, v in times.items() if v > 15}
    assert not slow, f"too slow for a smoke test: {slow}"
