"""Issue 29: a failed write on a real disk leaves nothing half-written behind, and the error names the file.

Two real limits, beside the monkeypatched ``fsync`` of ``test_readback_and_outputs``:

- a full disk: a 64 KiB tmpfs mounted in a private mount namespace (``unshare -rm``, no root needed where user
  namespaces are allowed; skipped, saying why, where they are not). ENOSPC, as on a real full disk;
- a file-size limit (``RLIMIT_FSIZE``, any Linux): the write past it fails with EFBIG, the same failure path.

Each runs a tool's command line in a child process and lists the folder afterwards: no temporary file, no
partial notebook, no half file under the target's name.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests import ROOT

PLAN_CMD = [sys.executable, "-m", "lib.galvatron", "plan", "--search", "bert-huge-32", "--gpus", "8",
            "--budget-gb", "8"]


def _unshare_works(tmp_path) -> str:
    """Empty when a tmpfs can be mounted in a private namespace; else why not."""
    if shutil.which("unshare") is None:
        return "no unshare(1) on this machine"
    d = tmp_path / "probe"
    d.mkdir()
    p = subprocess.run(["unshare", "-rm", "sh", "-c", 'mount -t tmpfs -o size=64k tmpfs "$1"', "sh", str(d)],
                       capture_output=True, text=True, timeout=30)
    return "" if p.returncode == 0 else f"cannot mount a tmpfs in a user namespace: {p.stderr.strip()[:200]}"


def _on_a_full_disk(tmp_path, script: str) -> dict:
    """Run ``script`` (Python; ``DISK`` in its environment is a 64 KiB tmpfs, filled up to its last bytes
    unless the script says otherwise) in a private mount namespace; it prints one JSON object, returned."""
    why = _unshare_works(tmp_path)
    if why:
        pytest.skip(why)
    disk = tmp_path / "disk"
    disk.mkdir()
    p = subprocess.run(["unshare", "-rm", "sh", "-c", 'mount -t tmpfs -o size=64k tmpfs "$1" && exec "$2" -c "$3"',
                        "sh", str(disk), sys.executable, textwrap.dedent(script)], cwd=ROOT, capture_output=True,
                       text=True, timeout=240, env=dict(os.environ, PYTHONPATH=ROOT, DISK=str(disk)))
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


FILL = """
import json, os, subprocess, sys
DISK = os.environ["DISK"]
def fill(leave=0):
    st = os.statvfs(DISK)
    with open(os.path.join(DISK, "filler"), "wb") as f:
        try:
            f.write(b"x" * max(0, st.f_bavail * st.f_frsize - leave))
            f.flush()
            os.fsync(f.fileno())
        except OSError:
            pass
def listing():
    return sorted(os.path.relpath(os.path.join(r, n), DISK) for r, ds, fs in os.walk(DISK) for n in ds + fs)
"""


def test_atomic_write_on_a_full_disk_leaves_nothing(tmp_path):
    out = _on_a_full_disk(tmp_path, FILL + """
from lib import atomic
target = os.path.join(DISK, "sub", "big.bin")
try:
    atomic.write_bytes(target, b"y" * 200_000)  # three times the disk
    res = {"raised": None}
except OSError as e:
    res = {"raised": [e.errno, e.filename]}
print(json.dumps({**res, "files": listing()}))
""")
    import errno

    assert out["raised"] == [errno.ENOSPC, os.path.join(str(tmp_path / "disk"), "sub", "big.bin")], out
    assert out["files"] == ["sub"], out  # the folder it made; no temporary file, no half file


def test_a_cli_output_on_a_full_disk_is_one_line_and_leaves_nothing(tmp_path):
    out = _on_a_full_disk(tmp_path, FILL + f"""
fill()
p = subprocess.run({PLAN_CMD!r} + ["--out", os.path.join(DISK, "plan.json")], capture_output=True, text=True)
print(json.dumps({{"rc": p.returncode, "err": p.stderr.splitlines(), "files": listing()}}))
""")
    assert out["rc"] == 2 and len(out["err"]) == 1, out
    assert out["err"][0].startswith("error: ") and "plan.json" in out["err"][0] and "No space left" in out["err"][0]
    assert out["files"] == ["filler"], out


def test_a_rerun_chapter_on_a_full_disk_leaves_no_notebook(tmp_path):
    """A chapter whose executed notebook outgrows the disk: the batch stops with the notebook's name, and
    neither the notebook nor papermill's partial file is left (issue 29: a half-written .ipynb was)."""
    src = tmp_path / "src"
    (src / "book" / "x").mkdir(parents=True)
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": "a", "metadata": {"tags": ["parameters"]},
                     "outputs": [], "source": "n = 1"},
                    {"cell_type": "code", "execution_count": None, "id": "b", "metadata": {}, "outputs": [],
                     "source": "print('z' * 300_000)"}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    (src / "book" / "x" / "big.ipynb").write_text(json.dumps(nb))
    out = _on_a_full_disk(tmp_path, FILL + f"""
from lib.rerun import execute
execute.ROOT = {str(src)!r}
run = os.path.join(DISK, "run")
os.makedirs(run)
try:
    execute.run_chapter("book/x/big", {{}}, run, progress=False)
    res = {{"raised": None}}
except OSError as e:
    res = {{"raised": [e.errno, e.filename]}}
print(json.dumps({{**res, "files": [f for f in listing() if not f.startswith("run/logs")]}}))
""")
    import errno

    assert out["raised"] == [errno.ENOSPC, os.path.join(str(tmp_path / "disk"), "run", "book", "x", "big.ipynb")], out
    assert out["files"] == ["run", "run/book", "run/book/x"], out


def _with_file_size_limit(script: str, limit: int) -> subprocess.CompletedProcess:
    """``script`` in a child whose files may not grow past ``limit`` bytes (SIGXFSZ ignored: the write fails
    with EFBIG instead of killing the process)."""
    def limit_files():
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHONPATH=ROOT), preexec_fn=limit_files)


def test_atomic_write_past_the_file_size_limit_leaves_nothing(tmp_path):
    target = tmp_path / "big.bin"
    target.write_bytes(b"old")
    p = _with_file_size_limit(f"""
        import json
        from lib import atomic
        try:
            atomic.write_bytes({str(target)!r}, b"y" * 100_000)
        except OSError as e:
            print(json.dumps([e.errno, e.filename]))
        """, 10_000)
    import errno

    assert json.loads(p.stdout) == [errno.EFBIG, str(target)], p.stderr[-2000:]
    assert sorted(os.listdir(tmp_path)) == ["big.bin"] and target.read_bytes() == b"old"  # the old file, whole


def test_a_cli_output_past_the_file_size_limit_is_one_line(tmp_path):
    p = _with_file_size_limit(f"""
        import subprocess, sys
        sys.exit(subprocess.run({PLAN_CMD!r} + ["--out", {str(tmp_path / "plan.json")!r}]).returncode)
        """, 100)  # the plan is some 600 bytes
    err = p.stderr.splitlines()
    assert p.returncode == 2 and len(err) == 1 and err[0].startswith("error: "), p.stderr[-2000:]
    assert "plan.json" in err[0] and "too large" in err[0].lower(), err
    assert os.listdir(tmp_path) == []
