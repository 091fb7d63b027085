"""Issue 29: what the tools read back and write. Every damaged input file or unusable output location is one line
and exit 2 naming the file and field, before any work where the check can come first; a plain ``ValueError`` is a
bug (exit 1, traceback); a stray ``RANK`` silences nothing; ``launch`` options are bounded; ``--check`` refuses an
optimizer its reference does not take; a diverged run fails and writes strict JSON; the answer checker takes any
real number; run-log downloads hold no checkpoints; reruns lock their folder, refuse duplicates, check types."""

import errno
import json
import os
import subprocess
import sys
import zipfile
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lib import atomic
from lib.cli_errors import UserError, run_cli
from tests.cli_helpers import assert_one_line, call_main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAN1 = {"pp_deg": 1, "tp_sizes_enc": "1,1", "tp_consecutive_flags": "1,1", "dp_types_enc": "0,0",
         "global_bsz": 4, "chunks": 1, "world_size": 1}


# --- the convention ---------------------------------------------------------------------------------------------

def test_a_plain_value_error_is_a_bug_not_a_user_error():
    def bug(argv):
        raise ValueError("an internal overflow after the ranks met")

    with pytest.raises(ValueError):  # Python prints the traceback and exits 1
        run_cli(bug, [])
    rc, _, err = call_main(lambda argv: run_cli(lambda a: (_ for _ in ()).throw(UserError("--x: bad")), argv), [])
    assert_one_line(rc, err, "--x: bad")


def test_a_stray_rank_does_not_silence_the_error(monkeypatch):
    def user(argv):
        raise UserError("--k: 0 is out of range")

    monkeypatch.setenv("RANK", "3")
    rc, _, err = call_main(lambda a: run_cli(user, a), [])
    assert_one_line(rc, err, "--k")
    # under a real launcher (torchrun's variables), rank 3 stays quiet and rank 0 speaks
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "x")
    monkeypatch.setenv("WORLD_SIZE", "4")
    rc, _, err = call_main(lambda a: run_cli(user, a), [])
    assert rc == 2 and err == []


@pytest.mark.parametrize("opts, names", [(["--nproc-per-node", "0"], "--nproc-per-node"),
                                         (["--nnodes", "0"], "--nnodes"), (["--node-rank", "-1"], "--node-rank"),
                                         (["--master-port", "0"], "--master-port"),
                                         (["--max-restarts", "-3"], "--max-restarts")])
def test_launch_options_are_bounded(opts, names):
    from lib.galvatron.__main__ import main

    assert_one_line(*call_main(main, ["launch", *opts, "run", "--plan", "p.json"])[::2], names)


def test_launch_kills_a_stopped_rank_soon():
    from lib.galvatron.runtime.quiet_launch import SHUTDOWN_S, torchrun_args

    args = torchrun_args(["--nproc-per-node", "2"], ["run", "--plan", "p.json"])
    assert args.shutdown_timeout == SHUTDOWN_S <= 5  # torchrun's own default waited 30 s past --timeout-s


# --- galvatron: plans, outputs, --check, non-finite losses -------------------------------------------------------

def _plan(tmp_path, **over):
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(dict(PLAN1, **over)))
    return str(p)


def test_an_empty_per_layer_entry_is_refused(tmp_path):
    from lib.galvatron.__main__ import main

    rc, _, err = call_main(main, ["run", "--plan", _plan(tmp_path, tp_sizes_enc="1,,1"), "--steps", "1"])
    assert_one_line(rc, err, "plan.json", "tp_sizes_enc", "empty")


@pytest.mark.parametrize("flags, words", [
    (["--check", "--optimizer", "adam"], ("--check", "--optimizer adam")),
    (["--seed", str(2**40)], ("--seed",)),
])
def test_run_refuses_before_any_work(tmp_path, flags, words):
    from lib.galvatron.__main__ import main

    assert_one_line(*call_main(main, ["run", "--plan", _plan(tmp_path), *flags])[::2], *words)


@pytest.mark.parametrize("where", ["folder", "under_a_file", "read_only"])
def test_run_out_is_checked_before_the_run(tmp_path, where, monkeypatch):
    from lib.galvatron import __main__ as gm

    monkeypatch.setattr(gm, "_run", lambda *a: pytest.fail("the run started before --out was checked"))
    (tmp_path / "f").write_text("x")
    ro = tmp_path / "ro"
    ro.mkdir()
    out = {"folder": str(tmp_path), "under_a_file": str(tmp_path / "f" / "s.json"),
           "read_only": str(ro / "s.json")}[where]
    if where == "read_only":
        monkeypatch.setattr(atomic.tempfile, "mkstemp", _raise(OSError(errno.EROFS, "Read-only file system")))
    rc, _, err = call_main(gm.main, ["run", "--plan", _plan(tmp_path), "--out", out])
    assert_one_line(rc, err, "--out")


def _raise(exc):
    def f(*a, **k):
        raise exc
    return f


def test_plan_search_refuses_nnodes_before_writing(tmp_path):
    from lib.galvatron.__main__ import main

    out = tmp_path / "p.json"
    rc, _, err = call_main(main, ["plan", "--search", "bert-huge-32", "--gpus", "8", "--out", str(out),
                                  "--print-torchrun", "--nnodes", "3"])
    assert_one_line(rc, err, "--nnodes 3")
    assert not out.exists()


def test_strict_json_and_nonfinite_losses():
    from lib.galvatron.__main__ import nonfinite_losses, strict_json

    results = [{"rank": 0, "runs": [{"losses": [2.0, float("nan")], "iter_s": [0.1]}]}]
    assert "step 1" in nonfinite_losses(results)
    assert nonfinite_losses([{"rank": 0, "runs": [{"losses": [2.0, 1.0]}]}]) == ""
    text = strict_json(results)
    assert "NaN" not in text and json.loads(text)[0]["runs"][0]["losses"] == [2.0, None]


@pytest.mark.timeout(300)
def test_a_diverged_run_exits_1_and_writes_strict_json(tmp_path):
    from lib.galvatron.__main__ import main

    out = tmp_path / "s.json"
    argv = ["run", "--plan", _plan(tmp_path), "--lr", "1000", "--steps", "20", "--warmup", "0", "--out", str(out)]
    rc, stdout, err = call_main(main, argv)
    assert rc == 1 and any("not finite" in e for e in err), err
    text = out.read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in the summary"))
    assert call_main(main, argv + ["--allow-nonfinite"])[0] == 0


# --- the answer checker ---------------------------------------------------------------------------------------

def test_check_takes_any_real_number_and_never_raises():
    import torch

    from lib.exercises import check, reference

    e = reference("ch9.2").answer()
    for v in (np.float32(e), np.float64(e), np.array(e), torch.tensor(e), Decimal(repr(e)), float(e)):
        v2 = check("ch9.2", v)
        assert v2.right is True and bool(v2) is True, (type(v), v2)
    for v in (10**400, np.array([e, e]), "42", None, float("nan"), np.bool_(True), complex(e, 1), [e],
              Decimal("NaN"), torch.tensor([e, e])):
        v2 = check("ch9.2", v)
        assert v2.right is False and v2.message.startswith("wrong"), (v, v2)
    assert check("ch9.2", np.float32(e * 1.5)).right is False  # the tolerance applies to numpy scalars too


# --- atomic writes and output folders ---------------------------------------------------------------------------

def test_a_full_disk_leaves_nothing_and_names_the_file(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    monkeypatch.setattr(atomic.os, "fsync", _raise(OSError(errno.ENOSPC, "No space left on device")))
    with pytest.raises(OSError) as info:
        atomic.write_text(str(target), "{}")
    assert info.value.filename == str(target) and info.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path) == []
    rc, _, err = call_main(lambda a: run_cli(lambda _: atomic.write_text(str(target), "{}"), a), [])
    assert_one_line(rc, err, str(target), "No space left")


def test_output_location_checks(tmp_path):
    (tmp_path / "f").write_text("x")
    for bad in (str(tmp_path), str(tmp_path / "f" / "x.json"), "", "a" * 300 + ".json"):
        with pytest.raises(UserError, match="--out"):
            atomic.check_out_file("--out", bad)
    with pytest.raises(UserError, match="not a folder"):
        atomic.check_out_dir("--out", str(tmp_path / "f"))
    assert atomic.check_out_file("--out", str(tmp_path / "new" / "x.json"))
    assert not (tmp_path / "new").exists()  # checking creates nothing


# --- run logs: zips and impossible values ------------------------------------------------------------------------

def test_runlog_zips_never_hold_checkpoints(tmp_path):
    from lib.book import zip_runlogs

    (tmp_path / "logs" / "sub").mkdir(parents=True)
    for name in ("a.jsonl", "a.jsonl.ckpt.pt", "a.jsonl.lock", "sub/b.jsonl", "sub/b.jsonl.ckpt.pt"):
        (tmp_path / "logs" / name).write_text("x")
    assert zip_runlogs(str(tmp_path / "logs"), str(tmp_path / "z.zip")) == 2
    names = zipfile.ZipFile(tmp_path / "z.zip").namelist()
    assert names == ["a.jsonl", "sub/b.jsonl"]


@pytest.fixture(scope="module")
def placement_log(tmp_path_factory):
    from lib.placement.cli import main

    out = tmp_path_factory.mktemp("runs")
    rc, stdout, _ = call_main(main, ["train", "--preset", "ci", "--colocate", "--n-iters", "2", "--k", "2",
                                     "--out", str(out), "--quiet", "--name", "r"])
    assert rc == 0
    return out / "r.jsonl"


def _edit_record(src, dst_dir, line, fn):
    lines = src.read_text().splitlines()
    rec = json.loads(lines[line - 1])
    fn(rec)
    lines[line - 1] = json.dumps(rec)
    dst_dir.mkdir(exist_ok=True)
    (dst_dir / "r.jsonl").write_text("\n".join(lines) + "\n")
    return dst_dir


@pytest.mark.parametrize("edit, words", [
    (lambda r: r["step_s"].__setitem__(0, -0.5), ("line 2", "step_s", "too small")),
    (lambda r: r["placements"][0].__setitem__(0, 7), ("line 2", "device 7 does not exist")),
    (lambda r: r.pop("placements"), ("line 2", "missing field placements")),
    (lambda r: r.__setitem__("mean_step_s", "fast"), ("line 2", "mean_step_s")),
])
def test_figures_refuses_impossible_logs(placement_log, tmp_path, edit, words):
    from lib.placement.cli import main

    out = _edit_record(placement_log, tmp_path / "o", 2, edit)
    rc, _, err = call_main(main, ["figures", "--out", str(out)])
    assert_one_line(rc, err, "r.jsonl", *words)
    assert not (out / "figures").exists()


# --- reruns ---------------------------------------------------------------------------------------------------------

def _fake_run(tmp_path, chapters=("book/stragglers/01_the_one_slow_gpu",)):
    run = tmp_path / "run"
    run.mkdir()
    info = {"set_name": "cpu", "started_utc": "2026-01-01T00:00:00+00:00", "commit": "abc", "host": "h",
            "python": "3.11", "torch": None, "devices": ["cpu"]}
    (run / "params.json").write_text(json.dumps({"set": {"name": "cpu", "description": "", "parameters": {},
                                                         "chapters": {}}, "chapters": list(chapters),
                                                 "parameters": {c: {} for c in chapters}, "run": info}))
    (run / "summary.json").write_text(json.dumps({"run": info, "chapters": [
        {"chapter": c, "status": "ok", "wall_s": 1.0, "provenance": "none", "devices": [], "error": None}
        for c in chapters], "failed": [], "pending": []}))
    return run


def _rerun(argv):
    from lib.rerun.__main__ import main

    return call_main(main, argv)


@pytest.mark.parametrize("name, key", [("params.json", "run"), ("params.json", "chapters"),
                                       ("summary.json", "pending"), ("summary.json", "chapters")])
def test_a_run_file_missing_a_key_is_one_line(tmp_path, name, key):
    run = _fake_run(tmp_path)
    d = json.loads((run / name).read_text())
    del d[key]
    (run / name).write_text(json.dumps(d))
    rc, _, err = _rerun(["--resume", str(run), "--no-progress"])
    assert_one_line(rc, err, name, key)


def test_a_truncated_file_names_itself(tmp_path):
    run = _fake_run(tmp_path)
    text = (run / "params.json").read_text()
    (run / "params.json").write_text(text[: len(text) // 2])
    rc, _, err = _rerun(["--resume", str(run)])
    assert_one_line(rc, err, "params.json", "truncated")


def test_book_from_refuses_a_notebook_without_cells(tmp_path):
    run = _fake_run(tmp_path)
    nb = run / "book" / "stragglers" / "01_the_one_slow_gpu.ipynb"
    nb.parent.mkdir(parents=True)
    nb.write_text(json.dumps({"metadata": {}, "nbformat": 4}))
    rc, _, err = _rerun(["--book-from", str(run), "--out", str(tmp_path / "site")])
    assert_one_line(rc, err, "01_the_one_slow_gpu.ipynb", "cells")


def test_duplicate_chapters_and_resume_with_chapters_are_refused(tmp_path):
    c = "book/stragglers/01_the_one_slow_gpu"
    rc, _, err = _rerun(["--params", "cpu", "--chapters", c, c + ".ipynb", "--runs-root", str(tmp_path / "r")])
    assert_one_line(rc, err, "given twice")
    assert not (tmp_path / "r").exists()
    run = _fake_run(tmp_path)
    rc, _, err = _rerun(["--resume", str(run), "--chapters", "book/galvatron/01_the_space"])
    assert_one_line(rc, err, "--chapters with --resume")


def test_parameter_types_are_checked_before_anything_runs(tmp_path):
    ps = tmp_path / "t.yaml"
    ps.write_text("chapters:\n  book/galvatron/04_from_plan_to_run: {world_size: '4'}\n")
    rc, _, err = _rerun(["--params", str(ps), "--chapters", "book/galvatron/04_from_plan_to_run",
                         "--runs-root", str(tmp_path / "r")])
    assert_one_line(rc, err, "world_size", "an integer")
    assert not (tmp_path / "r").exists()


def test_a_run_folder_has_one_runner(tmp_path):
    import filelock

    run = _fake_run(tmp_path)
    with filelock.FileLock(str(run / ".lock")):
        p = subprocess.run([sys.executable, "-m", "lib.rerun", "--resume", str(run), "--no-progress"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 2 and "another process" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr


def test_a_full_disk_mid_chapter_leaves_no_notebook(tmp_path, monkeypatch):
    import papermill

    from lib.rerun import execute

    def half_then_full(src, out, **kw):
        with open(out, "w") as f:
            f.write('{"cells": [')
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(papermill, "execute_notebook", half_then_full)
    chapter = "book/stragglers/01_the_one_slow_gpu"
    with pytest.raises(OSError) as info:
        execute.run_chapter(chapter, {}, str(tmp_path), progress=False)
    assert info.value.filename.endswith("01_the_one_slow_gpu.ipynb")
    left = [f for _, _, fs in os.walk(tmp_path) for f in fs if f.endswith(".ipynb")]
    assert left == []


def test_make_quotes_paths_and_reports_the_tools_code(tmp_path):
    p = subprocess.run(["make", "-n", "book-from", "RUN=a b/run 1", "STAMP="], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert "--book-from 'a b/run 1'" in p.stdout, p.stdout  # single quotes since issue 29 (test_make_rerun)
    p = subprocess.run(["make", "rerun", "STAMP=", "PY=false"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert "lib.rerun exited 1" in p.stderr, p.stderr


# --- a fuzz of every reader: missing fields, wrong types, truncation -> exit 2, one line --------------------------

_WRONG = st.sampled_from([None, "x", 1.5, [], {}, True, -1])


def _mutations():
    return st.one_of(st.tuples(st.just("drop"), st.integers(0, 50)), st.tuples(st.just("type"), st.integers(0, 50),
                                                                             _WRONG),
                     st.tuples(st.just("cut"), st.floats(0.0, 0.98)))


def _required_paths(doc, model):
    """(key path, required) for the top-level fields of ``model`` present in ``doc``."""
    return [(k,) for k, f in model.model_fields.items() if f.is_required() and k in doc]


def _mutate(text, doc, model, m):
    if m[0] == "cut":
        body = text.rstrip()
        return body[: min(int(len(body) * m[1]), len(body) - 1)]
    keys = _required_paths(doc, model)
    (k,) = keys[m[1] % len(keys)]
    d = json.loads(text)
    if m[0] == "drop":
        del d[k]
    else:
        wrong, old = m[2], d[k]

        def number(v):
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        if type(wrong) is type(old) or (number(wrong) and number(old)):  # a value of the right type: not wrong
            wrong = 12345 if isinstance(old, str) else "x"
        d[k] = wrong
    return json.dumps(d)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["params.json", "summary.json"]), m=_mutations())
def test_fuzz_rerun_files(tmp_path_factory, which, m):
    from lib.rerun.files import ParamsFile, SummaryFile

    run = _fake_run(tmp_path_factory.mktemp("fz"))
    text = (run / which).read_text()
    (run / which).write_text(_mutate(text, json.loads(text), ParamsFile if which == "params.json" else SummaryFile,
                                     m))
    rc, _, err = _rerun(["--resume", str(run), "--no-progress"])
    assert_one_line(rc, err, which)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=_mutations())
def test_fuzz_plan_files(tmp_path_factory, m):
    from lib.galvatron.__main__ import main
    from lib.galvatron.runtime.plan import GalvatronPlanModel

    p = tmp_path_factory.mktemp("fz") / "plan.json"
    text = json.dumps(PLAN1)
    p.write_text(_mutate(text, PLAN1, GalvatronPlanModel, m))
    rc, _, err = call_main(main, ["run", "--plan", str(p), "--steps", "1"])
    assert_one_line(rc, err, "plan.json")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=_mutations())
def test_fuzz_notebooks_for_book_from(tmp_path_factory, m):
    from lib.rerun.files import Notebook

    base = tmp_path_factory.mktemp("fz")
    run = _fake_run(base)
    nb = run / "book" / "stragglers" / "01_the_one_slow_gpu.ipynb"
    nb.parent.mkdir(parents=True)
    doc = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "# T"}], "metadata": {}, "nbformat": 4,
           "nbformat_minor": 5}
    nb.write_text(_mutate(json.dumps(doc), doc, Notebook, m))
    rc, _, err = _rerun(["--book-from", str(run), "--out", str(base / "site")])
    assert_one_line(rc, err, "01_the_one_slow_gpu.ipynb")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=_mutations())
def test_fuzz_run_log_records(placement_log, tmp_path_factory, m):
    from lib.placement.cli import main
    from lib.runlog_schema import UpdateRecord

    out = tmp_path_factory.mktemp("fz")
    lines = placement_log.read_text().splitlines()
    rec = lines[1]
    mutated = _mutate(rec, json.loads(rec), UpdateRecord, m)
    if m[0] == "cut":  # a torn line in the middle of the log
        mutated = mutated or "{"
    lines[1] = mutated
    (out / "r.jsonl").write_text("\n".join(lines) + "\n")
    rc, _, err = call_main(main, ["figures", "--out", str(out)])
    assert_one_line(rc, err, "r.jsonl")


@pytest.mark.parametrize("cmd", [["train", "--preset", "ci", "--n-iters", "1"], ["evaluate", "--run", "r"]])
def test_placement_out_under_a_file_is_refused_before_work(tmp_path, cmd):
    from lib.placement.cli import main

    (tmp_path / "f").write_text("x")
    rc, _, err = call_main(main, [*cmd, "--out", str(tmp_path / "f" / "runs")])
    assert_one_line(rc, err, "--out", "is a file, not a folder")
