"""Issue 29: a hypothesis fuzz of the readers the first fuzz (``test_readback_and_outputs``) left out -- the
rerun's parameter-set YAML, the node profile ``--node-profile`` reads (a gpu_check report) and Part I's
evaluation logs -- through each tool's ``main(argv)``: a missing field, a wrong type, an impossible value or a
truncated file is exit 2 and one line naming the file. Each fuzz starts from a document the tool accepts
(checked first, so a refusal is the mutation's doing) and keeps to 30 examples."""

import datetime
import functools
import json
import shutil
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.cli_helpers import assert_one_line, call_main
from tests.test_readback_and_outputs import _WRONG, _mutate, _mutations

FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


class Ran(Exception):
    """Raised instead of running chapters: the set was accepted."""


# --- parameter sets -------------------------------------------------------------------------------------------

CHAPTER = "book/galvatron/04_from_plan_to_run"
GOOD_SET = {"description": "a fuzzed set", "parameters": {"device": "cpu"}, "chapters": {CHAPTER: {"world_size": 2}}}


def _declared():
    """``params.declared`` read once per chapter (papermill's inspection is the slow part of a set's check)."""
    from lib.rerun import params

    return functools.lru_cache(maxsize=None)(params.declared)


_DECLARED = _declared()


def _rerun_set(path, runs):
    """``python -m lib.rerun --params path`` with chapters' parameters read once; once every check has passed
    (the run folder is next), nothing is created or run: ``None``."""
    from lib.rerun import execute, params
    from lib.rerun.__main__ import main

    with mock.patch.object(params, "declared", _DECLARED), \
            mock.patch.object(execute, "new_run_dir", side_effect=Ran):
        try:
            return call_main(main, ["--params", str(path), "--chapters", CHAPTER, "--runs-root", str(runs),
                                    "--no-progress"])
        except Ran:
            return None


def test_the_fuzzed_set_is_accepted_before_mutation(tmp_path):
    p = tmp_path / "fuzzset.yaml"
    p.write_text(yaml.safe_dump(GOOD_SET))
    assert _rerun_set(p, tmp_path / "runs") is None  # reached the run: accepted


_NOT_JSON = st.sampled_from([datetime.date(2026, 1, 2), float("nan"), float("inf"), {1, 2}])
_SET_FIELDS = ("description", "parameters", "chapters", "chapters." + CHAPTER)


def _set_mutations():
    return st.one_of(
        st.tuples(st.just("type"), st.sampled_from(_SET_FIELDS), _WRONG),
        st.tuples(st.just("value"), st.sampled_from(["device", "world_size"]), st.one_of(_NOT_JSON, _WRONG)),
        st.tuples(st.just("unknown"), st.sampled_from(["paramters", "chapter", "x"]), _WRONG),
        st.tuples(st.just("cut"), st.floats(0.0, 0.98), st.none()))


def _mutate_set(m) -> tuple[str, bool]:
    """(the set's YAML text, whether it must be refused)."""
    kind, what, value = m
    doc = json.loads(json.dumps(GOOD_SET))
    if kind == "type":
        if what.startswith("chapters."):
            if isinstance(value, dict):  # a mapping is the right type there
                value = 1
            doc["chapters"][CHAPTER] = value
        else:
            right = str if what == "description" else dict
            if isinstance(value, right) or (value is None and what != "description"):  # not wrong there
                value = 1
            doc[what] = value
    elif kind == "value":
        if what == "device" and isinstance(value, str):  # a string suits the chapter's device
            value = 7
        if what == "world_size" and isinstance(value, int) and not isinstance(value, bool):
            value = "2"
        (doc["parameters"] if what == "device" else doc["chapters"][CHAPTER])[what] = value
    elif kind == "unknown":
        doc[what] = value
    text = yaml.dump(doc, Dumper=yaml.Dumper)  # the full dumper: sets and dates, as a hand-written file may hold
    if kind == "cut":
        return text[: min(int(len(text) * what), len(text) - 2)], False
    return text, True


@FUZZ
@given(m=_set_mutations())
def test_fuzz_parameter_sets(tmp_path_factory, m):
    d = tmp_path_factory.mktemp("fzset")
    text, must_refuse = _mutate_set(m)
    (d / "fuzzset.yaml").write_text(text)
    out = _rerun_set(d / "fuzzset.yaml", d / "runs")
    if out is None:  # accepted: only a cut that left a valid set may be
        assert not must_refuse, text
        return
    rc, _, err = out
    assert_one_line(rc, err, "fuzzset")
    assert not (d / "runs").exists()


# --- node profiles (a gpu_check report given to --node-profile) ---------------------------------------------------

def _good_profile():
    from lib.gpt import gpt_graph, preset

    g = gpt_graph(preset("ci"))
    return {"graph_name": g.name, "batch": g.batch, "device_name": "Tesla T4",  # a device of 4xT4-pcie
            "fwd_s": [1e-4] * g.n_nodes, "bwd_s": [2e-4] * g.n_nodes, "optimizer_s_per_param": 1e-9,
            "source": "fuzzed"}


def _report(profile) -> str:
    return json.dumps({"kind": "gpu_check", "dry_run": False, "single_device": [{"preset": "ci",
                                                                                   "node_profile": profile}]})


def _train_with(path, out):
    from lib.placement.cli import main

    return call_main(main, ["train", "--preset", "ci", "--n-iters", "1", "--k", "2", "--hidden", "8", "--quiet",
                            "--out", str(out), "--node-profile", str(path)])


def test_the_fuzzed_node_profile_is_accepted_before_mutation(tmp_path):
    from lib.placement.experiment import EnvSpec, check_node_profile_fits
    from lib.placement.sim_engine import NodeProfile

    p = tmp_path / "report.json"
    p.write_text(_report(_good_profile()))
    spec = EnvSpec(preset="ci", node_profile=str(p))
    prof = NodeProfile.from_report(str(p), _good_profile()["graph_name"])
    check_node_profile_fits(spec, prof, len(prof.fwd_s))


@FUZZ
@given(m=st.one_of(_mutations(), st.tuples(st.just("nodes"), st.integers(1, 15)),
                   st.tuples(st.just("device"), st.text(min_size=1, max_size=8).filter(lambda s: s != "Tesla T4"))))
def test_fuzz_node_profiles(tmp_path_factory, m):
    from lib.placement.sim_engine import _node_profile_model

    d = tmp_path_factory.mktemp("fznp")
    good = _good_profile()
    if m[0] == "cut":  # the report cut short
        body = _report(good)
        text = body[: min(int(len(body) * m[1]), len(body) - 1)]
    elif m[0] == "nodes":  # a profile of another graph's length
        text = _report({**good, "fwd_s": good["fwd_s"][m[1]:], "bwd_s": good["bwd_s"][m[1]:]})
    elif m[0] == "device":  # measured on a device the simulator's profile lacks
        text = _report({**good, "device_name": m[1]})
    else:
        text = _report(json.loads(_mutate(json.dumps(good), good, _node_profile_model(), m)))
    (d / "report.json").write_text(text)
    rc, _, err = _train_with(d / "report.json", d / "out")
    assert_one_line(rc, err, "report.json")
    assert not list((d / "out").glob("*.jsonl")) if (d / "out").exists() else True


# --- evaluation logs (read back by figures) -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def eval_log(tmp_path_factory):
    from lib.placement.cli import main

    out = tmp_path_factory.mktemp("evruns")
    assert call_main(main, ["train", "--preset", "ci", "--colocate", "--n-iters", "2", "--k", "2", "--out", str(out),
                            "--quiet", "--name", "r"])[0] == 0
    rc, _, err = call_main(main, ["evaluate", "--run", "r", "--out", str(out), "--rounds-select", "1",
                                  "--rounds-confirm", "2", "--steps-per-round", "1"])
    assert rc == 0, err
    return out / "r.eval.jsonl"


def test_the_fuzzed_evaluation_log_is_accepted_before_mutation(eval_log, tmp_path):
    from lib.placement.cli import main

    shutil.copy(eval_log, tmp_path / "r.eval.jsonl")
    rc, _, err = call_main(main, ["figures", "--out", str(tmp_path)])
    assert rc == 0 and not err, err
    kinds = [json.loads(x)["kind"] for x in eval_log.read_text().splitlines()]
    assert kinds == ["header", "head_to_head", "phase_timing"]


def _impossible(rec, kind, j, value):
    """A head-to-head record with a negative time or a device the header's machine lacks."""
    e = rec["entries"][j % len(rec["entries"])]
    if kind == "negative":
        e["confirm_s"][0] = -abs(value) - 1e-6
    else:
        e["placement"][0] = 4 + int(abs(value))  # the header's machine has 4 devices
    return json.dumps(rec)


@FUZZ
@given(line=st.sampled_from([2, 3]), m=st.one_of(
    _mutations(), st.tuples(st.sampled_from(["negative", "device"]), st.integers(0, 9),
                            st.floats(0, 1e3, allow_nan=False))))
def test_fuzz_evaluation_logs(eval_log, tmp_path_factory, line, m):
    from lib.placement.cli import main
    from lib.runlog_schema import HeadToHeadRecord, PhaseTimingRecord

    d = tmp_path_factory.mktemp("fzev")
    lines = eval_log.read_text().splitlines()
    rec = json.loads(lines[line - 1])
    if m[0] in ("negative", "device"):
        lines[1] = _impossible(json.loads(lines[1]), *m)
    else:
        mutated = _mutate(lines[line - 1], rec, HeadToHeadRecord if line == 2 else PhaseTimingRecord, m)
        lines[line - 1] = mutated or "{"  # a cut: a torn line inside the log
    (d / "r.eval.jsonl").write_text("\n".join(lines) + "\n")
    rc, _, err = call_main(main, ["figures", "--out", str(d)])
    assert_one_line(rc, err, "r.eval.jsonl")
    assert not (d / "figures").exists()


# --- issue 38: the readers these fuzzes had not covered yet ----------------------------------------------------------
# A REINFORCE log's header as ``evaluate`` reads it; a published-runs file as ``validate`` reads it, at any depth;
# the straggler settings the command line and the widget share; the counts of a plan that ``plan`` and ``run``
# share. Each: accepted with a sound result, or exit 2 and one line naming the file (or flag, or field).

@pytest.fixture(scope="module")
def train_log(tmp_path_factory):
    from lib.placement.cli import main

    out = tmp_path_factory.mktemp("hdr")
    assert call_main(main, ["train", "--preset", "ci", "--colocate", "--n-iters", "2", "--k", "2", "--hidden", "8",
                            "--out", str(out), "--quiet", "--name", "r"])[0] == 0
    return out / "r.jsonl"


_HEADER_PATHS = ("config", "env", "model", "run_kind", "seed", "config.top_n", "config.k", "config.hidden",
                 "model.graph", "model.n_nodes", "model.n_devices", "model.groups", "env.device", "env.profile",
                 "env.preset", "env.n_micro", "env.mem_cap", "env.noise", "env.env_seed", "env.mechanisms")
_ODD = st.sampled_from([None, "x", 1.5, [], {}, True, -1, 0, 3, 10**12, "49m", "real", [[0, 1]], {"x": 1}])


def _set_path(doc, path, value):
    *outer, last = path.split(".")
    for k in outer:
        doc = doc[k]
    if value == "DROP":
        doc.pop(last)
    else:
        doc[last] = value


@pytest.mark.parametrize("path", _HEADER_PATHS)
def test_every_header_field_dropped(train_log, tmp_path_factory, path):
    _evaluate_with_header(train_log, tmp_path_factory.mktemp("drop"), path, "DROP")


@FUZZ
@given(path=st.sampled_from(_HEADER_PATHS), value=st.one_of(st.just("DROP"), _ODD))
@example(path="model.n_nodes", value=1_000_000_000_000)  # built range(n_nodes) to check the groups: MemoryError
def test_fuzz_run_log_headers_through_evaluate(train_log, tmp_path_factory, path, value):
    _evaluate_with_header(train_log, tmp_path_factory.mktemp("fzhdr"), path, value)


def _evaluate_with_header(train_log, d, path, value):
    from lib.placement.cli import main

    lines = train_log.read_text().splitlines()
    header = json.loads(lines[0])
    _set_path(header, path, value)
    lines[0] = json.dumps(header)
    (d / "r.jsonl").write_text("\n".join(lines) + "\n")
    rc, out, err = call_main(main, ["evaluate", "--run", "r", "--out", str(d), "--rounds-select", "1",
                                    "--rounds-confirm", "2", "--steps-per-round", "1"])
    must_refuse = path.split(".")[0] in ("model", "run_kind") or path in ("config", "env") or (
        value == "DROP" and path in ("config", "env", "model"))
    if path == "model.groups" and value is None:  # a run without co-location groups: allowed
        must_refuse = False
    if path == "config" and value == {}:  # every field takes its default, as a field the header lacks does
        must_refuse = False
    if rc == 0:
        assert not must_refuse, (path, value)
        assert not err and "RL pick vs best other" in out and "10000" not in out
        assert (d / "r.eval.jsonl").exists()
    else:
        assert_one_line(rc, err)
        assert "r.jsonl" in err[0] or path == "env.device", err  # env.device real: no CUDA device here


def _calibration_run():
    from lib.galvatron.practice_report import CALIBRATION

    d = json.loads(open(CALIBRATION).read())
    return {"source": d["source"], "runs": d["runs"][:1]}


_RUN_PATHS = ("name", "quote", "global_batch", "precision", "model.layers", "model.hidden", "model.heads",
              "model.kv_heads", "model.ffn", "model.vocab", "model.seq_len", "model.gated_mlp", "cluster.gpu",
              "cluster.gpus", "cluster.gpus_per_node", "cluster.fabric_gb_s_per_gpu", "config.tp", "config.pp",
              "config.dp", "config.micro_batch", "config.zero", "config.recompute", "config.vp",
              "measured.tokens_per_s_per_gpu")
_SIZES = st.sampled_from([None, "x", 1.5, [], True, -1, 0, 7, 10**9, 10**12, float("inf")])


@pytest.mark.parametrize("value", ["DROP", 0, 7, 10**9])
@pytest.mark.parametrize("path", _RUN_PATHS)
def test_every_run_field_dropped_or_extreme(tmp_path_factory, path, value):
    _validate_with(tmp_path_factory, path, value)


@FUZZ
@given(path=st.sampled_from(_RUN_PATHS), value=st.one_of(st.just("DROP"), _SIZES))
def test_fuzz_published_runs_through_validate(tmp_path_factory, path, value):
    _validate_with(tmp_path_factory, path, value)


def _validate_with(tmp_path_factory, path, value):
    from lib.cli_errors import run_cli
    from lib.galvatron.validate import main

    doc = _calibration_run()
    _set_path(doc["runs"][0], path, value)
    p = tmp_path_factory.mktemp("fzruns") / "runs.json"
    p.write_text(json.dumps(doc))  # inf is written as Infinity, which a strict reader refuses too
    rc, out, err = call_main(lambda a: run_cli(main, a), ["--runs", str(p), "--no-search", "--json"])
    if rc == 0:  # accepted: an estimate that is a number of tokens, not an underflow dressed up as one
        row = json.loads(out)["runs"][0]
        assert 0 < row["estimate"] < 1e7 and row["peak_gb"] < 1e6, (path, value, row)
    else:
        assert_one_line(rc, err, str(p))


_SETTINGS = {"n_gpus": "--gpus", "interval_min": "--interval", "backup_pct": "--backups", "days": "--days",
             "seed": "--seed"}


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(_SETTINGS)),
       value=st.one_of(st.integers(-5, 10**13), st.floats(allow_nan=True, allow_infinity=True), st.booleans()))
def test_fuzz_straggler_settings_one_reader_for_the_widget_and_the_command_line(name, value):
    """The widget's settings and the command line accept and refuse the same values, with the same words."""
    from lib.cli_errors import UserError
    from lib.straggler.cli import parse_args
    from lib.straggler.widgets import StragglerSettings

    try:
        StragglerSettings(**{name: value})
        widget = None
    except UserError as e:
        widget = str(e)
    flag, int_flag = _SETTINGS[name], name in ("n_gpus", "seed")
    typed = not isinstance(value, bool) and (isinstance(value, int) or not int_flag)
    try:
        if typed:  # the value as argparse types it from the command line
            parse_args([f"{flag}={value}"])  # "=": a negative value is not read as another option
        else:  # a bool, or a float for an integer flag, argparse refuses itself: the shared check alone
            from lib.straggler.settings import check_setting

            check_setting(name, value, flag)
        cli = None
    except UserError as e:
        cli = str(e)
    assert (widget is None) == (cli is None), (name, value, widget, cli)
    if widget is not None:
        assert widget.startswith(f"{name}: ") and cli.startswith(f"{flag}: ")
        assert widget.split(": ", 1)[1] == cli.split(": ", 1)[1]  # the same value, bounds and why


@settings(max_examples=40, deadline=None)
@given(counts=st.fixed_dictionaries({}, optional={
    "global_bsz": st.integers(1, 64), "chunks": st.integers(1, 128), "world_size": st.sampled_from([1, 2, 4]),
    "n_gpus": st.sampled_from([1, 2, 4, 8])}))
def test_fuzz_plan_counts_read_alike_by_plan_and_run(counts):
    """``plan`` (``Plan.from_dict``) and ``run`` (``runtime.plan.validated``) refuse the same counts with the
    same line: chunks above global_bsz, world_size and n_gpus that disagree."""
    from lib.cli_errors import UserError
    from lib.galvatron.runtime.plan import validated
    from lib.galvatron.search.plan import Plan

    doc = {"pp_deg": 1, "tp_sizes_enc": "1,1", "tp_consecutive_flags": "1,1", "dp_types_enc": "0,0",
           "global_bsz": 4, "chunks": 1, "world_size": 1, **counts}
    said = {}
    for tool, read in (("plan", lambda: Plan.from_dict(doc)), ("run", lambda: validated(doc, "plan"))):
        try:
            read()
            said[tool] = None
        except UserError as e:
            said[tool] = str(e)
    bad_chunks = doc["chunks"] > doc["global_bsz"]
    bad_world = "n_gpus" in doc and doc["n_gpus"] != doc["world_size"]
    if bad_chunks or bad_world:
        assert said["run"] is not None and said["plan"] is not None, (doc, said)
        word = "chunks" if bad_chunks else "n_gpus"
        assert word in said["run"] and word in said["plan"], said
    else:
        assert said["run"] is None, said  # the runtime's schema takes every other count here
