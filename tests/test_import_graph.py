"""No module of lib/ is part of an import circle (tools/import_graph.py reads every import with ast, function-level
ones included), the search never imports the runtime, and the walker itself finds a circle when there is one."""

import os

from tests import ROOT
from tools.import_graph import circles, graph

LIB = os.path.join(ROOT, "lib")


def test_lib_has_no_import_circle():
    found = circles(graph(LIB))
    assert found == [], "import circles in lib/ (modules that import each other): " + "; ".join(map(", ".join, found))


def test_the_two_judges_are_independent_where_they_should_be():
    g = graph(LIB)
    search = [m for m in g if m.split(".")[:3] == ["lib", "galvatron", "search"]]
    assert search and not any(t.split(".")[:3] == ["lib", "galvatron", "runtime"] for m in search for t in g[m])
    assert "lib.straggler.cli" not in g["lib.straggler.model"]  # the model does not know its command line
    assert not any(t.startswith(("lib.galvatron.runtime.jobs", "lib.galvatron.runtime.profiler"))
                   for t in g["lib.galvatron.runtime.processes"])


def _write(root, files: dict):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def test_the_walker_finds_circles_at_module_and_function_level(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",                            # a -> b (b is a module of pkg)
        "pkg/b.py": "def f():\n    from .a import x\n",                # b -> a, inside a function
        "pkg/c.py": "import pkg.sub.d\n",                             # c -> sub.d
        "pkg/sub/__init__.py": "from . import d\n",                    # sub -> sub.d: not a circle
        "pkg/sub/d.py": "import os\nfrom ..a import y\n",              # d -> a
        "pkg/e.py": "if True:\n    from pkg.sub import d as dd\n",     # e -> sub.d
        "pkg/notes/x.py": "import pkg.a\n",                             # no __init__: not a package, skipped
    })
    g = graph(str(tmp_path / "pkg"))
    assert g["pkg.a"] == {"pkg.b"} and g["pkg.b"] == {"pkg.a"}
    assert g["pkg.c"] == {"pkg.sub.d"} and g["pkg.sub"] == {"pkg.sub.d"} and g["pkg.e"] == {"pkg.sub.d"}
    assert g["pkg.sub.d"] == {"pkg.a"} and "pkg.notes.x" not in g
    assert circles(g) == [["pkg.a", "pkg.b"]]
    _write(tmp_path, {"pkg/b.py": "X = 1\n"})   # opened: no circle left
    assert circles(graph(str(tmp_path / "pkg"))) == []


def test_a_longer_circle_is_one_component():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
