"""The collapse over co-location groups (chapter 3): the committed study and a small rerun of it."""

import json

import pytest

from lib.placement import collapse_groups as CG

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def study():
    return CG.read_study()


def test_the_committed_study_has_every_setting_and_seed(study):
    assert [(r["experiment"], r["factor"], r["value"]) for r in study["rows"]] == \
        [(x, f, v) for x, f, v, _ in CG.SETTINGS]
    assert len(study["seeds"]) >= 3 and study["max_updates"] >= 100
    assert study["command"].startswith("python -m lib.placement.collapse_groups")


def test_the_committed_dates_rerun_for_seed_0(study):
    """Chapter 3's A run (seed 0) collapses at the date the study committed (the run is deterministic)."""
    r = CG.row(study, "A", "chapter 3")
    assert CG.group_collapse_update("A", {}, 0, study["max_updates"]) == r["collapse"][0]


def test_a_collapses_long_before_a_hundred_updates_and_a_lower_lr_delays_it(study):
    cap = study["max_updates"]
    a = sorted(CG.dates_or_cap(CG.row(study, "A", "chapter 3"), cap))
    slow = sorted(CG.dates_or_cap(CG.row(study, "A", "learning rate"), cap))
    assert a[len(a) // 2] < 30 and slow[0] > max(a), (a, slow)


def test_config_for_takes_the_experiments_baseline_then_the_change():
    assert CG.config_for("B", {}, 3).baseline == "leave_one_out"
    c = CG.config_for("A", {"hidden": 64}, 2)
    assert (c.hidden, c.lr, c.seed, c.baseline) == (64, 1e-3, 2, "moving_average")
    with pytest.raises(ValueError, match="experiment 'D'"):
        CG.config_for("D", {}, 0)


def test_read_study_names_a_missing_field(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"rows": [], "seeds": [0]}))
    with pytest.raises(ValueError, match="max_updates"):
        CG.read_study(str(p))
    p.write_text(json.dumps({"rows": [{"factor": "f", "value": "v", "collapse": [1]}], "seeds": [0, 1],
                             "max_updates": 5, "profile": "x"}))
    with pytest.raises(ValueError, match="1 dates for 2 seeds"):
        CG.read_study(str(p))
