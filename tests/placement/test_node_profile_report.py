"""A gpu_check report's node profile is checked field by field before the simulator uses it (issue 18: node
profiles validated with exact types and ranges at the boundary; a bad field is one line naming file and field)."""

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from lib.placement.cli import main
from lib.placement.sim_engine import NodeProfile

GOOD = {"graph_name": "gpt-ci", "batch": 4, "device_name": "NVIDIA H200", "fwd_s": [0.001, 0.002],
        "bwd_s": [0.002, 0.004], "optimizer_s_per_param": 1e-9, "source": "measured"}


def _report(tmp_path, profile):
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"kind": "gpu_check", "dry_run": False,
                                "single_device": [{"preset": "ci", "node_profile": profile}]}))
    return str(path)


def test_a_good_profile_is_read(tmp_path):
    prof = NodeProfile.from_report(_report(tmp_path, GOOD), "gpt-ci")
    assert prof.batch == 4 and prof.fwd_s == (0.001, 0.002)


@pytest.mark.parametrize("field, value, words", [
    ("batch", 2.5, "batch"), ("batch", True, "batch"), ("batch", "4", "batch"), ("batch", 0, "batch"),
    ("fwd_s", [0.001, "x"], "fwd_s"), ("fwd_s", [0.001, -1.0], "fwd_s"), ("bwd_s", [], "bwd_s"),
    ("optimizer_s_per_param", float("nan"), "optimizer_s_per_param"), ("graph_name", 7, "graph_name"),
    ("fwd_s", [0.001], "bwd_s"),  # lengths differ
    ("extra_field", 1, "extra_field"),
])
def test_a_bad_field_is_one_line_naming_file_and_field(tmp_path, field, value, words):
    path = _report(tmp_path, {**GOOD, field: value})
    with pytest.raises(ValueError) as e:
        NodeProfile.from_report(path, "gpt-ci")
    msg = str(e.value)
    assert "\n" not in msg and "report.json" in msg and words in msg and "node_profile" in msg


def test_a_missing_field_is_named(tmp_path):
    bad = dict(GOOD)
    del bad["fwd_s"]
    with pytest.raises(ValueError, match="missing field fwd_s"):
        NodeProfile.from_report(_report(tmp_path, bad), "gpt-ci")


def test_the_cli_prints_one_line_and_exits_2(tmp_path, capsys):
    path = _report(tmp_path, {**GOOD, "fwd_s": [0.001, float("inf")]})
    rc = main(["train", "--preset", "ci", "--n-iters", "1", "--k", "2", "--quiet", "--out", str(tmp_path / "out"),
               "--node-profile", path])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error:") and "fwd_s" in err[0], err


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(GOOD)), st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**7), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5), st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=3))))
def test_fuzzed_profiles_are_read_or_refused_in_one_line(tmp_path_factory, changes):
    tmp = tmp_path_factory.mktemp("fuzz")
    path = _report(tmp, {**GOOD, **changes})
    try:
        prof = NodeProfile.from_report(path, GOOD["graph_name"] if "graph_name" not in changes else changes["graph_name"])
    except ValueError as e:
        assert "\n" not in str(e)
    else:
        assert all(math.isfinite(t) and t >= 0 for t in prof.fwd_s + prof.bwd_s)
        assert len(prof.fwd_s) == len(prof.bwd_s) and isinstance(prof.batch, int) and prof.batch >= 1
