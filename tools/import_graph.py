"""The import graph of a package, read with ``ast`` (nothing is imported), and its circles.

Every ``import`` and ``from ... import`` in a module counts, at module level or inside a function, a class or an
``if``: a function-level import is still a module needing another, and the circles this check was written
against (the straggler model importing its CLI in a ``__main__`` block, the runtime's launcher importing its
jobs inside a function) were all function-level. Relative imports are resolved against the module's package; ``from P import
m`` counts as importing ``P.m`` when ``m`` is a module of ``P``, else as importing ``P``. A package's
``__init__`` is the node ``P``; importing ``P.m`` does not add an edge to ``P`` (Python runs the package's
``__init__`` first, which is not a circle unless that ``__init__`` imports back). Usage:

    python tools/import_graph.py [lib]   # prints every circle, exit 1 if there is one
"""

from __future__ import annotations

import ast
import os
import sys


def modules(root: str) -> dict[str, str]:
    """Dotted module name -> file, for every ``.py`` under the package folder ``root`` (its parent on the path)."""
    base = os.path.dirname(os.path.abspath(root))
    out = {}
    for folder, dirs, files in os.walk(os.path.abspath(root)):
        dirs[:] = sorted(d for d in dirs if os.path.exists(os.path.join(folder, d, "__init__.py")))
        for f in sorted(files):
            if f.endswith(".py"):
                parts = os.path.relpath(os.path.join(folder, f), base)[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                out[".".join(parts)] = os.path.join(folder, f)
    return out


def imports(name: str, path: str, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` (file ``path``) imports, anywhere in its body."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:  # import a.b.c of a module a.b that has no c: the edge goes to a.b
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def graph(root: str) -> dict[str, set[str]]:
    mods = modules(root)
    return {m: imports(m, p, set(mods)) for m, p in mods.items()}


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted; a module importing
    itself is not counted (``imports`` drops such edges)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(g) + 100))
    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def main(argv: list[str]) -> int:
    root = argv[0] if argv else os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
    found = circles(graph(root))
    for c in found:
        print("import circle among: " + ", ".join(c))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
