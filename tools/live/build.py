"""Build the live part of the book into a built site: ``<site>/live/`` (JupyterLite's REPL with Pyodide and
``lib``'s wheel), every asset served from the site but Pyodide's numpy wheel (tools/live/pins.py).

Run with the live venv's Python (``make book LIVE=1`` does it after the book is built):

    .venv-live/bin/python -m tools.live.build --site _build/html

Steps: the wheel (tools/live/wheel.py); Pyodide's core from the npm package (``npm pack``, cached under
``_build/live-cache``); ``jupyter lite build`` with the lock add-on, which locks the kernel's pure-Python
packages from PyPI and serves them from the site; then the checks: the lock asks the outside world only for
the pinned numpy wheel, and the whole site fits its budget.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile

from tools.live import pins, site, wheel

#: What the browser kernel loads: the kernel's own packages, then the book's.
PREFETCH = ("ipykernel", "comm", "pyodide-kernel", "ipython")
NEEDED = (*PREFETCH, "piplite", "micropip", "ipywidgets", "plotly", wheel.NAME.replace("_", "-"))


#: JupyterLab plugins the REPL does not need; this one fails to activate there (no notebook tracker in a
#: REPL-only build) and logs an error in the console of every live page.
DISABLED_PLUGINS = ("@jupyterlab/codemirror-extension:commands",)


def lite_config(wheel_path: str, output_dir: str) -> dict:
    """jupyter_lite_config.json: the REPL app only, no source maps, the lock add-on with the book's wheel."""
    return {
        "LiteBuildConfig": {"apps": ["repl"], "no_sourcemaps": True, "no_unused_shared_packages": True,
                            "output_dir": output_dir},
        # numpy is left out of the solve (it is on no registry) and added back by add_numpy()
        "PyodideLockAddon": {"enabled": True, "specs": list(pins.KERNEL_SPECS), "excludes_extra": ["numpy"],
                             "wheels": [wheel_path], "prefetch_extra": []},
    }


def fetch_pyodide(cache: str) -> str:
    """Pyodide's core from npm (``npm pack pyodide@VERSION``), unpacked once into ``cache``; its folder."""
    out = os.path.join(cache, f"pyodide-{pins.PYODIDE_VERSION}")
    if os.path.exists(os.path.join(out, "pyodide-lock.json")):
        return out
    if shutil.which("npm") is None:
        raise RuntimeError("live: npm not found; the live build takes Pyodide's core from the npm package "
                           f"{pins.PYODIDE_NPM}@{pins.PYODIDE_VERSION}")
    os.makedirs(cache, exist_ok=True)
    tgz = subprocess.run(["npm", "pack", "--silent", f"{pins.PYODIDE_NPM}@{pins.PYODIDE_VERSION}"], cwd=cache,
                         check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(os.path.join(cache, tgz)) as t:
        t.extractall(tmp, filter="data")
    os.replace(os.path.join(tmp, "package"), out)
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def check_core_lock(pyodide_dir: str) -> None:
    """The npm core's lock names the pinned numpy wheel with the pinned hash (else the pins are stale)."""
    with open(os.path.join(pyodide_dir, "pyodide-lock.json")) as f:
        np_entry = json.load(f)["packages"]["numpy"]
    if (np_entry["file_name"], np_entry["sha256"]) != (pins.NUMPY_WHEEL, pins.NUMPY_SHA256):
        raise ValueError(f"live: Pyodide {pins.PYODIDE_VERSION} locks numpy as {np_entry['file_name']} "
                         f"{np_entry['sha256']}; tools/live/pins.py pins {pins.NUMPY_WHEEL} {pins.NUMPY_SHA256}")


def pruned_lock(core_lock: dict) -> dict:
    """The lock the solve starts from: Pyodide's own, with no packages. Every package the kernel needs is then
    solved from PyPI and served from the site (the npm core ships none of Pyodide's wheels, and the solve
    would otherwise fetch them from Pyodide's CDN)."""
    return {**core_lock, "packages": {}}


def add_numpy(lock: dict, core_lock: dict) -> dict:
    """``lock`` with Pyodide's numpy entry at its pinned CDN URL: the one outside request (tools/live/pins.py).
    The book's wheel does not depend on it in the lock, so the wheel installs offline; the chapters' live
    code asks for numpy itself."""
    entry = dict(core_lock["packages"]["numpy"], file_name=pins.NUMPY_URL)
    return {**lock, "packages": {**lock["packages"], "numpy": entry}}


def build(repo: str, site_dir: str, work: str) -> str:
    out = os.path.abspath(os.path.join(site_dir, pins.LIVE_DIR))
    lite = os.path.join(work, "lite")
    shutil.rmtree(lite, ignore_errors=True)
    os.makedirs(os.path.join(lite, "static"))
    whl = wheel.build(repo, os.path.join(work, "wheels"))
    core = fetch_pyodide(os.path.join(work, "cache"))
    check_core_lock(core)
    shutil.copytree(core, os.path.join(lite, "static", "pyodide"),
                    ignore=shutil.ignore_patterns("*.map", "*.d.ts", "console*.html", "README.md"))
    lock_in = os.path.join(lite, "static", "pyodide", "pyodide-lock.json")
    with open(lock_in) as f:
        core_lock = json.load(f)
    with open(lock_in, "w") as f:
        json.dump(pruned_lock(core_lock), f)
    with open(os.path.join(lite, "jupyter-lite.json"), "w") as f:
        json.dump({"jupyter-lite-schema-version": 0,
                   "jupyter-config-data": {"disabledExtensions": list(DISABLED_PLUGINS)}}, f, indent=1)
    with open(os.path.join(lite, "jupyter_lite_config.json"), "w") as f:
        json.dump(lite_config(os.path.abspath(whl), out), f, indent=1)
    shutil.rmtree(out, ignore_errors=True)
    jupyter = os.path.join(os.path.dirname(sys.executable), "jupyter")
    subprocess.run([jupyter, "lite", "build", "--lite-dir", lite, "--output-dir", out], check=True, cwd=lite)
    lock_out = os.path.join(out, "static", "pyodide-lock", "pyodide-lock.json")
    with open(lock_out) as f:
        lock = add_numpy(json.load(f), core_lock)
    with open(lock_out, "w") as f:
        json.dump(lock, f, indent=1)
    outside = site.check_lock(lock_out, (*NEEDED, "numpy"))
    print(f"live: {out} built; outside requests: {outside or 'none'}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Build the live part of the book into a built site.")
    ap.add_argument("--site", default="_build/html", help="the built site (default: _build/html)")
    ap.add_argument("--repo", default=".", help="the repository root (default: .)")
    ap.add_argument("--work", default="_build/live-work", help="scratch and cache folder")
    a = ap.parse_args(argv)
    if sys.version_info[:2] < pins.LIVE_PYTHON_MIN:
        print(f"error: the live build needs Python >= {'.'.join(map(str, pins.LIVE_PYTHON_MIN))}; "
              f"this is {sys.version.split()[0]}", file=sys.stderr)
        return 2
    try:
        build(a.repo, a.site, os.path.abspath(a.work))
        mb = site.check_size(a.site)
    except (ValueError, RuntimeError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"site: {a.site} is {mb:.1f} MB (budget {pins.SITE_BUDGET_MB:g} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
