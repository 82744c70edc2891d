"""`--scheduler`, `--processes`, `--resume` on the command line: the same output wherever the points run,
progress on stderr, finished points resumed from the store, one-line errors (report/points)."""

import pytest
import typer
from typer.testing import CliRunner

from fabriclab.cli import plan as plan_cli
from fabriclab.cli import whatif as whatif_cli

runner = CliRunner()
app = typer.Typer()


@app.callback()
def _main() -> None:
    """Test app holding the plan command."""


plan_cli.register(app)
whatif_cli.register(app)
SMALL = ("plan", "--gpus", "16,64,128", "--fabrics", "25gbe,100gbe", "--bisection", "1,1/4")
LLM = ("plan", "--model", "llama3-8b", "--gpus", "64,128", "--clusters", "dgx-h100", "--nic-rates", "400Gbps,800Gbps")


def invoke(*args: str, **env: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "80", **env})


def answer(result) -> str:
    """stdout without the line that times the run."""
    assert result.exit_code == 0, result.output
    return "\n".join(line for line in result.stdout.splitlines() if not line.endswith(" s"))


def test_local_processes_and_resume_give_the_same_output(tmp_path):
    store = str(tmp_path / "r.db")
    here = invoke(*SMALL, "--store", store)
    pool = invoke(*SMALL, "--store", store, "--processes", "2")
    resumed = invoke(*SMALL, "--store", store, "--resume")
    assert answer(here) == answer(pool) == answer(resumed)
    assert "plan points: 6 / 6 in" in pool.stderr and "[2 local processes]" in pool.stderr
    assert "(6 from the store, 0 run now)" in resumed.stderr


def test_an_llm_plan_runs_its_points_on_local_processes(tmp_path):
    store = str(tmp_path / "l.db")
    here, pool = invoke(*LLM, "--store", store), invoke(*LLM, "--store", store, "--processes", "2")
    assert answer(here) == answer(pool)
    assert "plan points: 4 / 4 in" in pool.stderr


@pytest.mark.parametrize("extra", [("--bandwidth", "1,25Gbps", "--compression", "1,5"),
                                   ("--cluster", "dgx-a100")])  # a cluster: every row with its range
def test_a_whatif_sweep_runs_its_points_on_local_processes(tmp_path, extra):
    args = ("whatif", "--workers", "16,32", *extra, "--store", str(tmp_path / "w.db"))
    here, pool = invoke(*args), invoke(*args, "--processes", "2")
    assert answer(here) == answer(pool) and "[2 local processes]" in pool.stderr


def test_a_plan_on_a_dask_cluster_prints_what_the_local_run_prints(tmp_path):
    pytest.importorskip("distributed")
    from fabriclab.report.points.loopback import LoopbackCluster

    local = invoke(*SMALL, "--store", str(tmp_path / "a.db"))
    with LoopbackCluster(2, log_dir=tmp_path) as cluster:
        remote = invoke(*SMALL, "--store", str(tmp_path / "b.db"), "--scheduler", cluster.address)
        from_env = invoke(*SMALL, "--store", str(tmp_path / "b.db"), "--resume", FABRICLAB_SCHEDULER=cluster.address)
    assert answer(local) == answer(remote) == answer(from_env)
    assert f"[dask {cluster.address}]" in remote.stderr and "(6 from the store" in from_env.stderr


@pytest.mark.parametrize("args, fragment", [
    (("--processes", "0"), "--processes"),
    (("--scheduler", "127.0.0.1:8786"), "tcp://"),
    (("--resume",), "--store PATH"),
])
def test_bad_options_are_one_line_errors(args, fragment):
    if "--scheduler" in args:
        pytest.importorskip("distributed")
    result = invoke(*SMALL, *args, FABRICLAB_STORE="off")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr


def test_a_calibrated_cluster_plan_refuses_the_point_options():
    result = invoke("plan", "--cluster", "dgx-a100", "--gpus", "64", "--processes", "2", FABRICLAB_STORE="off")
    assert result.exit_code == 2 and result.stderr.strip().splitlines() == [
        "error: --cluster plans one calibrated cluster here in a moment (no simulations): drop --scheduler, "
        "--processes and --resume"]
