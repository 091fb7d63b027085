"""The live part (tools/live/, _ext/live_button.py, lib.viz in the browser kernel): everything that needs no
live build. The live build itself is checked by ``make browser-check LIVE=1``; the one test here that needs a
built live site skips without it."""

from __future__ import annotations

import hashlib
import base64
import json
import os
import re
import subprocess
import sys
import zipfile

import pytest

from tools.live import build, find_python, pins, selftest, site, wheel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIVE_CHAPTERS = ("book/galvatron/03_the_search.md", "book/galvatron/05_from_paper_to_practice.md",
                 "book/stragglers/01_the_one_slow_gpu.md", "book/closing/01_one_run.md")
_DIRECTIVE = re.compile(r"^```\{live-widget\}\n(.*?)^```", re.M | re.S)

# A subprocess prelude that makes torch (and the book-only packages) unimportable.
_BLOCK = """
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, _Block())
"""


@pytest.fixture(scope="module")
def whl(tmp_path_factory):
    return wheel.build(ROOT, str(tmp_path_factory.mktemp("wheel")))


# ------------------------------------------------------------------------------------------------ the wheel
def test_wheel_holds_the_torch_free_lib_and_its_data(whl):
    names = zipfile.ZipFile(whl).namelist()
    assert os.path.basename(whl) == wheel.wheel_name()
    assert not [n for n in names if n.startswith(wheel.EXCLUDE)]
    for must in ("lib/__init__.py", "lib/viz.py", "lib/galvatron/widgets.py", "lib/galvatron/search/engine.py",
                 "lib/straggler/widgets.py", "lib/closing/run.py", "lib/hardware.py"):
        assert must in names
    for d in wheel.DATA:
        on_disk = sorted(f for f in os.listdir(os.path.join(ROOT, d)) if os.path.isfile(os.path.join(ROOT, d, f)))
        assert {f"{d}/{f}" for f in on_disk} <= set(names), d
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_wheel_record_matches_its_files_and_builds_reproducibly(whl, tmp_path):
    z = zipfile.ZipFile(whl)
    record = z.read(f"{wheel.NAME}-{wheel.VERSION}.dist-info/RECORD").decode().splitlines()
    assert len(record) == len(z.namelist())
    for line in record:
        path, digest, size = line.rsplit(",", 2)
        if not digest:
            continue
        data = z.read(path)
        want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert digest == f"sha256={want}" and int(size) == len(data), path
    again = wheel.build(ROOT, str(tmp_path))
    assert open(again, "rb").read() == open(whl, "rb").read()


def test_wheel_runs_every_widget_without_torch(whl, tmp_path):
    """Installed on its own (no repository on the path, torch and the book-only packages unimportable), the
    wheel imports every module and answers each live widget's pure function, reading its data files."""
    zipfile.ZipFile(whl).extractall(tmp_path)
    code = _BLOCK.format(blocked=("torch", "pydantic", "filelock", "tqdm", "tools")) + f"""
sys.path.insert(0, {str(tmp_path)!r})
import importlib, pkgutil, lib
assert lib.__file__.startswith({str(tmp_path)!r}), lib.__file__
mods = [m.name for m in pkgutil.walk_packages(lib.__path__, "lib.") if not m.name.endswith("__main__")]
for m in mods:
    importlib.import_module(m)
from lib.galvatron.widgets import PlanSettings, plan_answer, JobSettings, job_answer
from lib.straggler.widgets import StragglerSettings, live_answer
from lib.closing.run import Job, one_run
a = plan_answer(PlanSettings("bert-huge-32", 8, 8.0, "vldb2023"))
assert a.result.feasible and a.result.throughput > 0
j = job_answer(JobSettings("llama3-8b", 16, "h100-sxm-80gb", 64, 2048))
assert j.error is None and j.rows[0]["tokens_per_s_per_gpu"] > 0
from lib.galvatron.stacks import stack_names
assert "nanotron" in stack_names()
jn = job_answer(JobSettings("llama3-8b", 16, "h100-sxm-80gb", 64, 2048, stack="nanotron"))
assert jn.error is None and jn.stack == "nanotron"
c, fig = live_answer(StragglerSettings(n_gpus=1024))
r = one_run(Job())
assert 0 < r.goodput_no_backup < 1
print(len(mods))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) >= 20


def test_wheel_cli_refuses_a_folder_without_lib(tmp_path, capsys):
    assert wheel.main(["--repo", str(tmp_path), "--out", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "lib/" in err and str(tmp_path) in err and "\n" == err[-1] and err.count("\n") == 1


def test_selftest_modules_import_without_numpy():
    code = _BLOCK.format(blocked=("numpy", "torch")) + f"""
sys.path.insert(0, {ROOT!r})
import {", ".join(selftest.NUMPY_FREE)}
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-1500:]
    assert "%pip install -q parallelism-rebuilt-lib\n" in selftest.CODE  # no numpy: it is blocked offline
    assert selftest.TITLE.format(1) != selftest.TITLE.format(2)


# ------------------------------------------------------------------------------ pins, the lock, the site size
def test_numpy_pin_is_one_consistent_url_and_hash():
    assert pins.NUMPY_URL.startswith("https://") and pins.NUMPY_URL.endswith("/" + pins.NUMPY_WHEEL)
    assert f"/v{pins.PYODIDE_VERSION}/" in pins.NUMPY_URL
    assert re.fullmatch(r"[0-9a-f]{64}", pins.NUMPY_SHA256)
    assert pins.NUMPY_WHEEL.startswith("numpy-") and "wasm32" in pins.NUMPY_WHEEL
    # the URL and the hash appear in no other file of tools/ or _ext/: one place
    for folder in ("tools", "_ext"):
        for d, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in files:
                if f.endswith(".py") and f != "pins.py":
                    text = open(os.path.join(d, f)).read()
                    assert pins.NUMPY_SHA256 not in text and "cdn.jsdelivr" not in text, f


def _core_lock(**numpy):
    entry = {"name": "numpy", "version": "2.4.6", "file_name": pins.NUMPY_WHEEL, "sha256": pins.NUMPY_SHA256,
             "depends": [], "imports": ["numpy"], "package_type": "package", "install_dir": "site"}
    entry.update(numpy)
    return {"info": {"python": "3.14.2"}, "packages": {"numpy": entry, "micropip": {"file_name": "m.whl"}}}


def test_core_lock_must_match_the_pins(tmp_path):
    (tmp_path / "pyodide-lock.json").write_text(json.dumps(_core_lock()))
    build.check_core_lock(str(tmp_path))
    (tmp_path / "pyodide-lock.json").write_text(json.dumps(_core_lock(sha256="0" * 64)))
    with pytest.raises(ValueError, match="pins.py pins"):
        build.check_core_lock(str(tmp_path))


def test_cached_core_lock_agrees_with_the_pins():
    """The npm core of a live build done on this machine (skips without one)."""
    core = os.path.join(ROOT, "_build", "live-work", "cache", f"pyodide-{pins.PYODIDE_VERSION}")
    if not os.path.exists(os.path.join(core, "pyodide-lock.json")):
        pytest.skip("no live build here (make book LIVE=1 caches Pyodide's core in _build/live-work)")
    build.check_core_lock(core)


def test_the_solve_starts_empty_and_numpy_comes_back_pinned():
    core = _core_lock()
    assert build.pruned_lock(core)["packages"] == {} and build.pruned_lock(core)["info"] == core["info"]
    solved = {"info": {}, "packages": {"plotly": {"file_name": "../../static/pyodide-lock/plotly.whl",
                                                  "depends": ["narwhals"]}}}
    out = build.add_numpy(solved, core)
    assert out["packages"]["numpy"]["file_name"] == pins.NUMPY_URL
    assert out["packages"]["numpy"]["sha256"] == pins.NUMPY_SHA256
    assert "numpy" not in solved["packages"]  # not changed in place


def _lock(tmp_path, packages):
    p = tmp_path / "pyodide-lock.json"
    p.write_text(json.dumps({"info": {}, "packages": packages}))
    return str(p)


def test_check_lock_allows_only_the_pinned_numpy_outside(tmp_path):
    np_ok = {"file_name": pins.NUMPY_URL, "sha256": pins.NUMPY_SHA256, "depends": []}
    local = {"file_name": "../x/lib.whl", "depends": ["numpy", "plotly"]}
    plotly_local = {"file_name": "../x/plotly.whl", "depends": []}
    ok = _lock(tmp_path, {"numpy": np_ok, "lib": local, "plotly": plotly_local})
    assert site.check_lock(ok, ["lib"]) == {"numpy": pins.NUMPY_URL}
    cdn = "https://cdn.jsdelivr.net/pyodide/v0/full/plotly.whl"
    bad = _lock(tmp_path, {"numpy": np_ok, "lib": local, "plotly": {"file_name": cdn, "depends": []}})
    with pytest.raises(ValueError, match="plotly"):
        site.check_lock(bad, ["lib"])
    moved = _lock(tmp_path, {"numpy": dict(np_ok, file_name="https://elsewhere/numpy.whl"), "lib": local,
                             "plotly": plotly_local})
    with pytest.raises(ValueError, match="numpy URL"):
        site.check_lock(moved, ["lib"])
    rehashed = _lock(tmp_path, {"numpy": dict(np_ok, sha256="1" * 64), "lib": local, "plotly": plotly_local})
    with pytest.raises(ValueError, match="sha256"):
        site.check_lock(rehashed, ["lib"])


def test_site_size_budget(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "big.bin").write_bytes(b"x" * 3_000_000)
    (tmp_path / "small.html").write_bytes(b"x" * 500_000)
    assert site.check_size(str(tmp_path), budget_mb=4) == pytest.approx(3.5)
    with pytest.raises(ValueError, match=r"3\.5 MB, over the 3 MB budget; largest: a/big\.bin \(3\.0 MB\)"):
        site.check_size(str(tmp_path), budget_mb=3)
    assert pins.SITE_BUDGET_MB == 100


def test_built_site_fits_its_budget():
    """The site of the last live build here, live part included (skips without one)."""
    html = os.path.join(ROOT, "_build", "html")
    if not os.path.isdir(os.path.join(html, pins.LIVE_DIR)):
        pytest.skip("no live build here: make book LIVE=1")
    assert site.check_size(html) <= pins.SITE_BUDGET_MB


# ------------------------------------------------------------------------------------------- the button
def test_button_names_the_outside_request_and_hides_until_script(monkeypatch):
    sys.path.insert(0, os.path.join(ROOT, "_ext"))
    import live_button

    h = live_button.button_html('print("a<b")', "../")
    assert 'class="live-run" hidden' in h and 'data-live-root="../"' in h
    assert "print(&quot;a&lt;b&quot;)" in h and live_button.INSTALL in live_button.html.unescape(h)
    assert "cdn.jsdelivr.net" in h and f"about {pins.NUMPY_MB} MB" in h
    assert "http.server" in h  # what to do from file://
    assert h.count("<script>") == 1 and "src=" not in h.split("<script>")[1]  # nothing fetched before a click
    monkeypatch.delenv("BOOK_LIVE", raising=False)
    assert not live_button.live_enabled()
    monkeypatch.setenv("BOOK_LIVE", "1")
    assert live_button.live_enabled()


def test_each_live_chapter_has_one_button_whose_code_runs_on_cpython(monkeypatch):
    """The code behind each chapter's button builds the live widget and draws its figure (CPython here; the
    browser runs the same code)."""
    import IPython.display

    from lib import book

    shown = []
    monkeypatch.setattr(book, "in_ci", lambda: False)
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: shown.extend(a))
    for path in LIVE_CHAPTERS:
        bodies = _DIRECTIVE.findall(open(os.path.join(ROOT, path)).read())
        assert len(bodies) == 1, path
        assert "%pip" not in bodies[0]  # the button adds the install line
        shown.clear()
        exec(compile(bodies[0], path, "exec"), {"display": IPython.display.display})
        assert any(type(o).__name__ in ("VBox", "Box") for o in shown), (path, shown)


# ----------------------------------------------------------------------------- lib.viz in the browser kernel
def _fig():
    import plotly.graph_objects as go

    return go.Figure(go.Scatter(x=[0, 1], y=[1, 2]), layout=dict(title="t"))


def test_viz_draws_the_mime_bundle_only_in_the_browser_kernel(monkeypatch):
    from lib import viz

    html = viz.to_html(_fig(), "f1")
    assert "cdn.plot.ly" in html and html.figure is not None
    assert not hasattr(viz.PlotlyHTML(html), "_repr_mimebundle_")
    monkeypatch.setattr(viz, "in_browser_kernel", lambda: True)
    html = viz.to_html(_fig(), "f1")
    assert "cdn.plot.ly" not in html and 'id="f1"' in html
    obj = viz.PlotlyHTML(html)
    assert obj._repr_html_() is None
    bundle = obj._repr_mimebundle_()
    assert bundle[viz.PLOTLY_MIME]["data"][0]["y"] == [1, 2]
    assert bundle[viz.PLOTLY_MIME]["config"]["displaylogo"] is False
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False: shown.append((obj, raw)))
    assert viz.show(_fig(), "f2") is None
    ((obj, raw),) = shown
    assert raw and viz.PLOTLY_MIME in obj and "text/html" not in obj


# ------------------------------------------------------------------------------ finding the live Python
def _fake_python(folder, name, version):
    p = folder / name
    p.write_text(f"#!/bin/sh\necho {version}\n")
    p.chmod(0o755)
    return str(p)


def test_find_python_takes_the_first_recent_enough(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _fake_python(bin_, "python3", "3 10")
    assert find_python.find(path_env=str(bin_), roots=[]) is None
    want = _fake_python(bin_, "python3.12", "3 12")
    assert find_python.find(path_env=str(bin_), roots=[]) == want
    pyenv = tmp_path / "versions" / "3.13.1" / "bin"
    pyenv.mkdir(parents=True)
    newer = _fake_python(pyenv, "python3", "3 13")
    (bin_ / "python3.12").unlink()
    assert find_python.find(path_env=str(bin_), roots=[str(tmp_path / "versions")]) == newer


def test_find_python_refuses_in_one_line(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path), HOME=str(tmp_path))
    env.pop("PYENV_ROOT", None)
    out = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "live", "find_python.py")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "Python >= 3.12" in out.stderr and "LIVE_PYTHON" in out.stderr


# -------------------------------------------------------------------------------- make and the workflow
def _make_n(*args):
    out = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, MAKEFLAGS=""))
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_make_book_has_no_live_part_unless_asked():
    plain = _make_n("book", "STAMP=/dev/null")
    assert "live" not in plain and "BOOK_LIVE" not in plain
    live = _make_n("book", "LIVE=1", "STAMP=/dev/null", "LIVE_STAMP=_build/no-such-stamp")
    assert "live" in live and "find_python.py" in live
    assert "tools.live.build" in _make_n("live", "LIVE_STAMP=/dev/null")
    assert "--live" in _make_n("browser-check", "LIVE=1", "STAMP=/dev/null")
    assert "--live" not in _make_n("browser-check", "STAMP=/dev/null")


def test_publish_workflow_builds_live_and_runs_each_widget_before_deploying():
    text = open(os.path.join(ROOT, ".github", "workflows", "book.yml")).read()
    assert "make book LIVE=1" in text and "LIVE_ONLINE=1" in text
    assert text.index("LIVE_ONLINE=1") < text.index("upload-pages-artifact")


# --------------------------------------------------------------------- end to end, on a tiny live book
_TINY_CONFIG = """title: tiny live book
only_build_toc_files: true
execute:
  execute_notebooks: "off"
sphinx:
  local_extensions:
    live_button: {ext}
"""
_TINY_PAGE = """# A page with a widget

The static twin is the page's content.

```{{live-widget}}
{code}
```
"""


@pytest.mark.slow
def test_tiny_live_book_end_to_end_offline(tmp_path):
    """A one-page book with the button, built live, passes the live browser check offline: the self-test
    (kernel, wheel, imports, a slider redrawing a figure) and the button (nothing before the click, then only
    the pinned numpy wheel asked for, blocked). Needs the live venv (make live-venv), npm and Chromium."""
    live_py = os.path.join(ROOT, ".venv-live", "bin", "python")
    jb = os.path.join(os.path.dirname(sys.executable), "jupyter-book")
    from tools.browser_check import CHROMIUM_ARGS, find_chromium, serve

    if not os.path.exists(live_py) or subprocess.run([live_py, "-c", "import jupyterlite_core"]).returncode:
        pytest.skip("no live venv here (make live-venv)")
    if find_chromium() is None or not os.path.exists(jb):
        pytest.skip("needs Chromium and jupyter-book")
    book = tmp_path / "book"
    (book / "sub").mkdir(parents=True)
    (book / "_config.yml").write_text(_TINY_CONFIG.format(ext=os.path.join(ROOT, "_ext")))
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n- file: sub/page\n")
    (book / "intro.md").write_text("# Tiny\n")
    body = "from lib.straggler.widgets import StragglerExplorer\n\nStragglerExplorer(n_gpus=1024).show()"
    (book / "sub" / "page.md").write_text(_TINY_PAGE.format(code=body))
    env = dict(os.environ, BOOK_LIVE="1", PYTHONPATH=ROOT)
    out = subprocess.run([jb, "build", str(book), "-W"], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    html_root = str(book / "_build" / "html")
    work = os.path.join(ROOT, "_build", "live-work")  # its npm cache is reused
    out = subprocess.run([live_py, "-m", "tools.live.build", "--site", html_root, "--work", work], env=env,
                         capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "site: " in out.stdout and site.check_size(html_root) <= pins.SITE_BUDGET_MB
    from playwright.sync_api import sync_playwright

    from tools.live import browser as live

    httpd, base = serve(html_root)
    try:
        with sync_playwright() as pw:
            b = pw.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
            try:
                failures = live.run(b, base, html_root, online=False, timeout_s=400, echo=False)
            finally:
                b.close()
    finally:
        httpd.shutdown()
    assert failures == []
