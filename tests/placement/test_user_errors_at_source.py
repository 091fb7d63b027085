"""Issue 29, the error convention: the placement library (and the plan reader of ``lib.galvatron``) raise
:class:`UserError` where they check what a user gave them -- a run name, a log, a checkpoint, a node profile,
a plan -- so the command lines need no wrapper that turned every ``ValueError`` into the user's mistake. A
plain ``ValueError`` from inside a command is a bug: its traceback and exit 1, never one line and exit 2."""

import json

import pytest

from lib import hardware, runlog
from lib.cli_errors import UserError
from lib.galvatron.search.plan import Plan
from lib.galvatron.search.strategies import check_power_of_two
from lib.placement import cli, experiment
from lib.placement.reinforce_checkpoint import check_signature, load_checkpoint
from lib.placement.reinforce_run import RunResult, TrainConfig
from lib.placement.sim_engine import NodeProfile
from tests.cli_helpers import call_main

PLAN = {"pp_deg": 1, "tp_sizes_enc": "2,1", "tp_consecutive_flags": "1,1", "dp_types_enc": "0,1",
        "global_bsz": 8, "chunks": 1, "world_size": 2}


def _log(path, run_kind):
    runlog.RunLog.create(str(path), runlog.make_header({}, "sim", 0, run_kind=run_kind))
    return str(path)


def _cases(tmp):
    report = tmp / "report.json"
    report.write_text(json.dumps({"kind": "gpu_check", "dry_run": True}))
    ckpt = tmp / "run.ckpt.pt"
    ckpt.write_bytes(b"not a checkpoint")
    return {
        "a run name with no log": lambda: experiment.resolve_run("missing", str(tmp)),
        "an evaluation log read as a training log": lambda: RunResult.from_log(_log(tmp / "e.jsonl", "evaluate")),
        "a training log read as an evaluation log": lambda: experiment.read_evaluation(
            _log(tmp / "r.jsonl", "reinforce")),
        "a header config with an unknown key": lambda: TrainConfig.from_dict({"bogus": 1}),
        "a header config with a wrong value": lambda: TrainConfig.from_dict({"k": 0}),
        "a log without a model signature": lambda: check_signature({}, {}, "x.jsonl"),
        "a damaged checkpoint": lambda: load_checkpoint(str(ckpt)),
        "a dry-run node profile": lambda: NodeProfile.from_report(str(report), "gpt-ci"),
        "an unknown hardware profile": lambda: hardware.load("nope"),
        "a plan missing a field": lambda: Plan.from_dict({"pp_deg": 1}),
        "a plan whose degrees do not fit": lambda: Plan.from_dict(dict(PLAN, tp_sizes_enc="4,1")),
        "a GPU count not a power of two": lambda: check_power_of_two(3, "--gpus"),
    }


CASES = ("a run name with no log", "an evaluation log read as a training log",
         "a training log read as an evaluation log", "a header config with an unknown key",
         "a header config with a wrong value", "a log without a model signature", "a damaged checkpoint",
         "a dry-run node profile", "an unknown hardware profile", "a plan missing a field",
         "a plan whose degrees do not fit", "a GPU count not a power of two")


@pytest.mark.parametrize("case", CASES)
def test_the_reader_raises_user_error_where_it_checks(tmp_path, case):
    """Each was a plain ``ValueError`` that only a CLI wrapper (``user_input``) made the user's."""
    cases = _cases(tmp_path)
    assert set(cases) == set(CASES)
    with pytest.raises(UserError):
        cases[case]()


def _bug(*args, **kwargs):
    raise ValueError("an internal inconsistency")


@pytest.mark.parametrize("argv, patched", [
    (["train", "--preset", "ci", "--n-iters", "1", "--k", "2", "--hidden", "8", "--quiet"], "train_run"),
    (["figures"], "figures"),
])
def test_a_plain_value_error_in_the_placement_cli_is_a_bug(tmp_path, monkeypatch, argv, patched):
    """Before, ``user_input()`` around train_run/evaluate/figures turned this into ``error: ...`` and exit 2."""
    monkeypatch.setattr(cli, patched, _bug)
    out = ["--out", str(tmp_path)]
    with pytest.raises(ValueError, match="an internal inconsistency") as e:
        call_main(cli.main, [*argv, *out])
    assert not isinstance(e.value, UserError)


def test_a_plain_value_error_reading_a_galvatron_plan_is_a_bug(tmp_path, monkeypatch):
    from lib.galvatron.__main__ import main

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    rc, out, err = call_main(main, ["plan", "--plan", str(plan)])
    assert rc == 0, err
    monkeypatch.setattr(Plan, "from_dict", classmethod(_bug))
    with pytest.raises(ValueError, match="an internal inconsistency") as e:
        call_main(main, ["plan", "--plan", str(plan)])
    assert not isinstance(e.value, UserError)


def test_a_plans_own_check_is_one_line_naming_the_file(tmp_path):
    from lib.galvatron.__main__ import main

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(dict(PLAN, tp_sizes_enc="4,1")))
    rc, out, err = call_main(main, ["plan", "--plan", str(plan)])
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"error: --plan {plan}: "), err
