"""Chapter 9's "plan your own job" widget: its pure function, its twin, its errors, and its live build."""

import json

import pytest

from lib.galvatron import widgets as W
from lib.galvatron.search.analytic import SHAPES


@pytest.fixture(scope="module")
def answer():
    return W.job_answer(W.JobSettings("llama3-8b", 16, "h100-sxm-80gb", 64, 2048))


def test_rows_are_the_fastest_first_and_fit(answer):
    tok = [r["tokens_per_s_per_gpu"] for r in answer.rows]
    assert answer.error is None and len(tok) == 5 and tok == sorted(tok, reverse=True)
    assert all(0 < r["mfu"] < 1 and r["peak_gb"] <= answer.usable_gb for r in answer.rows)
    assert answer.priced > len(tok)


def test_the_same_search_as_plan(answer):
    from lib.galvatron.job_plan import make_job, plan, read_model

    rep = plan(make_job(read_model("llama3-8b", 2048), "h100-sxm-80gb", 16, 64), None, 5)
    assert [r["label"] for r in rep["layouts"]] == [r["label"] for r in answer.rows]
    assert rep["layouts"][0]["mfu"] == pytest.approx(answer.rows[0]["mfu"], abs=1e-4)


def test_the_stack_is_planned_as_plan_plans_it():
    """A stack (or an alias) reaches the search: nanotron's answer is plan's under nanotron, and it keeps to
    what nanotron can run (no interleaving, ZeRO-1 at most)."""
    from lib.galvatron.job_plan import make_job, plan, read_model

    a = W.job_answer(W.JobSettings("llama3-70b", 64, "h100-sxm-80gb", 128, 4096, stack="nanotron"))
    rep = plan(make_job(read_model("llama3-70b", 4096), "h100-sxm-80gb", 64, 128), "nanotron", 5)
    assert a.error is None and a.stack == "nanotron" and "under nanotron" in a.headline()
    assert [r["label"] for r in rep["layouts"]] == [r["label"] for r in a.rows]
    assert not any("VP" in r["label"] or "ZeRO-2" in r["label"] or "ZeRO-3" in r["label"] for r in a.rows)
    assert W.job_answer(W.JobSettings("llama3-8b", 16, "h100-sxm-80gb", 64, 2048, stack="TorchTitan")).stack == "fsdp"
    assert "nanotron" in W.job_figure(a).layout.title.text


def test_hf_fields_give_the_shape_of_the_named_model():
    s = SHAPES["llama3-8b"]
    fields = {"num_hidden_layers": s.n_layers, "hidden_size": s.hidden, "num_attention_heads": s.n_heads,
              "num_key_value_heads": s.n_kv_heads or s.n_heads,
              "intermediate_size": s.ffn_hidden or 4 * s.hidden,
              "vocab_size": s.vocab, "hidden_act": "silu" if s.gated_mlp else "gelu"}
    by_name = W.job_answer(W.JobSettings("llama3-8b", 16, "h100-sxm-80gb", 64, 2048))
    by_fields = W.job_answer(W.JobSettings(fields, 16, "h100-sxm-80gb", 64, 2048))
    assert [r["label"] for r in by_fields.rows] == [r["label"] for r in by_name.rows]
    assert json.loads(W.EXAMPLE_FIELDS)["num_hidden_layers"] == 32


@pytest.mark.parametrize("settings, words", [
    (W.JobSettings({"num_hidden_layers": 0}), ("config", "num_hidden_layers", "0")),
    (W.JobSettings(gpus=12), ("--gpus", "12", "multiple of 8")),
    (W.JobSettings(gpu="tpu-v9"), ("--gpu", "tpu-v9", "allowed")),
    (W.JobSettings("nope"), ("--model", "nope", "llama3-8b")),
    (W.JobSettings("llama3-405b", 8), ("no layout fits", "more GPUs")),
    (W.JobSettings(stack="jax"), ("--stack", "jax", "nanotron")),
    (W.JobSettings(fabric="token-ring"), ("--fabric", "token-ring", "efa-p5")),
])
def test_bad_settings_come_back_as_one_line(settings, words):
    a = W.job_answer(settings)
    assert a.error and "\n" not in a.error and not a.rows
    assert all(w in a.error for w in words), a.error


def test_twin_draws_one_bar_per_layout_the_first_highlighted(answer):
    fig = W.job_figure(answer)
    bar = fig.data[0]
    assert list(bar.y)[::-1] == [r["label"] for r in answer.rows]
    colors = list(bar.marker.color)
    assert colors[-1] != colors[0] and fig.layout.title.text


def test_show_in_ci_draws_the_twin(monkeypatch):
    from IPython import display as D

    from lib import book

    shown = []
    monkeypatch.setattr(book, "in_ci", lambda: True)
    monkeypatch.setattr(D, "display", lambda *a, **k: shown.extend(a))
    w = W.PlanYourJob("llama3-8b", 16, "h100-sxm-80gb", 64, 2048)
    w.show()
    assert w._built is None and shown            # no controls built in CI


def test_live_widget_answers_and_reads_hf_fields(monkeypatch):
    pytest.importorskip("ipywidgets")
    w = W.PlanYourJob("llama3-8b", 16, "h100-sxm-80gb", 64, 2048)
    w.widget()
    assert w.last is not None and w.last.error is None
    c = w._widgets()
    c["model"].value = W.CUSTOM
    assert isinstance(w.last.settings.model, dict) and w.last.error is None
    c["fields"].value = "{not json"
    assert "not JSON" in w.last.error
    c["model"].value = "llama3-8b"
    assert c["stack"].value == "megatron-lm" and "nanotron" in c["stack"].options
    c["stack"].value = "nanotron"
    assert w.last.settings.stack == "nanotron" and w.last.stack == "nanotron" and w.last.error is None
    assert c["fabric"].value == "" and "efa-p5" in [v for _, v in c["fabric"].options]
    c["fabric"].value = "efa-p5"
    assert w.last.settings.fabric == "efa-p5" and w.last.error is None and "on efa-p5" in w.last.headline()


def test_the_fabric_reaches_the_plan():
    """A fabric setting is plan --fabric: on 512 GPUs the measured EFA figures slow the data-parallel layouts,
    so the answer differs from the default port's."""
    from lib.galvatron.job_plan import make_job, plan, read_model

    a = W.job_answer(W.JobSettings("llama3-8b", 512, "h100-sxm-80gb", 256, 4096, fabric="efa-p5"))
    rep = plan(make_job(read_model("llama3-8b", 4096), "h100-sxm-80gb", 512, 256, fabric="efa-p5"),
               "megatron-lm", 5)
    assert a.error is None and [r["label"] for r in rep["layouts"]] == [r["label"] for r in a.rows]
    plain = W.job_answer(W.JobSettings("llama3-8b", 512, "h100-sxm-80gb", 256, 4096))
    assert a.rows[0]["tokens_per_s_per_gpu"] < plain.rows[0]["tokens_per_s_per_gpu"]
