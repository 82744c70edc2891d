"""The lower bounds of pyproject.toml really work: the lowest allowed numpy, typer, rich and matplotlib, installed
from PyPI in a scratch venv, run the CLI smoke tests (tests/cli/test_cli_smoke.py and the help tests
tests/cli/test_cli_help.py; the bad-input table is left out: its 22 s of set-up would run twice in CI)
and the CLI itself.

A user's environment decides the versions: a GPU server's image with typer 0.27.2 once crashed every command
at import, while pyproject.toml allowed any typer. The venv sees the site-packages of the environment that runs
the tests (a system interpreter, a venv, a conda env: `outer_site_packages`, added by a `.pth` file, since
`--system-site-packages` from inside a venv reaches only the base interpreter's) for torch and the test tools
only: torch releases other than the CPU build that
lies on this machine's disk are multi-GB CUDA wheels, too big to fetch per test run, so torch's bound is the
release of the newest torch API the code calls, and the torch tested is the one installed. The four pins are
installed into the venv itself, so they shadow the newer copies outside it (checked below).

Marked `slow` (CI runs it, `.ci/run` sets FABRICLAB_SLOW=1): run it alone with
`FABRICLAB_SLOW=1 python -m pytest -q -m lowest`; leave it out: `-m "not lowest"`.
"""

from __future__ import annotations

import os
import re
import site
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PINNED = ("numpy", "typer", "rich", "matplotlib")
# What checks the same CLI in a quick run, where these slow tests skip (tests/conftest.py).
ON_INSTALLED = "tests/cli/test_cli_smoke.py and test_cli_help.py run the same CLI tests on the installed versions"


def lower_bounds() -> dict[str, str]:
    """name -> the version of its `>=` bound, for every dependency of pyproject.toml."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    bounds = {}
    for dep in deps:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9][0-9.]*)", dep.replace(" ", ""))
        assert match, f"pyproject.toml: {dep!r} has no plain lower bound (NAME>=VERSION)"
        bounds[match[1].lower()] = match[2]
    return bounds


def _release(version: str) -> tuple[int, ...]:
    """`1.24.0` and `1.24` as one release: the numbers without trailing zeros."""
    numbers = [int(part) for part in version.split(".")]
    while numbers and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def test_every_dependency_has_a_lower_bound():
    assert set(lower_bounds()) == {*PINNED, "torch"}


def _run(argv: list, timeout_s: float, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout_s, **kwargs)


def outer_site_packages() -> list[str]:
    """The site-packages folders of the interpreter running the tests, in its own order (its venv's or conda
    env's first, then the base interpreter's and the user's where it sees them)."""
    folders = [*site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    return [f for f in dict.fromkeys(folders) if os.path.isdir(f)]


def _see_outer_packages(python: Path) -> None:
    """A `.pth` file in the scratch venv's site-packages that adds the outer environment's folders (their own
    `.pth` files too) after the venv's own, so the pins installed in the venv shadow the outer copies."""
    inner = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], 60, check=True)
    lines = [f"import site; site.addsitedir({folder!r})" for folder in outer_site_packages()]
    (Path(inner.stdout.strip()) / "zz_fabriclab_outer_env.pth").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def lowest_python(tmp_path_factory) -> Path:
    """A venv's python with the lowest allowed numpy, typer, rich and matplotlib, seeing the running
    environment's torch and test tools; skips without PyPI."""
    where = tmp_path_factory.mktemp("lowest")
    venv = where / "venv"
    _run([sys.executable, "-m", "venv", "--system-site-packages", venv], 120, check=True)
    python = venv / "bin" / "python"
    _see_outer_packages(python)
    pins = [f"{name}=={lower_bounds()[name]}" for name in PINNED]
    # One short download first: a machine that cannot reach PyPI skips, one that can must install.
    typer_pin = pins[PINNED.index("typer")]
    probe = _run([python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--timeout", "15",
                  "--retries", "1", "-d", where / "probe", typer_pin], 180)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"PyPI cannot be reached (pip download {typer_pin}: {last})")
    # Wheels only: a source build of an old numpy would take many minutes, and it is not what users get.
    done = _run([python, "-m", "pip", "install", "-q", "--only-binary=:all:", *pins], 600)
    assert done.returncode == 0, f"pip install {' '.join(pins)}:\n{done.stderr[-3000:]}"
    return python


def _env(tmp: Path) -> dict[str, str]:
    """This checkout's package first, and a results store of the run's own (not the outer test run's)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "FABRICLAB_STORE": str(tmp / "results.db")}
    env.pop("PYTEST_ADDOPTS", None)
    return env


@pytest.mark.lowest
@pytest.mark.slow(ON_INSTALLED)
@pytest.mark.timeout(1200)
def test_the_venv_holds_exactly_the_lowest_versions(lowest_python, tmp_path):
    shown = _run([lowest_python, "-c", "import importlib.metadata as m, sys; "
                  f"print(' '.join(m.version(n) for n in {PINNED!r}))"], 60, env=_env(tmp_path))
    assert [_release(v) for v in shown.stdout.split()] == [_release(lower_bounds()[n]) for n in PINNED], shown.stderr


@pytest.mark.lowest
@pytest.mark.slow(ON_INSTALLED)
@pytest.mark.timeout(1200)
def test_the_venv_sees_the_torch_and_pytest_of_the_running_environment(lowest_python, tmp_path):
    import pytest as outer_pytest
    import torch

    shown = _run([lowest_python, "-c", "import torch, pytest; print(torch.__file__); print(pytest.__file__)"],
                 120, env=_env(tmp_path))
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stdout.split() == [torch.__file__, outer_pytest.__file__]



@pytest.mark.lowest
@pytest.mark.slow(ON_INSTALLED)
@pytest.mark.timeout(1200)
def test_the_cli_smoke_tests_pass_on_the_lowest_versions(lowest_python, tmp_path):
    # The bad-input table too: its one-line errors go through the parser's error classes, which moved
    # between typer versions (click's own, then typer's copy of click).
    # The help tests also, less the one that checks the type names of typer's own help (`<int>` today,
    # `INTEGER` in older typers): a matter of typer's looks, not of ours.
    done = _run([lowest_python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore",
                 "tests/cli/test_cli_smoke.py", "tests/cli/test_cli_help.py",
                 "-k", "not typed_options_typed"], 900, cwd=ROOT, env=_env(tmp_path))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


@pytest.mark.lowest
@pytest.mark.slow(ON_INSTALLED)
@pytest.mark.timeout(1200)
@pytest.mark.parametrize(("args", "code", "expected"), [
    (["--help"], 0, "Usage: fabriclab"),
    (["--version"], 0, "fabriclab "),
    (["models", "--format", "csv"], 0, "resnet50"),
    (["plan", "--gpus", "64", "--fabrics", "25gbe", "--bisection", "1"], 0, "resnet50 at 64 GPUs"),
    (["train", "--np", "abc"], 2, "error: Invalid value for '--np'"),
    (["train", "--no-such-option"], 2, "error: No such option"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_the_cli_runs_on_the_lowest_versions(lowest_python, tmp_path, args, code, expected):
    done = _run([lowest_python, "-m", "fabriclab", *args], 300, cwd=tmp_path, env=_env(tmp_path))
    assert done.returncode == code, done.stdout[-2000:] + done.stderr[-2000:]
    assert expected in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    if code == 2:
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
