"""``python -m lib.galvatron validate`` (lib/galvatron/validate.py) and the must-hold accuracy of the practice
rules on the calibration set (data/published_runs/calibration.json)."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lib.cli_errors import run_cli
from lib.galvatron.published import load_runs
from lib.galvatron.validate import estimate_run, main

ROOT = Path(__file__).resolve().parents[2]
CAL = ROOT / "data" / "published_runs" / "calibration.json"


@pytest.fixture(scope="module")
def runs():
    return load_runs(str(CAL)).runs


def test_calibration_set_is_the_specs_and_quotes_every_run(runs):
    assert len(runs) == 21
    assert {r.name.split("-")[0] for r in runs} == {"sc21", "mcore", "llama3"}
    assert all(r.quote and r.measured.basis for r in runs)


def test_must_hold_on_the_calibration_set(runs):
    """Median |error| <= 10% and largest <= 25% on tokens/s/GPU under practice (issue 34's bar; it was 15% and
    35%), unstated fields filled by search; every config fits."""
    est = [estimate_run(r, "practice") for r in runs]
    errs = np.abs([e["error"] for e in est])
    assert np.median(errs) <= 0.10 and errs.max() <= 0.25, dict(zip([r.name for r in runs], errs.round(3)))
    assert all(e["fits"] for e in est), [r.name for r, e in zip(runs, est) if not e["fits"]]


def test_the_previous_rules_miss_by_far_more(runs):
    """The issue's finding, kept as a check: under galvatron2's choices (the layer-wise model's numbers) the
    same configurations are off by much more, and most do not fit."""
    est = [estimate_run(r, "galvatron2") for r in runs if r.config.cp in (None, 1)]
    errs = np.abs([e["error"] for e in est])
    assert np.median(errs) > 0.3 and sum(not e["fits"] for e in est) >= 15


def _cli(argv, capsys):
    code = run_cli(main, argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_report(capsys, tmp_path):
    code, out, err = _cli(["--runs", str(CAL), "--json", "--no-search"], capsys)
    assert code == 0
    rep = json.loads(out)
    assert set(rep) >= {"runs", "median_abs_error", "max_abs_error"}
    row = rep["runs"][0]
    assert set(row) >= {"name", "published", "estimate", "error", "fits", "peak_gb", "pick", "pick_estimate"}
    assert rep["max_abs_error"] == pytest.approx(max(abs(r["error"]) for r in rep["runs"]))
    assert "validate" in err                                  # the progress bar


def test_pick_under_the_same_gpus_and_batch(capsys, tmp_path):
    d = json.loads(CAL.read_text())
    d["runs"] = [r for r in d["runs"] if r["name"] == "sc21-gpt-1.7b"]
    f = tmp_path / "one.json"
    f.write_text(json.dumps(d))
    code, out, _ = _cli(["--runs", str(f), "--json"], capsys)
    row = json.loads(out)["runs"][0]
    assert code == 0 and row["pick"].startswith("TP ") and row["pick_estimate"] > 0
    code, out, _ = _cli(["--runs", str(f)], capsys)
    assert "median |error|" in out and "sc21-gpt-1.7b" in out


def _bad(tmp_path, edit):
    d = json.loads(CAL.read_text())
    d = copy.deepcopy(d)
    edit(d)
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(d))
    return str(f)


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d["runs"][2]["config"].pop("tp"), "run 'sc21-gpt-7.5b': field config.tp: Field required"),
    (lambda d: d["runs"][0]["config"].update(zero=5), "run 'sc21-gpt-1.7b': field config.zero"),
    (lambda d: d["runs"][0]["cluster"].update(gpu="v100"), "run 'sc21-gpt-1.7b': field cluster.gpu"),
    (lambda d: d["runs"][1]["model"].update(layerz=3), "run 'sc21-gpt-3.6b': field model.layerz"),
    (lambda d: d["runs"][0]["config"].update(dp=31), "run 'sc21-gpt-1.7b': field config: tp x pp x dp x cp = 31"),
    (lambda d: d["runs"][0]["config"].update(micro_batch=7), "run 'sc21-gpt-1.7b': field config: global_batch=512"),
    (lambda d: d.pop("runs"), "field runs: Field required"),
])
def test_bad_files_are_one_line_naming_file_run_and_field(tmp_path, capsys, edit, needle):
    f = _bad(tmp_path, edit)
    code, out, err = _cli(["--runs", f, "--no-search"], capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert lines[-1].startswith(f"error: {f}: ") and needle in lines[-1], err


def test_other_cli_errors(tmp_path, capsys):
    code, _, err = _cli(["--runs", str(CAL), "--rules", "paper"], capsys)
    assert code == 2 and "--rules: unknown rules 'paper'" in err
    code, _, err = _cli(["--runs", str(tmp_path / "none.json")], capsys)
    assert code == 2 and "none.json" in err
    f = tmp_path / "x.json"
    f.write_text("{")
    code, _, err = _cli(["--runs", str(f)], capsys)
    assert code == 2 and "not valid JSON" in err and str(f) in err
    code, _, err = _cli([], capsys)
    assert code == 2 and "--runs" in err


def test_module_entry_point(tmp_path):
    f = _bad(tmp_path, lambda d: d["runs"][0]["config"].update(tp=0))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "lib.galvatron", "validate", "--runs", f, "--no-search"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith(f"error: {f}: run 'sc21-gpt-1.7b'")


@pytest.mark.parametrize("gpu", ["a100-sxm-80gb", "h100-sxm-80gb"])
def test_stored_efficiency_constants_are_the_fit(runs, gpu):
    """data/hardware/gpus/ holds what benchmarks/fit_efficiency.py fits, to the runs it names."""
    from lib.galvatron.search.efficiency import load_gpu
    from lib.galvatron.validate import fit_efficiency

    p, k, rms, names = fit_efficiency(runs, gpu)
    g = load_gpu(gpu)
    assert (g.peak_fraction, g.knee, list(g.fitted_to)) == (pytest.approx(p), pytest.approx(k), names)
    assert all(n in {r.name for r in runs} for n in names) and len(names) < len([r for r in runs
                                                                                if r.cluster.gpu == gpu])


@pytest.mark.parametrize("gpu", ["a100-sxm-80gb", "h100-sxm-80gb"])
def test_fitted_efficiency_is_inside_its_physical_bounds(gpu):
    """A fitted peak fraction on the grid's edge (0.9: no GEMM runs faster) means something else is
    mispriced, not that the GPU is that fast."""
    from lib.galvatron.search.efficiency import PEAK_BOUNDS, at_edge, load_gpu

    g = load_gpu(gpu)
    assert PEAK_BOUNDS[1] < 1.0 and g.peak_fraction <= PEAK_BOUNDS[1]
    assert at_edge(g.peak_fraction, g.knee) == []


def test_at_edge_names_the_bound():
    from lib.galvatron.search.efficiency import at_edge

    assert at_edge(0.9, 1000.0) == ["peak_fraction 0.9 on (0.3, 0.9)"]
    assert at_edge(0.6, 0.0) == ["knee 0.0 on (0.0, 6000.0)"] and at_edge(0.6, 1000.0) == []


def test_tp_overlap_only_where_the_source_states_it(runs):
    from lib.galvatron.validate import estimate_run, run_rules

    by = {r.name: r for r in runs}
    assert run_rules(by["mcore-h100-32b"]).tp_comm_overlap
    assert not run_rules(by["sc21-gpt-18.4b"]).tp_comm_overlap
    assert not run_rules(by["llama3-405b-16384-8192"]).tp_comm_overlap
    # the stated overlap hides mcore-h100-32b's TP messages under its GEMMs: faster than without
    from lib.galvatron.published import to_config, to_job
    from lib.galvatron.search.cost import step_estimate

    r = by["mcore-h100-32b"]
    e = estimate_run(r)
    e_off = step_estimate(to_job(r), to_config(r), "practice")          # practice itself: no overlap
    assert e["tp_s"] < e_off["tp_s"] and e["tokens_per_s_per_gpu"] > e_off["tokens_per_s_per_gpu"]
    # a run that does not state it is priced as practice prices it under its stack (Meta's: the
    # reduce-scatters queued, FSDP's one unit a block, no op-level checkpointing; nothing else)
    from lib.galvatron.search.rules import PRACTICE

    s = by["llama3-405b-16384-8192"]
    assert run_rules(s) == PRACTICE.with_(name="practice", queued_collectives=True, dp_bucket_layers=1,
                                          without_op_recompute=True)
    assert estimate_run(s, fill="one")["step_s"] == \
        step_estimate(to_job(s), to_config(s), run_rules(s))["step_s"]


def test_null_fields_get_the_documented_defaults(runs):
    from lib.galvatron.published import DEFAULTS, filled, to_config, to_job

    mc = next(r for r in runs if r.name == "mcore-h100-32b")
    cfg = to_config(mc)
    assert (cfg.micro_batch, cfg.vp, cfg.sequence_parallel, cfg.recompute, cfg.zero) == (1, 1, True, "none", 1)
    assert DEFAULTS["micro_batch"] == 1 and DEFAULTS["recompute"] == "none"
    assert set(filled(mc)) == {"vp=1", "micro_batch=1", "sequence_parallel=True", "recompute=none",
                               "dropout=True"}
    sc = next(r for r in runs if r.name == "sc21-gpt-1.7b")
    assert to_config(sc).sequence_parallel is False and to_config(sc).micro_batch == 16
    ll = next(r for r in runs if r.name.startswith("llama3"))
    assert to_job(ll).dropout is False and to_job(sc).dropout is True and to_job(ll).shape.kv_hidden == 1024


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d["runs"][0]["config"].update(tp="8"), "field config.tp"),
    (lambda d: d["runs"][0].update(global_batch=True), "field global_batch"),
])
def test_strict_types(tmp_path, capsys, edit, needle):
    f = _bad(tmp_path, edit)
    code, _, err = _cli(["--runs", f, "--no-search"], capsys)
    assert code == 2 and needle in err


def test_ablation_from_the_paper_rules_to_practice(runs):
    from lib.galvatron.search.rules import MECHANISMS
    from lib.galvatron.validate import ablation

    rows = ablation(runs)
    assert [r["mechanism"] for r in rows] == ["(none)"] + [m[0] for m in MECHANISMS]
    first, last = rows[0], rows[-1]
    assert first["estimates"] == pytest.approx([estimate_run(r, "vldb2023")["tokens_per_s_per_gpu"] for r in runs])
    assert last["estimates"] == pytest.approx([estimate_run(r, "practice")["tokens_per_s_per_gpu"] for r in runs])
    assert first["median_abs_error"] > 0.15 and first["fits"] <= len(runs) // 3
    assert last["median_abs_error"] <= 0.15 and last["fits"] == len(runs)


def test_a_cost_model_error_that_is_not_the_runs_config_is_a_bug_with_its_traceback(monkeypatch, capsys):
    """Only a LayoutError (the run's configuration against its job and rules) is the file's fault, exit 2;
    a plain ValueError inside the cost model is a bug: run_cli lets it through (Python exits 1 with the
    traceback), where it used to become a one-line exit 2."""
    import lib.galvatron.validate as v

    def broken(*a, **k):
        raise ValueError("an internal invariant broke")

    import lib.galvatron.fills as fl

    monkeypatch.setattr(v, "step_estimate", broken)
    monkeypatch.setattr(fl, "step_estimate", broken)
    with pytest.raises(ValueError, match="an internal invariant broke"):
        _cli(["--runs", str(CAL), "--no-search"], capsys)


def test_the_text_report_rounds_each_error_once_as_the_chapters_do(capsys):
    """The JSON keeps 6 decimals: a percentage printed with one decimal is the exact error's rounding."""
    from lib.galvatron.published import load_runs
    from lib.galvatron.validate import estimate_run

    heldout = CAL.parent / "heldout.json"
    code, out, _ = _cli(["--runs", str(heldout), "--no-search"], capsys)
    assert code == 0
    for run in load_runs(str(heldout)).runs:
        exact = estimate_run(run)["error"]
        line = next(x for x in out.splitlines() if x.startswith(run.name + " "))
        assert f"{exact:+.1%}" in line, (run.name, exact, line)
