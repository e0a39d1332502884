"""The import graph of the project, read with ``ast`` (nothing is imported):
the shared package ``d2t_metrics`` is built in layers whose imports point
down only (hub → bases → checkpoints → models, cpu_linear → decoding → generator), its
imports sit at the top of each file, and the few function-level ones are
commented (a heavy optional library: torch, transformers, spaCy, ...)."""

import ast
import glob
import os
from typing import Dict, List, NamedTuple, Set

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "d2t_metrics"
# the share of d2t_metrics' import statements that may sit inside a function
MAX_FUNCTION_LEVEL_SHARE = 0.15
# the layers, lowest first: a module imports only from its own layer's predecessors
LAYERS = [
    ("hub",),
    ("bases", "batching"),
    ("checkpoints",),
    ("models", "cpu_linear"),
    ("decoding",),
    ("generator",),
]


class Import(NamedTuple):
    module: str  # the importing module, dotted
    target: str  # the project module it imports, dotted
    line: int
    in_function: bool


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, ROOT)[: -len(".py")].split(os.sep)
    return ".".join(rel[:-1] if rel[-1] == "__init__" else rel)


def _project_files() -> List[str]:
    return sorted(glob.glob(os.path.join(ROOT, PACKAGE, "*.py")) + glob.glob(os.path.join(ROOT, "metrics", "*", "*.py")))


def _known_modules() -> Set[str]:
    return {_module_name(f) for f in _project_files()}


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The dotted module an ``from ... import`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _project_targets(name: str, known: Set[str]) -> List[str]:
    roots = {m.split(".")[0] for m in known}
    return [name] if name.split(".")[0] in roots else []


def _function_nodes(tree: ast.AST) -> Set[int]:
    """ids of the import nodes that sit inside a function (at any depth)."""
    inside: Set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(n) for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return inside


def _statements(path: str):
    with open(path, encoding="utf-8") as f:
        source = f.read()
    tree = ast.parse(source, filename=path)
    inside = _function_nodes(tree)
    return source.splitlines(), [(n, id(n) in inside) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def project_imports() -> List[Import]:
    """Every intra-project import (relative or absolute) of d2t_metrics/*.py and metrics/*/*.py."""
    known = _known_modules()
    found = []
    for path in _project_files():
        module, is_package = _module_name(path), path.endswith("__init__.py")
        for node, in_function in _statements(path)[1]:
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = _resolve(module, is_package, node)
                # `from d2t_metrics import bases` imports the submodule d2t_metrics.bases
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            for name in names:
                for target in _project_targets(name, known):
                    while target not in known and "." in target:  # `import d2t_metrics.models.x` → the module
                        target = target.rsplit(".", 1)[0]
                    if target in known and target != module:
                        found.append(Import(module, target, node.lineno, in_function))
    return found


def _graph(imports: List[Import], prefix: str) -> Dict[str, Set[str]]:
    graph: Dict[str, Set[str]] = {}
    for imp in imports:
        if imp.module.startswith(prefix) and imp.target.startswith(prefix):
            graph.setdefault(imp.module, set()).add(imp.target)
    return graph


def find_cycle(graph: Dict[str, Set[str]]) -> List[str]:
    """One import circle of ``graph`` (as a path that ends where it starts), or ``[]``."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def visit(node: str) -> List[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return []


# ---------------------------------------------------------------- the tests


def test_the_graph_reader_sees_relative_and_absolute_imports():
    imports = project_imports()
    pairs = {(i.module, i.target) for i in imports}
    assert ("d2t_metrics.models", "d2t_metrics.checkpoints") in pairs  # from .checkpoints import ...
    assert ("d2t_metrics.bases", "d2t_metrics.hub") in pairs  # from . import hub
    assert ("metrics.dae.arcs", "d2t_metrics.bases") in pairs  # from d2t_metrics import bases
    assert any(i.module.startswith("metrics.") and i.target.startswith("metrics.") for i in imports)  # from .x import y
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}}) == []


def test_no_import_circle_in_the_shared_package():
    cycle = find_cycle(_graph(project_imports(), PACKAGE))
    assert not cycle, "import circle: " + " -> ".join(cycle)


def test_no_import_circle_within_a_metric_folder():
    imports = project_imports()
    for folder in sorted(glob.glob(os.path.join(ROOT, "metrics", "*", ""))):
        prefix = "metrics." + os.path.basename(os.path.dirname(folder)) + "."
        cycle = find_cycle(_graph(imports, prefix))
        assert not cycle, "import circle: " + " -> ".join(cycle)


def test_the_shared_package_imports_no_metric():
    upward = [i for i in project_imports() if i.module.startswith(PACKAGE) and i.target.startswith("metrics.")]
    assert not upward, upward


def test_the_model_layers_import_only_downwards():
    rank = {f"{PACKAGE}.{name}": level for level, names in enumerate(LAYERS) for name in names}
    upward = [i for i in project_imports() if i.module in rank and i.target in rank and rank[i.target] >= rank[i.module]
              and i.target != i.module]
    assert not upward, upward


def test_the_lowest_layers_need_no_torch():
    """hub, bases and batching are imported by light code (the command line,
    spaCy-only metrics): torch, transformers and spaCy load inside the
    functions that need them only."""
    heavy = ("torch", "transformers", "peft", "safetensors", "spacy", "evaluate")
    for name in ("hub", "bases", "batching"):
        for node, in_function in _statements(os.path.join(ROOT, PACKAGE, f"{name}.py"))[1]:
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.split(".")[0] in heavy for m in modules):
                assert in_function, f"{name}.py:{node.lineno} imports {modules} at the top"


def test_imports_sit_at_the_top_and_the_few_lazy_ones_say_why():
    total, lazy, uncommented = 0, [], []
    for path in sorted(glob.glob(os.path.join(ROOT, PACKAGE, "*.py"))):
        lines, statements = _statements(path)
        for node, in_function in statements:
            total += 1
            if not in_function:
                continue
            where = f"{os.path.relpath(path, ROOT)}:{node.lineno}"
            lazy.append(where)
            own = lines[node.lineno - 1: node.end_lineno]
            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            if not any("#" in line for line in own) and not above.startswith("#"):
                uncommented.append(where)
    share = len(lazy) / total
    assert share < MAX_FUNCTION_LEVEL_SHARE, f"{len(lazy)} of {total} imports ({share:.0%}) sit inside functions: {lazy}"
    assert not uncommented, f"function-level imports without a comment saying why: {uncommented}"
