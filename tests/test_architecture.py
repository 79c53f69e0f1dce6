"""The house, checked: the package's own imports (read with ``ast``, deferred ones included) form no circle, and
none runs from a lower layer to a higher one. The layers, top to bottom, are those of docs/architecture.md."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

# Top to bottom: a module may import its own layer's modules and any layer below it, never one above.
LAYERS: tuple[str, ...] = (
    "hroofline.cli",
    "hroofline.api",
    "hroofline.render",
    "hroofline.analyze",
    "hroofline.collect",
    "hroofline.store",
    "hroofline.importers",
    "hroofline.work",
    "hroofline.roofs",
    "hroofline.model",
    "hroofline.errors",
)
FACES = ("hroofline", "hroofline.__main__")  # the package's own face: lazy names, and the entry point


def package_sources(root: Path = REPO / "hroofline") -> dict[str, str]:
    """Module name -> source of every module of the package."""
    sources = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        sources[name] = path.read_text()
    return sources


def imports_of(name: str, source: str, modules: set[str]) -> set[str]:
    """The package's modules that ``name`` imports, at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:  # `from hroofline.importers import nvtx` names a module
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
    return {module for module in found if module in modules and module != name}


def layer_of(module: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if module == layer or module.startswith(layer + ".")), None)


def import_problems(sources: dict[str, str]) -> list[str]:
    """Every import from a lower layer to a higher one, and every circle, in words."""
    modules = set(sources)
    graph = {name: imports_of(name, source, modules) for name, source in sources.items()}
    problems = []
    for name, targets in sorted(graph.items()):
        if name in FACES:
            continue
        own = layer_of(name)
        if own is None:
            problems.append(f"{name} is in no layer")
            continue
        for target in sorted(targets):
            theirs = layer_of(target)
            if theirs is not None and theirs < own:
                problems.append(f"{name} imports {target}: {LAYERS[own]} is below {LAYERS[theirs]}")
    problems += [f"import circle: {' -> '.join(circle)}" for circle in circles(graph)]
    return problems


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_circle_and_no_import_upwards() -> None:
    assert import_problems(package_sources()) == []


def test_a_planted_upward_import_and_circle_are_named() -> None:
    """The central type importing an analysis (what `Run.summary` once did) is both: upward, and a circle."""
    sources = package_sources()
    sources["hroofline.model.run"] += "\n\ndef summary(run):\n    from hroofline.analyze.kernels import phase_summary\n"
    problems = import_problems(sources)
    assert "hroofline.model.run imports hroofline.analyze.kernels: hroofline.model is below hroofline.analyze" in (
        problems
    )
    assert any(p.startswith("import circle: ") and "hroofline.model.run" in p for p in problems)


def test_a_planted_circle_within_a_layer_is_named() -> None:
    sources = package_sources()
    sources["hroofline.store.files"] += "\nfrom hroofline.store.runs import RunStore\n"
    (problem,) = import_problems(sources)
    assert problem.startswith("import circle: ") and "hroofline.store.files" in problem
    assert "hroofline.store.runs" in problem


def test_every_module_sits_in_a_layer_named_in_the_architecture_note() -> None:
    note = (REPO / "docs" / "architecture.md").read_text()
    for layer in LAYERS:
        assert f"`{layer.removeprefix('hroofline.')}" in note, layer
    assert all(layer_of(name) is not None or name in FACES for name in package_sources())


def test_the_cli_starts_without_the_heavy_libraries() -> None:
    """`hroofline --help`, `runs` on no store and a typo import none of torch, pandas, pyarrow, altair,
    vl_convert, duckdb (each over 50 ms to import)."""
    heavy = ("torch", "pandas", "pyarrow", "altair", "vl_convert", "duckdb", "numpy")
    probe = (
        "import sys\nfrom hroofline.cli.main import main\n"
        "for argv in (['--help'], ['runs', '--store', sys.argv[1]], ['sumary', 'x']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        f"print('heavy:', ','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    assert importlib.util.find_spec("hroofline") is not None
    done = subprocess.run(
        [sys.executable, "-c", probe, str(REPO / "no-such-store")], capture_output=True, text=True, cwd=REPO
    )
    assert done.stdout.splitlines()[-1] == "heavy: ", done.stdout[-500:]
    assert "unknown command 'sumary'" in done.stderr and "no store at" in done.stderr
