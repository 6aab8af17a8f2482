"""One import direction, checked on the source (every import, module level or inside functions),
module by module where a package holds parts of several layers:

    bottom      errors, records, stats, hardware, procs.interrupts, procs.faults, procs.host,
                procs.slurm, measure.memory
    kernels     dsbench.kernels.*  (kernels/ in the repository)
    compute     procs.distributed, models, zero
    workloads   engines, measure.timing, suites, soak
    runner      measure.runner, measure.suite_run, measure.run_table, ab, sweep, envinfo, gpu,
                soak.session
    results     results, compare  (read JSON: the bottom and each other only)
    top         publish, cli, __main__

A module may import its own layer and the layers below it; the results layer only the bottom
and itself; no two parts import each other (two modules of one package are two parts where the
package is split between layers); inside a package no module reaches itself through its
package's modules (no circle, ``if TYPE_CHECKING:`` imports included). A package that only groups
parts (measure, procs) has an ``__init__`` that imports nothing.
"""

import ast
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_RESULTS

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {
    "bottom": [
        "errors",
        "records",
        "stats",
        "hardware",
        "procs.interrupts",
        "procs.faults",
        "procs.host",
        "procs.slurm",
        "measure.memory",
    ],
    "kernels": ["kernels"],
    "compute": ["procs.distributed", "models", "zero"],
    "workloads": ["engines", "measure.timing", "suites", "soak"],
    "runner": [
        "measure.runner",
        "measure.suite_run",
        "measure.run_table",
        "ab",
        "sweep",
        "envinfo",
        "gpu",
        "soak.session",
    ],
    "results": ["results", "compare"],
    "top": ["publish", "cli", "__main__"],
}
ORDER = ["bottom", "kernels", "compute", "workloads", "runner", "top"]
LAYER_OF = {name: layer for layer, names in LAYERS.items() for name in names}
GROUPS = {"measure", "procs"}
"""Packages that only group parts of several layers: their ``__init__`` imports nothing."""


def _unit(module: str) -> str:
    """``dsbench.zero.engine`` -> ``zero``; ``dsbench.kernels.ring`` -> ``kernels``;
    ``dsbench.measure.timing`` -> ``measure.timing``: the longest name in LAYERS (or a group)
    that the module is or lies under."""
    parts = module.split(".")[1:]
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in LAYER_OF or name in GROUPS:
            return name
    return parts[0] if parts else "__init__"


def _module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] == "kernels":
        parts = ["dsbench", *parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(name: str) -> bool:
    """Whether the dotted ``name`` is a module or package of dsbench (kernels/ included)."""
    parts = name.split(".")[1:]
    top = ROOT / "kernels" if parts[:1] == ["kernels"] else ROOT / "dsbench"
    rel = parts[1:] if parts[:1] == ["kernels"] else parts
    return bool(rel) and (top.joinpath(*rel).with_suffix(".py").is_file()
                          or top.joinpath(*rel, "__init__.py").is_file())  # fmt: skip


def _imports(path: Path) -> set[str]:
    """Every dsbench module ``path`` imports, wherever the import statement is."""
    module = _module_of(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("dsbench")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "dsbench":  # from dsbench import results, ...
                out |= {f"dsbench.{a.name}" for a in node.names}
            elif target.startswith("dsbench."):  # from dsbench.procs import host: the module
                subs = [
                    f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}")
                ]
                out |= set(subs) if subs else {target}
    return out


def _edges() -> set[tuple[str, str]]:
    """(importer, imported) at the granularity of LAYERS' names."""
    files = [*ROOT.joinpath("dsbench").rglob("*.py"), *ROOT.joinpath("kernels").rglob("*.py")]
    edges = set()
    for path in files:
        module = _module_of(path)
        importer = _unit(module)
        for target in _imports(path):
            imported = _unit(target)
            if imported not in ("__init__", "__version__") and imported != importer:
                edges.add((importer, imported))
    return edges


def _points_up(importer: str, imported: str) -> bool:
    a = LAYER_OF.get(importer)
    b = LAYER_OF.get(imported)
    assert a and b, f"{importer} or {imported} is in no layer: add it to LAYERS"
    if a == "results":
        return b not in ("bottom", "results")
    if b == "results":
        return a not in ("results", "runner", "top")
    return ORDER.index(b) > ORDER.index(a)


def test_every_module_is_in_a_layer():
    names = {_unit(_module_of(p)) for p in ROOT.joinpath("dsbench").rglob("*.py")}
    assert names - {"__init__"} - GROUPS <= set(LAYER_OF), names - set(LAYER_OF) - GROUPS


def test_group_packages_import_nothing():
    for group in GROUPS:
        init = ROOT / "dsbench" / group / "__init__.py"
        assert _imports(init) == set(), f"{init}: a group package's __init__ imports nothing"


def test_no_import_points_up():
    up = {e for e in _edges() if _points_up(*e)}
    assert up == set(), f"imports pointing up: {sorted(up)}"


def test_no_two_parts_import_each_other():
    edges = _edges()
    cycles = {(a, b) for a, b in edges if (b, a) in edges}
    assert cycles == set(), sorted(cycles)


def _module_edges() -> dict[str, set[str]]:
    """Module -> the modules of its own package it imports (``if TYPE_CHECKING:`` ones too: an
    annotation that needs the other module is a dependency all the same)."""
    files = [*ROOT.joinpath("dsbench").rglob("*.py"), *ROOT.joinpath("kernels").rglob("*.py")]
    graph: dict[str, set[str]] = {}
    for path in files:
        module = _module_of(path)
        package = module.split(".")[:2]
        graph[module] = {t for t in _imports(path) if t != module and t.split(".")[:2] == package}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                out.append(sorted([v, *component]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_circles_are_found():
    """The check below can fail: a three-module circle and a pair are found, a chain is not."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert sorted(_circles(graph)) == [["a", "b", "c"], ["d", "e"]]


def test_no_import_circle_inside_a_package():
    """Inside a package the modules form layers of their own: no module reaches itself through
    imports of its package's modules (a page that imports the site builder that imports every
    page is such a circle)."""
    assert _circles(_module_edges()) == []


def _imported(argv: list[str]) -> set[str]:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "dsbench", *argv],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stderr[-2000:]
    return {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines()}


@pytest.mark.parametrize("verb", ["compare", "publish", "env", "profiles"])
def test_reading_verbs_load_without_torch(verb):
    """Only the verb that runs is loaded: reading verbs' --help imports no torch."""
    assert "torch" not in _imported([verb, "--help"])


def test_compare_reads_results_without_torch():
    """A real comparison over the fixture runs (copies of reference runs) imports no torch and
    no benchmark definition."""
    imported = _imported(["compare", "--baseline", "0.18.3", "--results", str(FIXTURE_RESULTS)])
    assert "torch" not in imported and "dsbench.suites" not in imported


def test_records_metrics_match_the_definitions():
    """records.METRICS (what readers of result files use) is the suites' metrics, in order."""
    from dsbench.records import METRICS
    from dsbench.suites import BENCHMARKS
    from dsbench.suites.ceilings import CEILINGS

    defined = {
        b.name: tuple((m.name, m.unit, m.direction) for m in b.metrics)
        for b in [*BENCHMARKS.values(), *CEILINGS.values()]
    }
    assert defined == METRICS


def test_every_package_is_installed():
    """pyproject lists packages by hand (kernels/ and hardware_profiles/ are installed inside
    dsbench): a package folder missing there runs from the checkout and breaks every install
    (asv's environments could not import dsbench.records)."""
    import tomllib

    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    where = {name: ROOT / folder for name, folder in tool["package-dir"].items()}

    def folder(package: str) -> Path:
        top = max((n for n in where if package == n or package.startswith(n + ".")), key=len)
        return where[top].joinpath(*package[len(top) :].split(".")[1:])

    listed = {folder(p).resolve() for p in tool["packages"]}
    found = {
        init.parent.resolve()
        for top in where.values()
        for init in top.rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert sorted(map(str, found - listed)) == []
    assert sorted(map(str, listed - found)) == []


def test_a_side_without_dsbench_installed_reports_the_checkouts_version(tmp_path):
    """An A/B side whose interpreter has no dsbench installed (the Python 3.12 venv) imports the
    checkout through a shim: it reports pyproject's version, as an installed side does, so the
    two sides of one commit are not listed as running different dsbench versions."""
    import subprocess
    import sys
    import tomllib

    from dsbench import ab

    shim = ab.make_shim(ROOT, tmp_path / "shim")
    code = f"import sys; sys.path[:0] = [{str(shim)!r}]; import dsbench; print(dsbench.__version__)"
    # -S: no site-packages, so no installed dsbench's metadata to find
    got = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout.strip()  # fmt: skip
    assert got == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_argparse_stays_in_cli():
    """A verb's module turns its parsed arguments into typed options: no module below cli/
    imports argparse or takes an ``argparse.Namespace``."""
    found = set()
    for path in ROOT.joinpath("dsbench").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("dsbench/cli/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            namespace = isinstance(node, ast.Attribute) and node.attr == "Namespace"
            if "argparse" in names or namespace:
                found.add(rel)
    assert found == set(), sorted(found)


PUBLISH_DATA = "dsbench.publish.data"
"""What the published site says, computed from the runs: no markup, no plotting, no page."""
VIEW_ONLY = {"html", "matplotlib"}
"""Modules only the views of ``dsbench.publish`` may import (the markup, the charts)."""


def _top_level_imports(path: Path) -> set[str]:
    """The top-level names of every absolute import ``path`` makes (``matplotlib.figure`` ->
    ``matplotlib``), wherever the import statement is."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_publish_data_imports_no_view():
    """A module of ``dsbench.publish.data`` imports nothing of ``dsbench.publish`` outside data
    (no page, no ``html``, ``plots``, ``tables`` or ``site`` module) and neither matplotlib nor
    the ``html`` module; importing all of it loads no view either."""
    import subprocess
    import sys

    folder = ROOT.joinpath(*PUBLISH_DATA.split("."))
    for path in sorted(folder.rglob("*.py")):
        views = {m for m in _imports(path)
                 if m.startswith("dsbench.publish") and not m.startswith(PUBLISH_DATA)}  # fmt: skip
        assert views == set(), f"{path.relative_to(ROOT)} imports {sorted(views)}"
        assert _top_level_imports(path) & VIEW_ONLY == set(), path.relative_to(ROOT)
    code = (
        "import importlib, pkgutil, sys, dsbench.publish.data as d\n"
        "for m in pkgutil.walk_packages(d.__path__, d.__name__ + '.'):\n"
        "    importlib.import_module(m.name)\n"
        "print(' '.join(m for m in sys.modules if m.split('.')[0] == 'matplotlib' or\n"
        "               m.startswith('dsbench.publish.') and not m.startswith(d.__name__)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == []
