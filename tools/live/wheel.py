"""``lib``'s torch-free parts as a pure-Python wheel, built from the repository with the standard library only.

Left out: the packages that need torch or a shell (:data:`EXCLUDE`). Put in: the data files the kept modules
read (:data:`DATA`), at ``data/...`` beside ``lib/`` in site-packages, where ``lib.hardware`` and
``lib.galvatron.search.profiles`` look for them (``<lib's parent>/data``). The wheel is reproducible: sorted
entries, a fixed timestamp.

    python -m tools.live.wheel --out _build/live-wheel
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import sys
import zipfile

NAME = "parallelism_rebuilt_lib"
VERSION = "0.1.0"
#: Packages under lib/ that need torch (or start processes) and cannot run in the browser.
EXCLUDE = ("lib/placement/", "lib/galvatron/runtime/", "lib/rerun/", "lib/gpt.py",
           # the published-runs readers and what builds on them (pydantic, tqdm): the book's, not a widget's
           "lib/galvatron/published.py", "lib/galvatron/validate.py", "lib/galvatron/practice_report.py",
           "lib/galvatron/practice_figures.py", "lib/galvatron/exercises_practice.py",
           "lib/galvatron/practice_picks.py", "lib/galvatron/playbook_report.py",
           # files read back by the command-line tools (pydantic)
           "lib/readback.py", "lib/runlog_schema.py",
           # Part III against production: the observations' reader and what builds on it (pydantic)
           "lib/straggler/production.py", "lib/straggler/predict.py", "lib/straggler/production_report.py",
           "lib/straggler/production_figures.py", "lib/straggler/production_cli.py")
#: Data folders the kept modules read.
DATA = ("data/galvatron", "data/hardware", "data/production", "data/published_runs", "data/stacks")
REQUIRES = ("numpy", "plotly")
_EPOCH = (1980, 1, 1, 0, 0, 0)


def wheel_name() -> str:
    return f"{NAME}-{VERSION}-py3-none-any.whl"


def wheel_files(repo: str) -> list[str]:
    """Repository-relative paths that go into the wheel, sorted."""
    out = []
    for top in ("lib", *DATA):
        root = os.path.join(repo, top)
        if not os.path.isdir(root):
            raise FileNotFoundError(f"wheel: {top}/ not found under {repo}; run from the repository root")
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            for f in files:
                rel = os.path.relpath(os.path.join(d, f), repo).replace(os.sep, "/")
                if top == "lib" and not f.endswith(".py"):
                    continue
                if any(rel.startswith(e) for e in EXCLUDE):
                    continue
                out.append(rel)
    return sorted(out)


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build(repo: str, out_dir: str) -> str:
    """Write the wheel into ``out_dir`` (atomically) and return its path."""
    os.makedirs(out_dir, exist_ok=True)
    dist = f"{NAME}-{VERSION}.dist-info"
    entries = [(rel, open(os.path.join(repo, rel), "rb").read()) for rel in wheel_files(repo)]
    meta = "\n".join(["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {VERSION}",
                      "Summary: The torch-free part of Parallelism, Rebuilt's lib, for the browser kernel",
                      *(f"Requires-Dist: {r}" for r in REQUIRES), ""]).encode()
    wheel = b"Wheel-Version: 1.0\nGenerator: tools.live.wheel\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entries += [(f"{dist}/METADATA", meta), (f"{dist}/WHEEL", wheel), (f"{dist}/top_level.txt", b"data\nlib\n")]
    record = "\n".join([_record_line(p, d) for p, d in entries] + [f"{dist}/RECORD,,", ""]).encode()
    entries.append((f"{dist}/RECORD", record))
    path = os.path.join(out_dir, wheel_name())
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for rel, data in entries:
            info = zipfile.ZipInfo(rel, date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, path)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Build lib's torch-free wheel from the repository.")
    ap.add_argument("--repo", default=".", help="the repository root (default: .)")
    ap.add_argument("--out", required=True, help="folder for the wheel")
    a = ap.parse_args(argv)
    try:
        print(build(a.repo, a.out))
    except (FileNotFoundError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
