"""Batch reruns (python -m lib.rerun): parameter sets checked before anything runs, one folder per run, a failing
chapter reported without stopping the others, resumable; and the book built from a rerun without executing."""

import datetime as dt
import json
import os
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.rerun import execute, params, replay
from lib.rerun.__main__ import main
from tests.cli_helpers import call_main

ROOT = params.ROOT
FAST = ["book/stragglers/01_the_one_slow_gpu", "book/galvatron/01_the_space"]


def _set(tmp_path, text, name="tiny"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


_RUN = {"set_name": "s", "started_utc": "2026-12-01T00:00:00+00:00", "commit": "abc", "host": "h", "python": "3",
        "torch": None, "devices": ["cpu"]}


def _run_files(run_dir, rows, set_info=None, run=None):
    """A rerun's params.json and summary.json as execute.run writes them (complete: the reader checks them)."""
    run = dict(_RUN, **(run or {}))
    set_info = {"name": run["set_name"], "description": "", "parameters": {}, "chapters": {}, **(set_info or {})}
    chapters = [c for c, _ in rows]
    (run_dir / "params.json").write_text(json.dumps({"set": set_info, "chapters": chapters,
                                                     "parameters": {c: {} for c in chapters}, "run": run}))
    (run_dir / "summary.json").write_text(json.dumps({"run": run, "chapters": [
        {"chapter": c, "status": st, "wall_s": 1.0, "provenance": "none", "devices": [], "error": None}
        for c, st in rows], "failed": [c for c, st in rows if st != "ok"], "pending": []}))


def test_shipped_sets_load_and_fit_every_chapter():
    names = params.available()
    assert {"cpu", "colab-1gpu", "4gpu", "8gpu"} <= set(names)
    chapters = params.book_chapters()
    assert len(chapters) >= 8
    for n in names:
        resolved = params.resolve(params.load(n), chapters)
        assert set(resolved) == set(chapters)
    four = params.resolve(params.load("4gpu"), chapters)
    assert four["book/galvatron/04_from_plan_to_run"]["world_size"] == 4
    assert "device" not in four["book/stragglers/01_the_one_slow_gpu"]  # only to chapters that declare it


def test_unknown_parameter_is_refused_before_anything_runs(tmp_path):
    bad = _set(tmp_path, "parameters: {bogus_knob: 1}\n")
    assert main(["--params", bad, "--chapters", *FAST, "--runs-root", str(tmp_path / "runs"), "--no-progress"]) == 2
    assert not (tmp_path / "runs").exists()
    with pytest.raises(ValueError, match="bogus_knob.*declared by no chapter"):
        params.resolve(params.load(bad), FAST)


def test_a_chapter_value_it_does_not_declare_names_both(tmp_path):
    bad = _set(tmp_path, "chapters:\n  book/stragglers/01_the_one_slow_gpu: {world_size: 4}\n")
    with pytest.raises(ValueError, match=r"01_the_one_slow_gpu declares no parameter 'world_size'"):
        params.resolve(params.load(bad), FAST)
    with pytest.raises(ValueError, match="no chapter 'book/nope/x'"):
        params.resolve(params.load(_set(tmp_path, "chapters:\n  book/nope/x: {a: 1}\n", "b")), FAST)
    with pytest.raises(ValueError, match="unknown key 'paramters'"):
        params.load(_set(tmp_path, "paramters: {}\n", "c"))
    with pytest.raises(ValueError, match="no parameter set 'nope'"):
        params.load("nope")


def test_run_folders_are_never_reused(tmp_path):
    now = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    first = execute.new_run_dir("cpu", str(tmp_path), now)
    assert first.endswith("cpu-20260102T030405Z")
    with pytest.raises(FileExistsError, match="--resume"):
        execute.new_run_dir("cpu", str(tmp_path), now)


def test_provenance_reads_the_chapters_own_labels():
    nb = {"cells": [{"outputs": [{"text": "step 230 ms, measured on cuda:0 (NVIDIA H200), 8 samples\n"}]},
                    {"outputs": [{"data": {"text/plain": "'simulated with hardware profile 4xT4-pcie'"}}]}]}
    assert execute.provenance(nb) == ("measured and simulated", ("cuda:0 (NVIDIA H200)",))
    assert execute.provenance({"cells": []}) == ("none", ())


@pytest.mark.timeout(600)
def test_rerun_of_two_chapters_with_one_failing(tmp_path, monkeypatch, capsys):
    """n_gpus=3 is not a power of two: the space chapter fails, the stragglers chapter still runs."""
    monkeypatch.setenv("CI", "true")
    pset = _set(tmp_path, "description: one chapter made to fail\n"
                          "chapters:\n  book/galvatron/01_the_space: {n_gpus: 3}\n"
                          "  book/stragglers/01_the_one_slow_gpu: {days: 1.0}\n")
    runs = tmp_path / "runs"
    rc = main(["--params", pset, "--chapters", "book/galvatron/01_the_space", "book/stragglers/01_the_one_slow_gpu",
               "--runs-root", str(runs), "--no-progress"])
    assert rc == 1
    (run_dir,) = runs.iterdir()
    assert run_dir.name.startswith("tiny-")
    summary = json.loads((run_dir / "summary.json").read_text())
    status = {r["chapter"]: r["status"] for r in summary["chapters"]}
    assert status == {"book/galvatron/01_the_space": "failed", "book/stragglers/01_the_one_slow_gpu": "ok"}
    assert summary["failed"] == ["book/galvatron/01_the_space"] and summary["pending"] == []
    ok = next(r for r in summary["chapters"] if r["status"] == "ok")
    assert ok["provenance"] == "simulated" and ok["wall_s"] > 0
    failed_nb = json.loads((run_dir / "book/galvatron/01_the_space.ipynb").read_text())
    assert any(o.get("output_type") == "error" for c in failed_nb["cells"] for o in c.get("outputs", []))
    assert (run_dir / "logs" / "stragglers__01_the_one_slow_gpu.log").stat().st_size > 0
    saved = json.loads((run_dir / "params.json").read_text())
    assert saved["parameters"]["book/stragglers/01_the_one_slow_gpu"] == {"days": 1.0}
    out = capsys.readouterr().out
    assert "failed" in out and "galvatron/01_the_space" in out

    # resuming skips the chapter that is done and tries the failed one again
    calls = []
    monkeypatch.setattr(execute, "run_chapter", lambda c, p, d, **k: calls.append(c) or
                        execute.ChapterResult(c, "ok", 0.1, "simulated"))
    assert main(["--resume", str(run_dir), "--no-progress"]) == 0
    assert calls == ["book/galvatron/01_the_space"]
    assert json.loads((run_dir / "summary.json").read_text())["failed"] == []


def _mini_book(root):
    """A one-chapter book whose only code cell would fail if executed, with an output stored as if it ran."""
    os.makedirs(root / "book" / "x")
    shutil.copy(os.path.join(ROOT, "references.bib"), root / "references.bib")
    (root / "_config.yml").write_text(
        "title: t\nonly_build_toc_files: true\nexclude_patterns: [_build]\nexecute:\n"
        "  execute_notebooks: force\n  raise_on_error: true\nbibtex_bibfiles: [references.bib]\n")
    (root / "_toc.yml").write_text("format: jb-book\nroot: intro\nparts:\n  - caption: P\n    chapters:\n"
                                   "      - file: book/x/ch\n")
    (root / "intro.md").write_text("# Intro\n")
    nb = {"nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "cells": [{"cell_type": "markdown", "id": "a", "metadata": {}, "source": "# Chapter"},
                    {"cell_type": "code", "id": "b", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": "raise RuntimeError('executed ' + 'again')"}]}
    (root / "book" / "x" / "ch.ipynb").write_text(json.dumps(nb))
    return nb


@pytest.mark.timeout(300)
def test_book_from_builds_without_executing(tmp_path, monkeypatch):
    src = tmp_path / "src"
    nb = _mini_book(src)
    run_dir = tmp_path / "run"
    (run_dir / "book" / "x").mkdir(parents=True)
    nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "from the GPU box 42\n"}]
    nb["cells"][1]["execution_count"] = 1
    (run_dir / "book" / "x" / "ch.ipynb").write_text(json.dumps(nb))
    (run_dir / "runlogs" / "x" / "ch").mkdir(parents=True)
    (run_dir / "runlogs" / "x" / "ch" / "run.jsonl").write_text('{"update": 0}\n')
    run = {"set_name": "4gpu", "started_utc": "2026-12-01T00:00:00+00:00", "commit": "abc1234", "host": "h",
           "python": "3", "torch": None, "devices": ["cuda:0 (NVIDIA H200)"]}
    _run_files(run_dir, [("book/x/ch", "ok")], {"description": "four"}, run)
    monkeypatch.setattr(params, "ROOT", str(src))
    html = replay.book_from(str(run_dir), str(tmp_path / "out"), root=str(src), strict=False)
    page = open(os.path.join(html, "book", "x", "ch.html"), encoding="utf-8").read()
    assert "from the GPU box 42" in page and "executed again" not in page
    assert "cuda:0 (NVIDIA H200)" in page and "abc1234" in page and "4gpu" in page
    import re

    assert re.search(r'href="[^"]*_downloads/[^"]*/ch\.zip"', page)  # the run logs behind the page, for download
    (zipped,) = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(html, "_downloads")) for f in fs]
    import zipfile

    assert zipfile.ZipFile(zipped).namelist() == ["run.jsonl"]


def test_replay_offers_the_reruns_logs_not_a_local_builds(tmp_path):
    src = tmp_path / "src"
    nb = _mini_book(src)
    nb["cells"].insert(1, {"cell_type": "markdown", "id": "l", "metadata": {},
                           "source": "Logs: {download}`runlogs/ch.zip`."})
    (src / "book" / "x" / "ch.ipynb").write_text(json.dumps(nb))
    (src / "book" / "x" / "runlogs").mkdir()
    (src / "book" / "x" / "runlogs" / "ch.zip").write_bytes(b"a local build's logs")
    run_dir = tmp_path / "run"
    (run_dir / "book" / "x").mkdir(parents=True)
    (run_dir / "book" / "x" / "ch.ipynb").write_text(json.dumps(nb))
    _run_files(run_dir, [("book/x/ch", "ok")])
    # the rerun kept no logs for a page that links them: refused, naming the chapter (not a stale local zip)
    with pytest.raises(ValueError, match="book/x/ch links its run logs"):
        replay.stage(str(run_dir), str(tmp_path / "dest"), root=str(src))
    (run_dir / "runlogs" / "x" / "ch").mkdir(parents=True)
    (run_dir / "runlogs" / "x" / "ch" / "gpu.jsonl").write_text('{"update": 0}\n')
    replay.stage(str(run_dir), str(tmp_path / "dest"), root=str(src))
    import zipfile

    assert zipfile.ZipFile(tmp_path / "dest" / "book" / "x" / "runlogs" / "ch.zip").namelist() == ["gpu.jsonl"]


def test_book_from_refuses_a_run_with_failures(tmp_path):
    _run_files(tmp_path, [("book/x/ch", "failed")])
    with pytest.raises(ValueError, match="book/x/ch.*--resume"):
        replay.stage(str(tmp_path), str(tmp_path / "dest"))


def _call(argv):
    rc, _, err = call_main(main, argv)
    return rc, err


_WORDS = st.text(alphabet="abcz0129-_./: \"'{}[],", max_size=12)


@settings(max_examples=25, deadline=None)
@given(flag=st.sampled_from(["--params", "--resume", "--book-from", "--chapters", "--bogus", None]),
       value=st.one_of(st.none(), _WORDS))
def test_fuzzed_arguments_are_one_line_errors(tmp_path_factory, flag, value):
    """Issue 18, finding 5: hypothesis-generated arguments that name no set, run or chapter (missing values,
    odd text, YAML-looking junk): exit 2, one line on stderr starting 'error:', nothing run or written."""
    d = tmp_path_factory.mktemp("rerun")
    runs = d / "runs"
    argv = ["--runs-root", str(runs), "--no-progress"]
    if flag == "--chapters":  # a set that exists, chapters that do not
        argv += ["--params", "cpu", "--chapters", "book/nope/" + (value or "")]
    elif flag is not None:
        argv += [flag] + ([] if value is None else [str(d / ("x" + value)) if flag != "--params" else "x" + value])
    rc, err = _call(argv)
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in err[0], err
    assert not runs.exists()


def test_bad_yaml_and_a_folder_that_is_not_a_run_are_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("parameters: [1, 2\n")
    rc, err = _call(["--params", str(bad), "--runs-root", str(tmp_path / "runs")])
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"error: --params {bad}: not valid YAML"), err
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "params.json").write_text('{"set": {"zz": 1}}')
    rc, err = _call(["--resume", str(tmp_path / "r"), "--runs-root", str(tmp_path / "runs")])
    assert rc == 2 and len(err) == 1 and "params.json" in err[0], err


def test_papermill_reads_every_parameter_of_every_chapter():
    """papermill's parser drops a parameter whose comment it cannot parse (an apostrophe did): every assignment
    of a parameters cell must be a declared parameter, or reruns and the exercises' guard miss it."""
    import ast

    for chapter in params.book_chapters():
        with open(os.path.join(ROOT, chapter + ".ipynb"), encoding="utf-8") as f:
            nb = json.load(f)
        (cell,) = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
        names = [t.id for n in ast.parse("".join(cell["source"])).body if isinstance(n, ast.Assign)
                 for t in n.targets]
        assert list(params.declared(chapter)) == names, chapter


@pytest.mark.timeout(120)
def test_a_batch_run_executes_as_a_static_notebook(tmp_path, monkeypatch):
    """Widgets decide on ``lib.book.in_ci()``: a rerun's notebooks (which ``book-from`` may publish) must hold
    their static twins, not live widget state, so the kernel runs with CI=true; the caller's env is restored."""
    (tmp_path / "book" / "x").mkdir(parents=True)
    nb = {"nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "cells": [{"cell_type": "code", "id": "b", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": "import os\nprint('CI is', os.environ.get('CI'))"}]}
    (tmp_path / "book" / "x" / "ch.ipynb").write_text(json.dumps(nb))
    monkeypatch.setattr(execute, "ROOT", str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    r = execute.run_chapter("book/x/ch", {}, str(tmp_path / "run"), progress=False)
    assert r.status == "ok", r
    out = json.loads((tmp_path / "run" / "book" / "x" / "ch.ipynb").read_text())
    assert "CI is true" in "".join(out["cells"][0]["outputs"][0]["text"])
    assert "CI" not in os.environ


def test_a_broken_table_of_contents_is_one_line_naming_it_not_params(tmp_path):
    """``_toc.yml`` is read like the parameter files: bad YAML is one line naming that file (it was reported
    as a ``--params`` error)."""
    from lib.cli_errors import UserError
    from lib.rerun import params

    (tmp_path / "_toc.yml").write_text("parts: [\n  - caption: x\n", encoding="utf-8")
    with pytest.raises(UserError) as e:
        params.book_chapters(str(tmp_path))
    msg = str(e.value)
    assert msg.startswith("table of contents ") and "_toc.yml: not valid YAML" in msg and "\n" not in msg
    assert "--params" not in msg
