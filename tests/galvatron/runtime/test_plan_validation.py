"""Strict plan validation (issue 18, finding 4): both plan forms the CLI reads (Galvatron's native JSON and the
runtime's own ``RunPlan.to_dict``) are checked by pydantic models before any work; a bad value is one line naming
the file and the field, never coerced with ``int()``."""

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lib.galvatron.__main__ import main
from lib.galvatron.runtime.plan import MAX_RANKS, RunPlan, load_plan

NATIVE = {"pp_deg": 1, "tp_sizes_enc": "2,1", "tp_consecutive_flags": "1,1", "dp_types_enc": "0,1",
          "global_bsz": 8, "chunks": 1, "world_size": 2}


def _cli(tmp_path, capsys, plan, *extra):
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(plan))
    code = main(["run", "--plan", str(p), "--steps", "1", "--warmup", "0", *extra])
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize("field, value, says", [
    ("tp_sizes_enc", [1.5, 1], "plan.json: tp_sizes_enc[0]: 1.5 is not an integer"),  # ran as tp = 1 before
    ("tp_sizes_enc", "1.5,1", "plan.json: tp_sizes_enc: '1.5' in '1.5,1' is not an integer"),
    ("pp_deg", True, "plan.json: pp_deg: true is not an integer"),                    # ran as pp = 1 before
    ("global_bsz", 2.7, "plan.json: global_bsz: 2.7 is not an integer"),              # ran with batch 2 before
    ("pp_deg", 2.5, "plan.json: pp_deg: 2.5 is not an integer"),                      # said "pp_deg=2" before
    ("global_bsz", 0, "plan.json: global_bsz: 0 is too small"),                       # died inside torch before
    ("chunks", "2", "plan.json: chunks: \"2\" is not an integer"),
    ("pp_deg", 10 ** 30, "plan.json: pp_deg: 1000000000000000000000000000000 is too large"),
    ("world_size", MAX_RANKS + 1, f"world_size: {MAX_RANKS + 1} is too large"),
])
def test_finding4_plan_values_are_refused_not_coerced(tmp_path, capsys, field, value, says):
    """Finding 4: each of these ran (or failed misleadingly) after ``int()``; now exit 2 and one line."""
    code, err = _cli(tmp_path, capsys, dict(NATIVE, **{field: value}))
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert says in err and field in err, err
    assert "pp_deg=2" not in err


def test_the_message_says_what_is_allowed_and_why_for_upper_bounds(tmp_path, capsys):
    _, err = _cli(tmp_path, capsys, dict(NATIVE, global_bsz=1 << 30))
    assert "global_bsz must be an integer in [1, 1048576] (samples per iteration)" in err


@pytest.mark.parametrize("mutate, says", [
    (lambda d: d["layers"][0].update(tp="2"), "layers[0].tp: \"2\" is not an integer; tp must be"),
    (lambda d: d["layers"][0].update(tp=2.0), "layers[0].tp: 2.0 is not an integer"),
    (lambda d: d["layers"][1].update(sdp=1), "layers[1].sdp: 1 is not true or false"),
    (lambda d: d.update(pp=True), "pp: true is not an integer"),
    (lambda d: d.update(typo=1), "unknown field typo"),
    (lambda d: d.pop("global_bsz"), "missing field global_bsz"),
    (lambda d: d.update(layers=[]), "layers: [] is too short"),
])
def test_the_runtime_plan_form_is_strict_too(mutate, says):
    d = RunPlan.uniform(2, 2, tp=2).to_dict()
    mutate(d)
    with pytest.raises(ValueError) as e:
        load_plan(d, 2, "run.json")
    assert str(e.value).startswith("run.json: ") and says in str(e.value) and "\n" not in str(e.value)


def test_valid_plans_of_both_forms_still_load_exactly():
    p = load_plan(NATIVE, 2)
    assert [(s.tp, s.dp, s.sdp) for s in p.layers] == [(2, 1, False), (1, 2, True)]
    assert load_plan(dict(NATIVE, tp_sizes_enc=[2, 1], dp_types_enc=[0, 1], tp_consecutive_flags=[1, 1])) == p
    assert load_plan(p.to_dict()) == p
    assert load_plan(dict(NATIVE, model="gpt", est_iter_s=0.1)) == p  # the search's extra keys pass


def test_non_finite_and_non_json_plans_are_one_line(tmp_path, capsys):
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(NATIVE).replace('"global_bsz": 8', '"global_bsz": NaN'))
    assert main(["run", "--plan", str(p)]) == 2
    assert "plan.json: global_bsz: NaN is not an integer" in capsys.readouterr().err
    p.write_text("{not json")
    assert main(["run", "--plan", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "plan.json: not valid JSON" in err
    assert main(["run", "--plan", str(tmp_path / "absent.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "absent.json: No such file" in err


_values = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                    st.text(max_size=8), st.lists(st.one_of(st.integers(-3, 9), st.floats(), st.booleans(),
                                                            st.text(max_size=3)), max_size=4))
_native_keys = st.sampled_from(sorted(NATIVE) + ["checkpoint", "pp_division"])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(_native_keys, st.one_of(_values, st.just("DELETE")), min_size=1, max_size=3))
def test_fuzzed_native_plans_are_valid_exactly_or_one_line_errors(changes):
    """Wrong types, ranges, NaN/inf, huge values, missing fields: a plan loads only if every integer field
    really is an integer in range (the loaded values equal the file's), and otherwise the error is one line
    that names the source."""
    d = dict(NATIVE)
    for k, v in changes.items():
        if v == "DELETE":
            d.pop(k, None)
        else:
            d[k] = v
    try:
        p = load_plan(d, 2, "fuzz.json")
    except ValueError as e:
        msg = str(e)
        assert msg.startswith("fuzz.json: ") and "\n" not in msg and len(msg) < 400, msg
        return
    for k in ("pp_deg", "global_bsz", "chunks", "world_size"):
        if k in d:
            assert type(d[k]) is int  # never a float, bool or string that was coerced
    assert p.pp == d["pp_deg"] and p.global_bsz == d["global_bsz"] and p.chunks == d["chunks"]
    assert all(isinstance(s.tp, int) and s.tp >= 1 for s in p.layers)


@settings(max_examples=30, deadline=None)
@given(layer=st.dictionaries(st.sampled_from(["tp", "dp", "sdp", "consecutive", "ckpt", "x"]), _values, max_size=5))
def test_fuzzed_runtime_layers_are_valid_exactly_or_one_line_errors(layer):
    d = RunPlan.uniform(2, 2, tp=2).to_dict()
    d["layers"][0] = layer
    try:
        p = load_plan(d, 2, "fuzz.json")
    except ValueError as e:
        assert str(e).startswith("fuzz.json: ") and "\n" not in str(e)
        return
    assert type(layer["tp"]) is int and type(layer["dp"]) is int and p.layers[0].tp == layer["tp"]
    assert all(type(layer.get(k, True)) is bool for k in ("sdp", "consecutive", "ckpt"))
    assert not math.isnan(p.global_bsz)


@pytest.mark.parametrize("field, value, says", [
    ("pp_deg", 2.5, "plan: pp_deg: 2.5 is not an integer"), ("pp_deg", True, "plan: pp_deg: True is not an integer"),
    ("global_bsz", 2.7, "plan: global_bsz: 2.7 is not an integer"), ("global_bsz", 0, "global_bsz: 0 is out of range"),
    ("tp_sizes_enc", [1.5, 1], "plan: tp_sizes_enc[0]: 1.5 is not an integer"),
    ("tp_sizes_enc", "1.5,1", "plan: tp_sizes_enc: '1.5' is not an integer"),
    ("est_iter_s", math.inf, "plan: est_iter_s: inf is not a finite number"),
])
def test_finding4_the_search_plan_reads_galvatron_json_strictly_too(field, value, says):
    """Finding 4 in the search's reader of the same format (``search.plan.Plan.from_dict``, numpy only, so its
    checks are ``lib.cli_errors.check_int`` rather than pydantic)."""
    from lib.galvatron.search.plan import Plan

    with pytest.raises(ValueError) as e:
        Plan.from_dict(dict(NATIVE, **{field: value}))
    assert says in str(e.value) and "\n" not in str(e.value)


@settings(max_examples=30, deadline=None)
@given(changes=st.dictionaries(_native_keys, _values, min_size=1, max_size=3))
def test_fuzzed_plans_are_read_alike_by_the_search_and_the_runtime(changes):
    """Both readers of Galvatron's JSON accept a fuzzed plan with the same integers, or both refuse it."""
    from lib.galvatron.search.plan import Plan

    d = dict(NATIVE, **changes)
    try:
        rp = load_plan(d, 2, "fuzz.json")
    except ValueError:
        rp = None
    try:
        sp = Plan.from_dict(d, 2)
    except ValueError as e:
        assert "\n" not in str(e)
        sp = None
    if sp is not None and rp is not None:  # the search is stricter (powers of two, divisibility): no converse
        assert (sp.pp_deg, sp.global_bsz, sp.chunks) == (rp.pp, rp.global_bsz, rp.chunks)
        assert list(sp.tp_sizes_enc) == [s.tp for s in rp.layers]
    if sp is not None:
        assert rp is not None, d


@pytest.mark.parametrize("field, value", [("checkpoint", ""), ("tp_sizes_enc", "2,,1"), ("dp_types_enc", "0,1,")])
def test_an_empty_entry_is_refused_by_both_readers(field, value):
    """Hypothesis found ``checkpoint: ""`` read by the search as "no checkpointing" and refused by the runtime;
    both now refuse an empty entry, in one line naming the field."""
    from lib.galvatron.search.plan import Plan

    d = dict(NATIVE, **{field: value})
    for read in (lambda: load_plan(d, 2, "fuzz.json"), lambda: Plan.from_dict(d, 2)):
        with pytest.raises(ValueError) as e:
            read()
        assert field in str(e.value) and "empty" in str(e.value) and "\n" not in str(e.value)
