"""The candidate rules.queued_collectives (off in every preset): per-micro-batch ZeRO collectives that run on
under later compute. Hand-worked exposure, what it moves on the published runs, and that it stays off."""

import pytest

from lib.galvatron.published import load_runs
from lib.galvatron.search.cost import _dp_exposed
from lib.galvatron.search.rules import ALL_PRESETS, CANDIDATE_FIELDS, PRACTICE
from lib.galvatron.validate import validate_runs
from tests import ROOT

QUEUED = PRACTICE.with_(name="practice+queued", queued_collectives=True)


def test_off_everywhere_and_a_candidate():
    assert "queued_collectives" in CANDIDATE_FIELDS
    assert not any(r.queued_collectives for r in ALL_PRESETS.values())


def test_exposure_by_hand(monkeypatch):
    """One reduce-scatter of 3 s per micro-batch (backward phase), 1 s forward and 2.5 s backward, m = 4:
    waiting at the end of each backward exposes 4 x 0.5 s; queued, the queue keeps up (3 <= 3.5), so only the
    last micro-batch's 0.5 s tail is left. A queue that outgrows compute (5 s each) costs 1.5 s per extra
    micro-batch on top."""
    import lib.galvatron.search.cost as C

    monkeypatch.setattr(C.col, "group_s", lambda kind, nbytes, *a: nbytes)   # seconds = the bytes given
    per_mb = {"per_step": [], "per_micro_batch": [("reduce-scatter", 3.0, "bwd")]}
    assert _dp_exposed(per_mb, 1.0, 2.5, 4, 8, 1, None, False) == pytest.approx(4 * 0.5)
    assert _dp_exposed(per_mb, 1.0, 2.5, 4, 8, 1, None, False, queued=True) == pytest.approx(0.5)
    slow = {"per_step": [], "per_micro_batch": [("reduce-scatter", 5.0, "bwd")]}
    assert _dp_exposed(slow, 1.0, 2.5, 4, 8, 1, None, False, queued=True) == pytest.approx(3 * 1.5 + 2.5)
    once = {"per_step": [("reduce-scatter", 3.0, "bwd")], "per_micro_batch": []}   # ZeRO-1: unchanged
    assert (_dp_exposed(once, 1.0, 2.5, 4, 8, 1, None, False, queued=True)
            == _dp_exposed(once, 1.0, 2.5, 4, 8, 1, None, False) == pytest.approx(0.5))


def test_it_closes_llama3s_gap_and_moves_no_other_published_run():
    """On the calibration and held-out runs only the two Llama 3 runs (ZeRO-2: a reduce-scatter every
    micro-batch) move, from about -17% to within 2% of Meta's figure; every other run moves by under a point."""
    runs = [(f, r) for f in ("calibration.json", "heldout.json")
            for r in load_runs(f"{ROOT}/data/published_runs/{f}").runs]
    off = {r["name"]: r["error"] for r in validate_runs(runs, PRACTICE, search=False, progress=False)["runs"]}
    on = {r["name"]: r["error"] for r in validate_runs(runs, QUEUED, search=False, progress=False)["runs"]}
    moved = {n for n in off if abs(on[n] - off[n]) > 0.01}
    assert moved == {"llama3-405b-8192-8192", "llama3-405b-16384-8192"}
    for n in moved:
        assert off[n] < -0.15 and abs(on[n]) < 0.02
