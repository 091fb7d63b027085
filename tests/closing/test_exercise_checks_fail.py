"""Every final check of chapter 11's exercises can fail: each solution's own closing lines (from its
``check(...)`` call on) run once with the reference answer, where they pass, and once with each of a few
plausible wrong answers, where they must raise. Also: the chapter's computed claims have hidden check cells."""

import re
import textwrap
from dataclasses import replace

import jupytext
import pytest

from lib import exercises
from lib.closing import exercises as ex
from lib.closing.run import one_run

CHAPTER = "book/closing/01_one_run.md"
CHECK = re.compile(r'^verdict = check\("(ch11\.\d+)", (\w+)\)$', re.M)


def _solution_tails() -> dict[str, tuple[str, str]]:
    """Exercise id -> (the variable the solution checks, its cell's lines from the check on)."""
    out = {}
    for cell in jupytext.read(CHAPTER).cells:
        m = CHECK.search(cell.source) if cell.cell_type == "code" else None
        if m:
            out[m.group(1)] = (m.group(2), cell.source[m.start():])
    return out


def _wrong_answers() -> dict[str, list]:
    """Plausible mistakes for each exercise, computed with the library."""
    pick, r = ex.run_of(ex.CHAPTER_JOB), ex.meta_run_of(ex.CHAPTER_JOB)
    small = ex.run_of(replace(ex.CHAPTER_JOB, model=ex.OTHER_MODEL))
    no_sync = replace(r.est, step_s=r.est.compute_s)
    half = ex.halved_sync(r)
    return {
        "ch11.1": [pick.goodput_backup, small.goodput_no_backup],  # 405B's own; forgot the backups
        "ch11.2": [r.goodput_backup, ex.goodput_at(r, 3, r.fail_backup["interval_min"]),  # 2% (3 replicas)
                   ex.best_goodput(pick)[0]],  # the planner's pick's, not Meta's step's
        # unchanged; tokens/s read as falling with goodput; all communication removed; the goodput itself
        "ch11.3": [r.delivered(True), r.delivered(True) * half.goodput_backup / r.goodput_backup,
                   one_run(r.job, no_sync).delivered(True), half.goodput_backup],
        "ch11.4": [r.job.storage_bw_gb_per_s, r.job.storage_bw_gb_per_s / 4,
                   ex.bandwidth_for_kept(ex.meta_run_of(replace(ex.CHAPTER_JOB, restart_min=0.0)))],  # no restarts
    }


def _run_tail(tail: str, name: str, value):
    pick, small = ex.run_of(ex.CHAPTER_JOB), ex.run_of(replace(ex.CHAPTER_JOB, model=ex.OTHER_MODEL))
    ns = {"check": exercises.check, "AT_DEFAULTS": True, "run": ex.meta_run_of(ex.CHAPTER_JOB), "pick": pick,
          "small": small,
          # what solution 11.1 computes before its check (its predictions are asserted with it)
          "eff": small.eff_no_backup, "eff_405b": pick.eff_no_backup,
          "kept": small.fail_no_backup["kept"], "kept_405b": pick.fail_no_backup["kept"], name: value}
    exec(compile(textwrap.dedent(tail), CHAPTER, "exec"), ns)
    return ns["verdict"]


def test_every_checked_exercise_is_found():
    assert set(_solution_tails()) == set(exercises.references(11)) == {"ch11.1", "ch11.2", "ch11.3", "ch11.4"}


@pytest.mark.parametrize("ex_id", ["ch11.1", "ch11.2", "ch11.3", "ch11.4"])
def test_a_wrong_answer_fails_the_solutions_own_check(ex_id):
    name, tail = _solution_tails()[ex_id]
    assert "assert verdict" in tail
    assert _run_tail(tail, name, exercises.reference(ex_id).answer())  # the reference passes
    for wrong in _wrong_answers()[ex_id]:
        with pytest.raises(AssertionError, match="wrong"):
            _run_tail(tail, name, wrong)


def test_the_chapters_claims_have_hidden_check_cells():
    claims = [c for c in jupytext.read(CHAPTER).cells
              if c.cell_type == "code" and {"remove-cell", "claim"} <= set(c.metadata.get("tags", []))]
    assert len(claims) >= 7
    assert all("assert" in c.source for c in claims)


@pytest.mark.parametrize("ex_id, digits", [("ch11.1", 3), ("ch11.2", 4), ("ch11.3", 0), ("ch11.4", 0)])
def test_the_answer_as_the_solution_prints_it_passes(ex_id, digits):
    """A reader who copies the solution's printed answer (a share to 0.1 or 0.01 point, tokens/s or GB/s to
    a unit) is told it is right."""
    answer = exercises.reference(ex_id).answer()
    assert exercises.check(ex_id, round(answer, digits)), (ex_id, answer)
