"""The test suite's own machinery: tests/conftest.py (the `slow` tests, the xdist work units) and the pytest
options of pyproject.toml."""

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _conftest(pytestconfig):
    """tests/conftest.py as pytest loaded it."""
    here = ROOT / "tests" / "conftest.py"
    return next(p for p in pytestconfig.pluginmanager.get_plugins()
                if getattr(p, "__file__", None) and Path(p.__file__).resolve() == here)


class _Item:
    """What tests/conftest.py's hook reads and writes of a collected test."""

    def __init__(self, *marks):
        self.marks = [m.mark for m in marks]

    def get_closest_marker(self, name):
        return next((m for m in self.marks if m.name == name), None)

    def add_marker(self, mark):
        self.marks.append(mark.mark)


def test_slow_tests_skip_with_what_covers_them_unless_asked(pytestconfig, monkeypatch):
    """Without FABRICLAB_SLOW=1 a `slow` test skips, saying what checks its mechanism here; with it, it runs."""
    conftest = _conftest(pytestconfig)
    for env, skipped in ((None, True), ("0", True), ("1", False)):
        if env is None:
            monkeypatch.delenv("FABRICLAB_SLOW", raising=False)
        else:
            monkeypatch.setenv("FABRICLAB_SLOW", env)
        slow, quick = _Item(pytest.mark.slow("test_quick checks it")), _Item()
        conftest.pytest_collection_modifyitems(pytestconfig, [slow, quick])
        assert quick.get_closest_marker("skip") is None
        skip = slow.get_closest_marker("skip")
        assert (skip is not None) == skipped, env
        if skipped:
            assert skip.kwargs["reason"] == ("slow: runs where FABRICLAB_SLOW=1 (.ci/run sets it); "
                                             "here test_quick checks it")


def test_the_plugins_the_test_options_load_are_in_the_test_extras():
    """pyproject.toml's pytest addopts load pytest-xdist (`-p xdist -n 2`): the README's `.[test]` installs it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    addopts = config["tool"]["pytest"]["ini_options"].get("addopts", "").split()
    plugins = [addopts[i + 1] for i, opt in enumerate(addopts[:-1]) if opt == "-p"]
    extras = {re.split(r"[<>=\[ ]", dep, maxsplit=1)[0] for dep in config["project"]["optional-dependencies"]["test"]}
    assert plugins == ["xdist"] and {f"pytest-{p}" for p in plugins} <= extras, (plugins, extras)


def test_a_file_is_one_unit_of_work_but_a_group_or_a_spread_file(pytestconfig):
    """`--dist loadgroup` hands a file to one worker (its module fixtures once, its tests in order); the root
    tests, grouped, to one worker; the tests of a SPREAD file one by one."""
    conftest = _conftest(pytestconfig)
    scope = conftest.xdist_scope
    assert scope("tests/plan/test_plan.py::test_a[1-2]") == scope("tests/plan/test_plan.py::test_b") == \
        "tests/plan/test_plan.py"
    assert scope("tests/emu/test_emu_launch.py::test_x@root") == scope("tests/cli/test_cli_emu.py::test_y@root") == \
        "root"
    assert scope("tests/plan/test_plan.py::test_a[user@host]") == "tests/plan/test_plan.py"  # an @ in an id
    spread = "tests/golden/test_golden.py::test_golden[models]"
    assert scope(spread) == spread
    assert all((ROOT / path).is_file() for path in conftest.SPREAD), "SPREAD names a file that is gone"


def test_root_tests_join_the_root_group(pytestconfig):
    conftest = _conftest(pytestconfig)
    marked, plain, grouped = _Item(pytest.mark.root), _Item(), _Item(pytest.mark.root, pytest.mark.xdist_group("x"))
    conftest.pytest_collection_modifyitems(pytestconfig, [marked, plain, grouped])
    assert marked.get_closest_marker("xdist_group").args == ("root",)
    assert plain.get_closest_marker("xdist_group") is None and grouped.get_closest_marker("xdist_group").args == ("x",)
