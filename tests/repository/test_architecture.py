"""The house as docs/architecture.md draws it (docs/architecture.json), held against the code.

Every module of the two packages sits on one part of the drawing; every import from one
part to another is a drawn arrow, and every drawn arrow is an import; no import breaks a
"never"; the only import circle is tensor ↔ autograd (the Tensor's operators delegate to
the ops); no route imports another route, and no module of the service but the app
factory imports a route. Imports are read with `ast`, nothing is run: an import inside a
function counts (it is an import all the same), an ``if TYPE_CHECKING:`` block does not
(it never runs), nor does the body of a module's ``__getattr__`` (PEP 562), which only
hands out a name that lives in another module (``glassllm.layers.GlassLM``).
"""

from __future__ import annotations

import ast
import json
from functools import cache
from pathlib import Path

import pytest
from paths import ROOT

HOUSE = json.loads((ROOT / "docs" / "architecture.json").read_text(encoding="utf-8"))
PACKAGES = {"glassllm": ROOT / "glassllm",
            "glassllm_service": ROOT / "service" / "glassllm_service"}
ALLOWED_CIRCLES = [{"glassllm.autograd", "glassllm.tensor"}]   # the dunders delegate to ops


@cache
def modules() -> dict[str, Path]:
    """Dotted name → file, for every module of both packages."""
    out = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((package, *parts))] = path
    return out


def _skipped(node: ast.AST) -> bool:
    """An ``if TYPE_CHECKING:`` block, or a module-level ``def __getattr__``."""
    if isinstance(node, ast.If):
        test = node.test
        return getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING"
    return isinstance(node, ast.FunctionDef) and node.name == "__getattr__"


def _import_nodes(node: ast.AST):
    for child in ast.iter_child_nodes(node):
        if _skipped(child):
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        yield from _import_nodes(child)


def _resolve(name: str) -> str | None:
    """The module of both packages that `name` is, or is in; None for any other."""
    known = modules()
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


@cache
def imports(module: str) -> frozenset[str]:
    """The modules of both packages that `module` imports."""
    path = modules()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            # `from a import b`: b is a module of a, or a name defined in a
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules() else base
                     for alias in node.names]
        found |= {m for m in map(_resolve, names) if m is not None}
    found.discard(module)
    return frozenset(found)


def _part_paths() -> list[tuple[str, str]]:
    pairs = [(path, name) for name, part in HOUSE["parts"].items() for path in part["is"]]
    return sorted(pairs, key=lambda pair: -len(pair[0]))      # the longer path has the file


def part_of(module: str) -> str | None:
    rel = modules()[module].relative_to(ROOT).as_posix()
    for path, name in _part_paths():
        if rel == path or (path.endswith("/") and rel.startswith(path)):
            return name
    return None


def part_edges() -> dict[tuple[str, str], list[str]]:
    """(part, part) → the imports between them, ``module -> module``."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module in modules():
        for target in imports(module):
            a, b = part_of(module), part_of(target)
            if a != b:
                edges.setdefault((a, b), []).append(f"{module} -> {target}")
    return edges


def test_every_module_is_on_one_part_and_every_path_exists():
    assert [m for m in modules() if part_of(m) is None] == []
    for name, part in HOUSE["parts"].items():
        for path in part["is"]:
            assert (ROOT / path).exists(), f"{name}: {path} does not exist"


def test_every_import_between_parts_is_a_drawn_arrow():
    drawn = {(a, b) for a, b, *_ in HOUSE["arrows"]}
    undrawn = {edge: how for edge, how in part_edges().items() if edge not in drawn}
    assert undrawn == {}, "draw these arrows in docs/architecture.json (and .md), or remove them"


def test_every_drawn_arrow_is_an_import():
    ideas, edges = set(HOUSE["ideas"]), part_edges()
    missing = [arrow for arrow in HOUSE["arrows"]
               if not {arrow[0], arrow[1]} & ideas and arrow[2:] != ["HTTP only"]
               and (arrow[0], arrow[1]) not in edges]
    assert missing == []
    for a, b, *_ in HOUSE["arrows"]:                # HTTP only: the page and the client
        if {a, b} & ideas or b not in HOUSE["parts"] or a == "Page":
            continue
        if [a, b, "HTTP only"] in HOUSE["arrows"]:
            assert (a, b) not in edges, f"{a} -> {b} is drawn as HTTP only, but imports it"


def test_no_never_is_broken():
    edges = part_edges()
    broken = {f"{a} -> {b} ({why})": edges[a, b] for a, b, why in HOUSE["never"]
              if (a, b) in edges}
    assert broken == {}


def _circles() -> list[set[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in imports(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for module in modules():
        if module not in index:
            visit(module)
    return out


def test_no_import_circle_but_tensor_and_autograd():
    assert _circles() == ALLOWED_CIRCLES


ROUTES = "glassllm_service.routes."


@pytest.mark.parametrize("module", [m for m in modules() if m.startswith(ROUTES)])
def test_no_route_imports_another_route(module):
    assert {m for m in imports(module) if m.startswith(ROUTES)} == set()


def test_no_service_module_imports_a_route_but_the_app_factory():
    service = [m for m in modules() if m.startswith("glassllm_service")
               and not m.startswith(ROUTES) and m != "glassllm_service.app"]
    assert {m: sorted(imports(m)) for m in service
            if any(i.startswith(ROUTES) for i in imports(m))} == {}


def test_no_two_modules_share_a_name():
    """No errors.py twice, no cli.py twice: a name in a traceback or an editor's tab says
    which module it is."""
    seen: dict[str, str] = {}
    for module, path in modules().items():
        if path.name == "__init__.py":
            continue
        assert path.stem not in seen, f"{module} and {seen[path.stem]}"
        seen[path.stem] = module


@pytest.mark.parametrize("package", [m for m, p in modules().items() if p.name == "__init__.py"])
def test_a_package_name_is_never_both_a_module_and_something_else(package):
    """``glassllm.sandbox.expr.parse`` is the function; the module is ``parser``."""
    import importlib

    pkg = importlib.import_module(package)
    for module in modules():
        head, _, child = module.rpartition(".")
        if head == package and hasattr(pkg, child):
            assert getattr(pkg, child) is importlib.import_module(module), module


BOOK = {"glassllm", "glassllm.tensor", "glassllm.grad_mode", "glassllm.autograd",
        "glassllm.shapes", "glassllm.layers", "glassllm.modules", "glassllm.optim",
        "glassllm.gradients", "glassllm.gradients.checks", "glassllm.gradients.paths",
        "glassllm.gradients.dead",
        "glassllm.tokenizer", "glassllm.errors"}
AROUND = ("glassllm.sandbox", "glassllm.training", "glassllm.apps", "glassllm.course",
          "glassllm_service")


@pytest.mark.parametrize("module", sorted(BOOK | {m for m in modules()
                                                  if m.startswith("glassllm.fast")}))
def test_the_book_and_its_fast_forms_import_nothing_around_them(module):
    """A student reads the book without the sandbox, training, the programs or the web.
    One drawn exception: a Tensor's notebook picture imports the display (NumPy only,
    importing nothing of glassllm) inside ``_repr_mimebundle_``, when a notebook asks."""
    allowed = {"glassllm.apps.display"} if module == "glassllm.tensor" else set()
    assert {m for m in imports(module) if m.startswith(AROUND)} - allowed == set()
    assert imports("glassllm.apps.display") == frozenset()


@pytest.mark.parametrize("module", [m for m in modules() if m.startswith("glassllm.")])
def test_nothing_in_the_library_imports_the_service(module):
    assert {m for m in imports(module) if m.startswith("glassllm_service")} == set()
