"""The chapter's memory functions on synthetic records (no process started): the plans it measures, the
rows per stage, the table, the figure and the glue its prose quotes."""

import pytest

from lib.galvatron.runtime import memory_report as mr
from lib.galvatron.runtime.memory import CATEGORIES
from lib.galvatron.runtime.model import ModelConfig
from lib.galvatron.runtime.plan import RunPlan
from lib.galvatron.runtime.profiler import memory_profile

CFG = ModelConfig(d_model=32, n_layer=4, n_head=4, seq_len=8)
PROFILE = memory_profile(CFG)
MB = 2 ** 20


def _record(states_mb, act_mb, transient_mb, gathered_mb=0.0, comm_mb=0.0):
    b = lambda x: int(round(x * MB))  # noqa: E731
    at = dict.fromkeys(CATEGORIES, 0)
    at.update(model_states=b(states_mb), activations=b(act_mb), other_transient=b(transient_mb))
    mx = dict(at, gathered_params=b(gathered_mb), comm_buffers=b(comm_mb))
    return {"peak_bytes": sum(at.values()), "at_peak": at, "maxima": mx, "end_bytes": b(states_mb)}


def _measured(plans, scale=1.0, transient=0.5):
    """Each rank measures exactly what the estimate says (times ``scale``) plus ``transient`` MB."""
    out = {}
    for name, plan in plans.items():
        ranks = []
        for rank in range(plan.world_size):
            stage = rank // plan.stage_size
            e = mr.stage_estimate(plan, PROFILE, stage)
            ranks.append({"rank": rank, "stage": stage, "sdp_impl": None, "memory": _record(
                e["model_states"] * scale, e["activations"] * scale, transient, gathered_mb=0.1, comm_mb=0.2)})
        out[name] = ranks
    return out


def test_memory_plans_cover_every_strategy_and_name_the_searched_one():
    plans = mr.memory_plans(2, 4, 16)
    assert list(plans) == ["dp", "sdp", "tp", "pp, m=2", "pp, m=4"]
    assert plans["pp, m=4"].chunks == 4 and plans["sdp"].layers[0].sdp
    named = mr.memory_plans(2, 4, 16, searched=plans["tp"])
    assert "tp (searched)" in named and "searched" not in named
    new = RunPlan.uniform(2, 4, 2, 1, False, True, 16, 8)
    assert mr.memory_plans(2, 4, 16, searched=new)["searched"] == new
    assert list(mr.memory_plans(1, 4, 16)) == ["dp"]


def test_stage_rows_one_per_stage_with_exact_errors():
    plans = mr.memory_plans(2, 4, 16)
    rows = mr.stage_rows(plans, PROFILE, _measured(plans, scale=1.25))
    assert [r["name"] for r in rows] == ["dp", "sdp", "tp", "pp, m=2, stage 0", "pp, m=2, stage 1",
                                         "pp, m=4, stage 0", "pp, m=4, stage 1"]
    for r in rows:
        assert r["err_model_states"] == pytest.approx(1 / 1.25 - 1, abs=1e-5)
        assert r["err_activations"] == pytest.approx(1 / 1.25 - 1, abs=1e-5)
        assert r["transient_mb"] == pytest.approx(0.5, abs=1e-5)
        assert r["got_peak_mb"] == pytest.approx(r["got_model_states_mb"] + r["got_activations_mb"] + 0.5,
                                                 abs=1e-5)
    assert not mr.within(mr.memory_comparison(plans["dp"], PROFILE, _measured(plans, 1.25)["dp"]))
    assert mr.within(mr.memory_comparison(plans["dp"], PROFILE, _measured(plans, 1.05, 0.0)["dp"]))


def test_table_figure_and_glue():
    plans = mr.memory_plans(2, 4, 16)
    rows = mr.stage_rows(plans, PROFILE, _measured(plans))
    t = mr.memory_table(rows, "cap")
    assert len(t.head) == 5 and len(t.rows) == len(rows)
    r = rows[0]
    assert t.rows[0][1] == f"{r['est_model_states_mb']:.2f} / {r['got_model_states_mb']:.2f} (+0.0%)"
    fig = mr.memory_figure(rows, "title", mr.measured_label("cpu"))
    assert [tr.name for tr in fig.data] == ["model states", "activations", "transient (no estimate)"]
    assert len(fig.data[0].x[0]) == 2 * len(rows)
    assert "measured on this kernel (CPU, gloo)" in fig.layout.xaxis.title.text
    assert "estimated by the cost model" in fig.layout.xaxis.title.text
    assert mr.measured_label("cuda") == "measured on this kernel (CUDA, NCCL)"
    g = mr.memory_glue(rows)
    assert g["mem_tol"] == "10%" and g["mem_within_peak"].endswith(f"of {len(rows)}")


def test_findings_quote_each_gap():
    plans = mr.memory_plans(2, 4, 16, searched=mr.memory_plans(2, 4, 16)["dp"])
    plans["sdp, hand-written"] = plans["sdp"]
    rows = mr.stage_rows(plans, PROFILE, _measured(plans))
    f = mr.memory_findings(rows, _measured(plans), PROFILE, CFG, 8)
    assert f["fsdp2_gathered"] == "0.10 MB" and f["manual_gathered"] == "0.10 MB"
    assert f["dp_comm_max"] == "0.20 MB"  # found under its searched name too
    assert "on the first stage" in f["pp_stage_act_err"]
    assert f["sdp_bias_mb"] == f"{4 * PROFILE.layer_types[0].param_mb * 0.025 * 4:.2f} MB"
    assert "+" in f["act_inflation"] and "profiling batch of 8" in f["act_inflation"]
    assert f["act_err_flat"] == "0.0%"  # DP, SDP and TP: every estimate exact on these synthetic records
    assert f["pp_split_err"] == "not computed"
    g = mr.memory_findings(rows, _measured(plans), PROFILE, CFG, 8, split_rows=rows)
    assert g["pp_split_err"] == "+0.0% on the first stage"
    assert g["split_worst"] == "0.0% for model states and 0.0% for activations"


def test_weight_inflation_is_the_weights_over_the_batch():
    w = mr.weight_inflation(CFG, 4)
    P = CFG.block_param_count() * 4 / MB
    assert w["with_weights_mb"] - w["without_mb"] == pytest.approx(P / 4, rel=0.05)
    assert mr.weight_inflation(CFG, 16)["inflation"] < w["inflation"]


def test_bad_inputs_name_the_field():
    plans = mr.memory_plans(2, 4, 16)
    with pytest.raises(ValueError, match="the model profile .* has 4"):
        mr.stage_estimate(RunPlan.uniform(2, 2, 1, 1, False, True, 16, 1), PROFILE, 0)
    bad = _measured(plans)["dp"]
    bad[0]["memory"] = dict(bad[0]["memory"], peak_bytes=1)
    with pytest.raises(ValueError, match="at_peak sums"):
        mr.memory_comparison(plans["dp"], PROFILE, bad)
    with pytest.raises(ValueError, match="no rows of terms"):
        mr.within([], terms=("peak",))
    with pytest.raises(ValueError, match="'ranks'"):
        mr.validate_summary({"plan": "x"})
