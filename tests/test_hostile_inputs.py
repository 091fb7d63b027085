"""Issue 38: the inputs that still got a traceback, a silent wrong result or an exit 0. Each is now one line naming
the flag, file or field, the bad value and what is allowed, exit 2, and the same check in every tool that reads the
same thing: Part I's ``evaluate`` over a run whose every placement is over the memory cap, a run log whose header
lacks a field, a plan ``plan`` accepted and ``run`` refused (or whose world_size and n_gpus disagree), ``plan
--search`` beyond the searched GPU counts, the straggler widget's settings, and ``validate`` with an absurd model or
one whose heads do not divide."""

import json
from unittest import mock

import pytest

from lib.cli_errors import UserError, run_cli
from tests.cli_helpers import assert_one_line, call_main

PLAN = {"pp_deg": 1, "tp_sizes_enc": "1,1", "tp_consecutive_flags": "1,1", "dp_types_enc": "0,0",
        "global_bsz": 4, "chunks": 1, "world_size": 1}


# --- Part I: evaluate ---------------------------------------------------------------------------------------------

def _placement(argv):
    from lib.placement.cli import main

    return call_main(main, argv)


EVAL = ["--rounds-select", "1", "--rounds-confirm", "2", "--steps-per-round", "1"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two short runs on the ``ci`` GPT: one without a cap, one whose cap no placement fits under."""
    out = tmp_path_factory.mktemp("runs")
    for name, extra in (("free", []), ("capped", ["--mem-cap", "1e-5"])):
        rc, _, err = _placement(["train", "--preset", "ci", "--colocate", "--n-iters", "2", "--k", "2", "--hidden",
                                 "8", "--out", str(out), "--quiet", "--name", name, *extra])
        assert rc == 0, err
    return out


def test_train_never_reports_the_penalty_as_the_best_time(tmp_path):
    for name, extra, oom in (("capped", ["--mem-cap", "1e-5"], True), ("free", [], False)):
        rc, out, err = _placement(["train", "--preset", "ci", "--colocate", "--n-iters", "1", "--k", "2",
                                   "--hidden", "8", "--out", str(tmp_path), "--quiet", "--name", name, *extra])
        res = json.loads(out)
        assert rc == 0 and res["best_over_memory_cap"] is oom
        assert (res["best_ms"] is None) if oom else 0 < res["best_ms"] < 1000


def test_evaluate_refuses_when_every_placement_is_over_the_memory_cap(runs):
    rc, out, err = _placement(["evaluate", "--run", "capped", "--out", str(runs), *EVAL])
    assert_one_line(rc, err, "--run", "capped.jsonl", "every placement", "memory cap 1e-05", "allowed:")
    assert out == "" and "10000" not in err[0]
    assert not (runs / "capped.eval.jsonl").exists()  # no log presents the penalty as timings


def test_an_out_of_memory_entry_is_never_printed_as_a_time(runs):
    from lib.placement import cli
    from lib.placement.evaluate import Entry, HeadToHead

    entries = (Entry("rl", "top1", (0,) * 16, "pick", (10.0, 10.0), True),
               Entry("single_gpu", "single GPU 0", (0,) * 16, "pick", (0.2, 0.21), False))
    h2h = HeadToHead(entries, (), 1, 2, 1, "simulated")
    with mock.patch.object(cli, "evaluate_run", return_value=(h2h, None)):
        rc, out, err = _placement(["evaluate", "--run", "free", "--out", str(runs), *EVAL])
    assert rc == 0 and not err
    assert "10000" not in out and "over the memory cap" in out and "205.0" in out
    assert "no gap, the RL pick is over the memory cap" in out


def test_figures_refuses_an_evaluation_log_whose_every_entry_is_out_of_memory(runs, tmp_path):
    rc, _, err = _placement(["evaluate", "--run", "free", "--out", str(runs), *EVAL])
    assert rc == 0, err
    lines = (runs / "free.eval.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    for e in rec["entries"]:
        e["oom"] = True
    lines[1] = json.dumps(rec)
    (tmp_path / "free.eval.jsonl").write_text("\n".join(lines) + "\n")
    rc, _, err = _placement(["figures", "--out", str(tmp_path)])
    assert_one_line(rc, err, "free.eval.jsonl", "oom: true", "allowed:")


def _edit_header(src, dst, edit):
    lines = src.read_text().splitlines()
    h = json.loads(lines[0])
    edit(h)
    lines[0] = json.dumps(h)
    dst.mkdir(exist_ok=True)
    (dst / "r.jsonl").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("edit, words", [
    (lambda h: h.pop("model"), ("line 1 (header)", "missing field model")),
    (lambda h: h.pop("env"), ("line 1 (header)", "missing field env")),
    (lambda h: h["model"].pop("groups"), ("missing field model.groups",)),
    (lambda h: h["model"].pop("graph"), ("missing field model.graph",)),
    (lambda h: h["model"].update(groups=[[0, 1]]), ("model.groups", "exactly once")),
    (lambda h: h.update(env=3), ("env", "3")),
    (lambda h: h["env"].update(n_micro="2"), ("env", "n_micro", "'2'")),
    (lambda h: h["env"].update(n_micro=3), ("env.n_micro", "does not divide", "allowed")),
    (lambda h: h["env"].update(preset="nope"), ("env.preset", "'nope'", "allowed: 163m, 49m, ci")),
    (lambda h: h["env"].update(profile="nope"), ("env.profile", "'nope'", "allowed:")),
])
@pytest.mark.parametrize("cmd", ["evaluate", "figures"])
def test_a_header_missing_or_damaging_a_field_is_one_line(runs, tmp_path, edit, words, cmd):
    _edit_header(runs / "free.jsonl", tmp_path / "o", edit)
    argv = ["evaluate", "--run", "r", *EVAL] if cmd == "evaluate" else ["figures"]
    rc, _, err = _placement([*argv, "--out", str(tmp_path / "o")])
    if cmd == "figures" and words[0].startswith("env"):  # figures draws from the records, not the environment
        assert rc == 0 or (rc == 2 and "r.jsonl" in err[0]), err
        return
    assert_one_line(rc, err, "r.jsonl", *words)
    assert not (tmp_path / "o" / "r.eval.jsonl").exists()


# --- Part II: plan files, plan --search, validate -----------------------------------------------------------------

def _galvatron(argv):
    from lib.galvatron.__main__ import main

    return call_main(main, argv)


@pytest.mark.parametrize("change, words", [
    (dict(global_bsz=2, chunks=4), ("chunks: 4", "global_bsz of 2", "allowed: chunks in [1, global_bsz]")),
    (dict(n_gpus=2), ("world_size 1 and n_gpus 2 disagree", "allowed:")),
])
@pytest.mark.parametrize("cmd", ["plan", "run"])
def test_plan_and_run_refuse_the_same_plan_with_the_same_line(tmp_path, change, words, cmd):
    p = tmp_path / "plan.json"
    p.write_text(json.dumps({**PLAN, **change}))
    rc, out, err = _galvatron([cmd, "--plan", str(p)] + (["--steps", "1"] if cmd == "run" else []))
    assert_one_line(rc, err, "plan.json", *words)
    assert out == ""


def test_plan_reads_the_gpu_count_as_run_does(tmp_path):
    """A plan with n_gpus and no world_size runs; ``plan`` reads it too, and without either says what is needed."""
    p = tmp_path / "plan.json"
    p.write_text(json.dumps({k: v for k, v in {**PLAN, "n_gpus": 1}.items() if k != "world_size"}))
    rc, out, err = _galvatron(["plan", "--plan", str(p)])
    assert rc == 0 and out.startswith("B=4, pp=1, chunks=1") and not err
    p.write_text(json.dumps({k: v for k, v in PLAN.items() if k != "world_size"}))
    rc, _, err = _galvatron(["plan", "--plan", str(p)])
    assert_one_line(rc, err, "plan.json", "no world_size (nor n_gpus)", "allowed: a world_size field")


@pytest.mark.parametrize("ws, pp, tp, bsz, chunks", [
    (ws, pp, tp, bsz, m) for ws in (1, 2, 4) for pp in (1, 2) for tp in (1, 2) for bsz in (2, 6, 8)
    for m in (1, 2, 3) if pp * tp <= ws])
def test_plan_prints_a_run_command_only_for_a_plan_run_starts(tmp_path, ws, pp, tp, bsz, chunks):
    """``plan --print-torchrun`` and ``run`` agree on every plan of a grid: the command is printed exactly when
    the runtime's checks pass (the model's head count aside: 4 heads, which every tp here divides)."""
    from lib.galvatron.runtime.plan import load_plan, validated

    doc = {**PLAN, "world_size": ws, "pp_deg": pp, "tp_sizes_enc": f"{tp},{tp}", "global_bsz": bsz,
           "chunks": chunks}
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(doc))
    try:
        load_plan(validated(doc, "plan.json"), ws, "plan.json").validate(4, 2, ws)
        runs = None
    except UserError as e:
        runs = str(e)
    rc, out, err = _galvatron(["plan", "--plan", str(p), "--print-torchrun"])
    if runs is None:
        assert rc == 0 and "torchrun" in out and not err, err
    else:
        assert_one_line(rc, err, "plan.json")  # the runtime's reason, or the published format's own before it
        assert out == ""


def test_the_search_plan_reader_applies_the_same_check():
    from lib.galvatron.search.plan import Plan

    with pytest.raises(UserError, match="chunks: 8 micro-batches of a global_bsz of 4"):
        Plan.from_dict({**PLAN, "chunks": 8})
    with pytest.raises(UserError, match="world_size 1 and n_gpus 4 disagree"):
        Plan.from_dict({**PLAN, "n_gpus": 4})
    assert Plan.from_dict({**PLAN, "n_gpus": 1}).world_size == 1  # agreeing counts are fine


@pytest.mark.parametrize("gpus, words", [("16384", ("--gpus", "16384", "beyond the searched range",
                                                    "allowed: a power of two in [1, 8192]")),
                                         ("65536", ("--gpus", "65536", "[1, 8192]")),
                                         ("3", ("--gpus", "power of two"))])
def test_plan_search_beyond_the_searched_range_is_one_line(gpus, words):
    rc, out, err = _galvatron(["plan", "--search", "bert-huge-32", "--gpus", gpus])
    assert_one_line(rc, err, *words)
    assert out == ""


def test_the_search_itself_names_the_range():
    from lib.galvatron.search.engine import search
    from lib.galvatron.search.profiles import load_model, published_cluster

    with pytest.raises(UserError, match=r"16 GPUs is beyond the searched range.*up to 8"):
        search(load_model("bert-huge-32"), published_cluster(16), 16.0, max_bsz=8)


def _runs_file(tmp_path, edit):
    from lib.galvatron.practice_report import CALIBRATION

    d = json.loads(open(CALIBRATION).read())
    d = {"source": d["source"], "runs": d["runs"][:1]}
    edit(d["runs"][0])
    p = tmp_path / "runs.json"
    p.write_text(json.dumps(d))
    return p


@pytest.mark.parametrize("edit, words", [
    (lambda r: r["model"].update(layers=10**9), ("field model.layers", "1000000000", "less than or equal to 4096")),
    (lambda r: r["cluster"].update(gpus=10**9), ("field cluster.gpus", "1000000000")),
    (lambda r: r.update(global_batch=10**12), ("field global_batch", "1000000000000")),
    (lambda r: r["model"].update(heads=7), ("field model.heads", "7 does not divide model.hidden 2304",
                                            "allowed: a divisor of hidden")),
    (lambda r: r["model"].update(kv_heads=5), ("field model.kv_heads", "5 does not divide model.heads 24")),
])
def test_validate_refuses_an_absurd_model_naming_the_file(tmp_path, edit, words):
    from lib.galvatron.validate import main

    p = _runs_file(tmp_path, edit)
    rc, out, err = call_main(lambda a: run_cli(main, a), ["--runs", str(p), "--no-search"])
    assert_one_line(rc, err, f"{p}: run 'sc21-gpt-1.7b'", *words)
    assert out == ""


def test_every_reader_of_published_runs_gets_the_same_check(tmp_path):
    from lib.galvatron.practice_report import calibration_runs

    p = _runs_file(tmp_path, lambda r: r["model"].update(heads=7))
    with pytest.raises(UserError, match=f"{p}: run 'sc21-gpt-1.7b': field model.heads"):
        calibration_runs(p)


# --- Part III: the straggler widget's settings ---------------------------------------------------------------------

@pytest.mark.parametrize("kw, words", [
    (dict(n_gpus=10**12), ("n_gpus", "1000000000000", "allowed: [1, 10000000]")),
    (dict(days=4000.0), ("days", "4000", "allowed: (0, 365]")),
    (dict(interval_min=float("inf")), ("interval_min", "inf", "not finite")),
    (dict(seed=-1), ("seed", "-1", "[0, 4294967295]")),
    (dict(backup_pct=101.0), ("backup_pct", "101", "[0, 100]")),
])
def test_the_widgets_settings_are_bounded_as_the_command_line_is(kw, words):
    from lib.straggler.widgets import StragglerExplorer, StragglerSettings

    for build in (StragglerSettings, StragglerExplorer):
        with pytest.raises(UserError) as e:
            build(**kw)
        assert all(w in str(e.value) for w in words), str(e.value)
