"""The layer rules of DESIGN.md: imports point down only, and the simulator side never needs torch.

Static part: every file under `src/fabriclab/<layer>/` imports only `fabriclab.<same or lower layer>`
and the root-level modules every layer may use (`units`, `record`, `textfile`); the light layers import only the
standard library and numpy; tests mirror the package, so only `tests/cli/` drives the CLI (`fabriclab.cli`),
the tests of every other layer test that layer. Dynamic part: importing every module of a light layer, in
a fresh interpreter, loads neither torch nor any fabriclab layer above it. Circles: no module of
`src/fabriclab` imports itself through others, inside a folder or across folders, at any depth (an import
inside a function counts: it only postpones the circle to the first call).
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import fabriclab

SRC_DIR = Path(fabriclab.__file__).resolve().parent.parent
TESTS_DIR = Path(__file__).resolve().parent
# Bottom to top, as drawn in DESIGN.md ("imports point down only").
LAYERS = ("workload", "collectives", "fabric", "sim", "nccl", "whatif", "plan", "runtime", "emu", "bench", "report",
          "cli")
# Root-level modules any layer may import; they themselves import only the standard library.
ROOT_MODULES = ("units", "record", "textfile")
# Layers that need only the standard library and numpy (DESIGN.md). In workload/ that holds for the
# data modules only: the profiler measures real models with torch.
LIGHT_LAYERS = ("workload", "collectives", "fabric", "sim", "nccl", "whatif", "plan")
TORCH_MODULE_PREFIXES = {"workload": ("profiler", "models")}
LIGHT_THIRD_PARTY = {"numpy"}


def _imports(path: Path, src_dir: Path = SRC_DIR) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in a file, at any depth; relative imports resolved.

    `from fabriclab import x` gives `fabriclab.x`, as x is then a layer or a root-level module."""
    package = list(path.relative_to(src_dir).with_suffix("").parts)[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            if module == "fabriclab":
                found += [(node.lineno, f"fabriclab.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, module))
    return found


def _layer_files(layer: str, src_dir: Path = SRC_DIR) -> list[Path]:
    return sorted((src_dir / "fabriclab" / layer).rglob("*.py"))


def _upward_imports(layer: str, src_dir: Path = SRC_DIR) -> list[str]:
    allowed = set(LAYERS[:LAYERS.index(layer) + 1]) | set(ROOT_MODULES) | {"__version__"}
    return [f"{path.relative_to(src_dir)}:{line} imports {module}"
            for path in _layer_files(layer, src_dir) for line, module in _imports(path, src_dir)
            if module.startswith("fabriclab.") and module.split(".")[1] not in allowed]


def _heavy_imports(layer: str, src_dir: Path = SRC_DIR) -> list[str]:
    ok = set(sys.stdlib_module_names) | LIGHT_THIRD_PARTY | {"fabriclab"}
    return [f"{path.relative_to(src_dir)}:{line} imports {module}"
            for path in _layer_files(layer, src_dir)
            if not path.relative_to(src_dir / "fabriclab" / layer).parts[0].startswith(TORCH_MODULE_PREFIXES.get(layer, ()))
            for line, module in _imports(path, src_dir) if module.split(".")[0] not in ok]


def _import_graph(src_dir: Path = SRC_DIR) -> dict[str, dict[str, str]]:
    """module -> {module of fabriclab it imports: `path:line` of the first such import}, from every import
    of every file at any depth, relative imports resolved. A package is its `__init__`; `from pkg import name`
    imports pkg (its `__init__` runs and is read) and pkg.name where that is a module; `import a.b` imports
    a.b. A module's imports of itself are left out."""
    paths = {}
    for path in sorted((src_dir / "fabriclab").rglob("*.py")):
        parts = path.relative_to(src_dir).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, dict[str, str]] = {}
    for name, path in paths.items():
        package = list(path.relative_to(src_dir).with_suffix("").parts)[:-1]
        edges = graph[name] = {}
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                targets = [module, *(f"{module}.{alias.name}" for alias in node.names)]
            else:
                continue
            for target in targets:
                if target in paths and target != name:
                    edges.setdefault(target, f"{path.relative_to(src_dir)}:{node.lineno}")
    return graph


def _circles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """Every import circle: each set of two or more modules that reach one another (a strongly connected
    component of the graph), sorted."""
    reach = {}
    for start in graph:
        seen, todo = set(), [start]
        while todo:
            for module in graph.get(todo.pop(), ()):
                if module not in seen:
                    seen.add(module)
                    todo.append(module)
        reach[start] = seen
    circles = {frozenset({v} | {m for m in reach[v] if v in reach.get(m, ())}) for v in graph if v in reach[v]}
    return sorted(sorted(c) for c in circles)


def _circle_report(graph: dict[str, dict[str, str]]) -> list[str]:
    """One entry per circle: its modules, then where each of them imports another."""
    out = []
    for circle in _circles(graph):
        edges = [f"    {where} imports {target}" for module in circle
                 for target, where in graph[module].items() if target in circle]
        out.append("\n".join([f"circle of {', '.join(circle)}:", *edges]))
    return out


def test_every_subpackage_is_a_known_layer():
    package_dir = SRC_DIR / "fabriclab"
    unknown = [p.name for p in package_dir.iterdir()
               if p.is_dir() and (p / "__init__.py").exists() and p.name not in LAYERS]
    assert not unknown, f"add {unknown} to LAYERS in {__file__} at its place in DESIGN.md's order"
    # __main__ is `python -m fabriclab`, the CLI's entry point: above every layer, imported by none.
    modules = {p.stem for p in package_dir.glob("*.py")} - {"__init__", "__main__"}
    assert modules <= set(ROOT_MODULES), (
        f"root-level modules {sorted(modules - set(ROOT_MODULES))}: move them into a layer, or add them "
        f"to ROOT_MODULES in {__file__} if every layer may import them")


def _cli_imports_in_tests(tests_dir: Path = TESTS_DIR) -> list[str]:
    """`tests/<pkg>/...py:line imports fabriclab.cli...` for every test file outside tests/cli that imports
    the CLI (at any depth: a function's import counts too)."""
    return [f"{path.relative_to(tests_dir.parent)}:{line} imports {module}"
            for pkg in sorted(p for p in tests_dir.iterdir() if p.is_dir() and p.name != "cli")
            for path in sorted(pkg.rglob("*.py")) for line, module in _imports(path, tests_dir)
            if module == "fabriclab.cli" or module.startswith("fabriclab.cli.")]


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_point_down(layer):
    bad = _upward_imports(layer)
    assert not bad, f"{layer}/ may import only the layers below it (DESIGN.md):\n" + "\n".join(bad)


@pytest.mark.parametrize("layer", LIGHT_LAYERS)
def test_light_layers_need_only_stdlib_and_numpy(layer):
    bad = _heavy_imports(layer)
    assert not bad, f"{layer}/ may use only the standard library and numpy:\n" + "\n".join(bad)


@pytest.mark.parametrize("name", ROOT_MODULES)
def test_root_modules_use_only_the_standard_library(name):
    path = SRC_DIR / "fabriclab" / f"{name}.py"
    bad = [f"{name}.py:{line} imports {module}" for line, module in _imports(path)
           if module.split(".")[0] not in sys.stdlib_module_names
           and module not in ("fabriclab", "fabriclab.__version__")]
    assert not bad, "\n".join(bad)


def test_the_checks_catch_upward_relative_and_heavy_imports(tmp_path):
    sim = tmp_path / "fabriclab" / "sim"
    sim.mkdir(parents=True)
    (sim / "flows.py").write_text(
        "import numpy\nfrom . import engine\nfrom ..collectives import schedule\n"
        "from fabriclab import units\ndef f():\n    from ..runtime import executor\n    import torch\n")
    assert [m for _, m in _imports(sim / "flows.py", tmp_path)] == [
        "numpy", "fabriclab.sim", "fabriclab.collectives", "fabriclab.units", "fabriclab.runtime", "torch"]
    assert _upward_imports("sim", tmp_path) == ["fabriclab/sim/flows.py:6 imports fabriclab.runtime"]
    assert _heavy_imports("sim", tmp_path) == ["fabriclab/sim/flows.py:7 imports torch"]


def test_no_module_is_in_an_import_circle():
    bad = _circle_report(_import_graph())
    assert not bad, ("modules that import one another (move what both need into a lower module, pass a "
                     "function in, or merge them; an import inside a function does not untie a circle):\n"
                     + "\n".join(bad))


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "fabriclab" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_circle_check_finds_circles_through_an_init_and_a_function(tmp_path):
    graph = _import_graph(_tree(tmp_path, {
        "__init__.py": "",
        # the package re-exports x, and x reads the package: a circle through the __init__
        "a/__init__.py": "from fabriclab.a.x import f\n",
        "a/x.py": "from fabriclab.a import y\ndef f():\n    pass\n",
        # y imports z inside a function, z imports y: still a circle
        "a/y.py": "import numpy\ndef g():\n    from .z import h\n",
        "a/z.py": "import fabriclab.a.y\ndef h():\n    pass\n",
        "b/__init__.py": "",
        "b/p.py": "from ..a import z\n"}))
    assert graph["fabriclab.b.p"] == {"fabriclab.a": "fabriclab/b/p.py:1", "fabriclab.a.z": "fabriclab/b/p.py:1"}
    assert _circles(graph) == [["fabriclab.a", "fabriclab.a.x"], ["fabriclab.a.y", "fabriclab.a.z"]]
    assert _circle_report(graph)[1] == ("circle of fabriclab.a.y, fabriclab.a.z:\n"
                                        "    fabriclab/a/y.py:3 imports fabriclab.a.z\n"
                                        "    fabriclab/a/z.py:1 imports fabriclab.a.y")


def test_the_circle_check_passes_a_tree_whose_imports_point_one_way(tmp_path):
    graph = _import_graph(_tree(tmp_path, {
        "__init__.py": "",
        "a/__init__.py": "from .x import f\n",  # a package may re-export a module that does not read it
        "a/x.py": "from fabriclab.a.y import g\ndef f():\n    from .z import h\n",
        "a/y.py": "import numpy\nfrom ..b import p\n",
        "a/z.py": "import fabriclab.a.y\n",
        "b/__init__.py": "",
        "b/p.py": "from . import q\n",
        "b/q.py": "from fabriclab import units\n"}))
    assert graph["fabriclab.a.x"] == {"fabriclab.a.y": "fabriclab/a/x.py:1", "fabriclab.a.z": "fabriclab/a/x.py:3"}
    assert _circles(graph) == [] and _circle_report(graph) == []


def test_only_the_cli_tests_import_the_cli():
    bad = _cli_imports_in_tests()
    assert not bad, ("tests/<layer>/ test their layer; only tests/cli/ may import fabriclab.cli (move the "
                     "command's test there, or test the layer below):\n" + "\n".join(bad))


def test_the_check_catches_a_test_that_imports_the_cli(tmp_path):
    # the package's name is joined here so that no line of this file reads as an import of the CLI itself
    cli = ".".join(("fabriclab", "cli"))
    for pkg, text in (("cli", f"from {cli}.main import app\n"),
                      ("report", "import json\nfrom fabriclab.report import store\ndef f():\n"
                                 f"    from {cli} import validate\n"),
                      ("emu", f"from fabriclab import {cli.split('.')[1]}\nimport fabriclab.client_side\n")):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "test_x.py").write_text(text)
    (tmp_path / "test_top.py").write_text(f"import {cli}.main\n")
    assert _cli_imports_in_tests(tmp_path) == [
        f"{tmp_path.name}/emu/test_x.py:1 imports fabriclab.cli",
        f"{tmp_path.name}/report/test_x.py:4 imports fabriclab.cli"]


_IMPORT_ALL = """
import importlib, json, pkgutil, sys
layer, skip = sys.argv[1], tuple(sys.argv[2:])
pkg = importlib.import_module("fabriclab." + layer)
names = [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")
         if not (skip and m.name.split(".")[2].startswith(skip))]
for name in names:
    importlib.import_module(name)
print(json.dumps({"modules": names, "loaded": sorted(m for m in sys.modules
                  if m.partition(".")[0] == "torch" or m.startswith("fabriclab."))}))
"""


@pytest.mark.parametrize("layer", LIGHT_LAYERS)
def test_importing_a_light_layer_loads_no_torch_and_nothing_above(layer):
    if not (SRC_DIR / "fabriclab" / layer / "__init__.py").exists():
        pytest.skip(f"fabriclab.{layer} does not exist yet")
    skip = TORCH_MODULE_PREFIXES.get(layer, ())
    done = subprocess.run([sys.executable, "-c", _IMPORT_ALL, layer, *skip], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    above = set(LAYERS[LAYERS.index(layer) + 1:])
    bad = [m for m in report["loaded"] if m.partition(".")[0] == "torch" or m.split(".")[1] in above]
    assert not bad, f"importing {report['modules']} loaded {bad}"


def test_collectives_core_modules_load_without_torch_sim_or_runtime():
    code = ("import sys, fabriclab.collectives.schedule, fabriclab.collectives.registry, "
            "fabriclab.collectives.verify\n"
            "bad = [m for m in sys.modules if m.partition('.')[0] == 'torch' "
            "or m.startswith(('fabriclab.sim', 'fabriclab.runtime'))]\n"
            "assert not bad, bad\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
