"""Every version, URL and hash the live build depends on, in one place.

The live part is served from the built site, with one exception: Pyodide's numpy wheel is built for
WebAssembly and is on no package registry, so the page fetches it from Pyodide's CDN at first use. Its URL
and sha256 are pinned here; the live build refuses to finish if the Pyodide lock file disagrees, and Pyodide
itself checks the hash when it loads the wheel.
"""

from __future__ import annotations

#: The Python the live tooling needs (the lock add-on of jupyterlite-pyodide-kernel needs >= 3.12).
LIVE_PYTHON_MIN = (3, 12)

#: Packages of the live tooling, installed from PyPI into the live venv (.venv-live), never the book's venv.
LIVE_TOOLING = (
    "jupyterlite-core==0.8.6",
    "jupyterlite-pyodide-kernel[lock]==0.8.6",
    "ipywidgets==8.1.8",
    "jupyterlab_widgets==3.0.16",
    "plotly==6.5.0",
)

#: Pyodide's core (interpreter, standard library, lock file) from the npm package ``pyodide``.
PYODIDE_NPM = "pyodide"
PYODIDE_VERSION = "314.0.6"

#: Pure-Python packages the browser kernel gets, locked from PyPI at build time and served from the site.
KERNEL_SPECS = ("ipywidgets==8.1.8", "plotly==6.5.0", "micropip", "packaging")

#: The one outside request a live page makes: Pyodide's numpy wheel (about 3 MB), at the reader's first run.
NUMPY_WHEEL = "numpy-2.4.6-cp314-cp314-pyemscripten_2026_0_wasm32.whl"
NUMPY_URL = f"https://cdn.jsdelivr.net/pyodide/v{PYODIDE_VERSION}/full/{NUMPY_WHEEL}"
NUMPY_SHA256 = "32959d4137cec8143d75016d029281df3d2e80a232896ed903c2b59e1c44ee9f"
NUMPY_MB = 3

#: Where the live part sits in the built site (``_build/html/live/``).
LIVE_DIR = "live"

#: The whole downloadable site, live part included, in MB (10^6 bytes).
SITE_BUDGET_MB = 100.0


if __name__ == "__main__":  # the Makefile installs the live tooling from this list
    print("\n".join(LIVE_TOOLING))
