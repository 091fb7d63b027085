"""Find a Python for the live tooling (>= 3.12, for the lock add-on of jupyterlite-pyodide-kernel): print its
path, or say in one line what was looked for and exit 2. Standard library only (runs on any Python 3).

    python tools/live/find_python.py
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

MIN = (3, 12)
NAMES = ("python3.14", "python3.13", "python3.12", "python3")


def pyenv_roots() -> list[str]:
    """Where pyenv keeps its Pythons: $PYENV_ROOT/versions, ~/.pyenv/versions."""
    roots = [os.path.join(os.path.expanduser("~"), ".pyenv", "versions")]
    if os.environ.get("PYENV_ROOT"):
        roots.insert(0, os.path.join(os.environ["PYENV_ROOT"], "versions"))
    return roots


def candidates(path_env: str | None = None, roots: list[str] | None = None) -> list[str]:
    """Executables to try, in order: versioned names on PATH, then pyenv's versions (newest first)."""
    out = []
    for n in NAMES:
        p = shutil.which(n, path=path_env)
        if p:
            out.append(p)
    for r in pyenv_roots() if roots is None else roots:
        found = glob.glob(os.path.join(r, "3.*", "bin", "python3"))
        out += sorted(found, key=lambda p: _version_key(p.split(os.sep)[-3]), reverse=True)
    return list(dict.fromkeys(out))


def _version_key(v: str) -> tuple:
    return tuple(int(x) if x.isdigit() else -1 for x in v.split(".")[:3])


def version_of(exe: str) -> tuple[int, int] | None:
    try:
        r = subprocess.run([exe, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                           text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = r.stdout.split()
    return (int(parts[0]), int(parts[1])) if r.returncode == 0 and len(parts) == 2 else None


def find(path_env: str | None = None, roots: list[str] | None = None) -> str | None:
    for exe in candidates(path_env, roots):
        v = version_of(exe)
        if v is not None and v >= MIN:
            return exe
    return None


def main() -> int:
    exe = find()
    if exe is None:
        need = ".".join(map(str, MIN))
        print(f"live: no Python >= {need} found (looked for {', '.join(NAMES)} on PATH and under "
              f"~/.pyenv/versions); install one or set LIVE_PYTHON=/path/to/python{need}", file=sys.stderr)
        return 2
    print(exe)
    return 0


if __name__ == "__main__":
    sys.exit(main())
