"""Issue 29: ``make rerun`` and ``make book-from`` hand every value to ``python -m lib.rerun`` as one argument,
as typed, and say the tool's own exit code and what it means (GNU make exits 2 whenever a recipe fails, so the
code cannot pass through make; the README says to call ``python -m lib.rerun`` directly when it matters).

The recipes are run for real with ``PY`` set to a stand-in that records its arguments and exits with a chosen
code, in a scratch folder (``make -f <repo>/Makefile``), so nothing of the repository is touched."""

import json
import os
import shlex
import shutil
import subprocess

import pytest

from tests import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")

MAKEFILE = os.path.join(ROOT, "Makefile")
HOSTILE = ["a b/run 1", "it's", 'say "hi"', "cost $HOME", "$(shell echo x)", "`id`", "a;b", "a\\b", "x,y"]


def _make(tmp_path, target, rc=0, **variables):
    """``make target VAR=value ...`` with the stand-in python: (make's CompletedProcess, the argv it got)."""
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\npython3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' \"$@\" "
                    "> \"$ARGV_OUT\"\nexit \"$FAKE_RC\"\n")
    fake.chmod(0o755)
    out = tmp_path / "argv.json"
    argv = ["make", "-s", "-f", MAKEFILE, target, "STAMP=", f"PY={fake}",
            *[f"{k}={v}" for k, v in variables.items()]]
    p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, ARGV_OUT=str(out), FAKE_RC=str(rc)))
    return p, (json.loads(out.read_text()) if out.exists() else None)


@pytest.mark.parametrize("value", HOSTILE)
def test_book_from_passes_run_as_one_argument(tmp_path, value):
    p, got = _make(tmp_path, "book-from", RUN=value)
    assert p.returncode == 0, p.stderr
    assert got == ["-m", "lib.rerun", "--book-from", value]


@pytest.mark.parametrize("value", HOSTILE)
def test_rerun_passes_params_and_each_chapter_as_one_argument(tmp_path, value):
    word = value.replace(" ", "_")  # CHAPTERS is a list of words: a space separates two chapters
    p, got = _make(tmp_path, "rerun", PARAMS=value, CHAPTERS=f"book/a {word}")
    assert p.returncode == 0, p.stderr
    assert got == ["-m", "lib.rerun", "--params", value, "--chapters", "book/a", word]
    p, got = _make(tmp_path, "rerun", PARAMS="cpu")
    assert got == ["-m", "lib.rerun", "--params", "cpu"]  # no --chapters: every chapter


@pytest.mark.parametrize("target", ["rerun", "book-from"])
@pytest.mark.parametrize("rc, meaning", [(1, "a chapter or the build failed"),
                                         (2, "a mistake in the arguments or files"),
                                         (3, "stopped by a signal or a crash")])
def test_a_failure_says_the_tools_own_code_and_what_it_means(tmp_path, target, rc, meaning):
    p, _ = _make(tmp_path, target, rc=rc, RUN="r", PARAMS="cpu")
    assert p.returncode == 2  # make's own code for any failed recipe, whatever the tool's
    line = next(x for x in p.stderr.splitlines() if x.startswith(f"make {target}:"))
    assert f"python -m lib.rerun exited {rc}: {meaning}" in line, p.stderr
    assert "run python -m lib.rerun directly" in line


def test_make_n_shows_one_quoted_argument():
    p = subprocess.run(["make", "-n", "-f", MAKEFILE, "book-from", "RUN=a b/run 1", "STAMP="], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    line = next(x for x in p.stdout.splitlines() if "--book-from" in x)
    words = shlex.split(line.split("; rc=")[0])
    assert words[-2:] == ["--book-from", "a b/run 1"], line


def test_readme_says_to_call_the_tool_for_its_exit_code():
    text = " ".join(open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().split())
    assert "make itself exits 2" in text and "call `python -m lib.rerun` directly when the exit code matters" in text
