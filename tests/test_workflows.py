"""The GitHub Actions workflows that test, build and publish the book: what they run, and actionlint passes."""

import os
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WF = os.path.join(ROOT, ".github", "workflows")


def _load(name):
    with open(os.path.join(WF, name), encoding="utf-8") as f:
        data = yaml.safe_load(f)
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def _runs(job):
    return "\n".join(s.get("run", "") for s in job["steps"])


def _uses(job):
    return [s.get("uses", "").split("@")[0] for s in job["steps"]]


def test_pull_requests_test_and_build_strictly_and_main_publishes():
    wf = _load("book.yml")
    assert "pull_request" in wf["on"] and wf["on"]["push"]["branches"] == ["main"]
    build = wf["jobs"]["build"]
    runs = _runs(build)
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        assert "make test" in f.read()  # the README's test command ...
    assert "make test" in runs and "make book" in runs and "make browser-check" in runs  # ... and the strict build
    assert "actions/upload-pages-artifact" in _uses(build)
    upload = next(s for s in build["steps"] if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert "refs/heads/main" in upload["if"] and upload["with"]["path"] == "_build/html"
    deploy = wf["jobs"]["deploy"]
    assert deploy["needs"] == "build" and "actions/deploy-pages" in _uses(deploy)
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}


def test_a_manual_workflow_builds_from_a_rerun_without_executing():
    wf = _load("book-from-rerun.yml")
    assert list(wf["on"]) == ["workflow_dispatch"] and "run" in wf["on"]["workflow_dispatch"]["inputs"]
    runs = _runs(wf["jobs"]["build"])
    assert "make book-from" in runs
    assert not any(line.strip() == "make book" for line in runs.splitlines())  # nothing executed again


def test_makefile_book_uses_the_strict_flags():
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        make = f.read()
    assert "jupyter-book build . --all -W -n --keep-going" in make


def _actionlint():
    here = os.path.join(os.path.dirname(sys.executable), "actionlint")
    return here if os.path.exists(here) else shutil.which("actionlint")


@pytest.mark.skipif(_actionlint() is None, reason="actionlint not installed (requirements.txt installs it on Linux x86-64)")
def test_actionlint_passes_and_would_catch_a_mistake(tmp_path):
    files = sorted(os.path.join(WF, f) for f in os.listdir(WF) if f.endswith(".yml"))
    ok = subprocess.run([_actionlint(), *files], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ github.nope }}\n")
    assert subprocess.run([_actionlint(), str(bad)], capture_output=True, text=True).returncode != 0
