"""The production observations (data/production/), their reader, the switches, the predictions and
``python -m lib.straggler production`` (issue 39)."""

import copy
import json
import math
import subprocess
import sys

import pytest

from lib.straggler import calibration as cal
from lib.straggler import cli
from lib.straggler import predict as pr
from lib.straggler.model import FailureModel, checkpoint_shares, expected_failures, step_efficiency
from lib.straggler.production import KINDS, load, load_many
from lib.straggler.switches import PAGE, PRODUCTION, Switches, parse_switch
from tests.cli_helpers import assert_one_line, call_main

FILES = [str(cal.CALIBRATION), str(cal.HELDOUT)]


def call(argv):
    return call_main(cli.main, ["production", *argv])


@pytest.fixture(scope="module")
def pairs():
    return load_many(FILES)


def write(tmp_path, doc, name="bad.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return str(p)


def first_doc():
    with open(cal.CALIBRATION) as f:
        return json.load(f)


# ------------------------------------------------------------------------------------------- the data
def test_every_observation_is_quoted_and_every_kind_is_covered(pairs):
    kinds = {o.kind for _, o in pairs}
    assert kinds == set(KINDS)
    for _, o in pairs:
        assert len(o.quote) > 30, o.name
        # a null the model fills is said in `assumed`, except the page's documented defaults
        for fld in ("checkpoint_interval_min",):
            if getattr(o.job, fld) is None and o.kind == "ettr":
                assert any(fld in a for a in o.assumed), (o.name, fld)


def test_heldout_sources_fit_nothing(pairs):
    fitted = cal.fitted_names()
    held = {o.name for path, o in pairs if path == str(cal.HELDOUT)}
    calib = {o.name for path, o in pairs if path == str(cal.CALIBRATION)}
    assert fitted and fitted <= calib
    assert not fitted & held


def test_table5_counts_sum_to_llama3_interruptions(pairs):
    counts, groups = cal.cause_counts()
    obs = {o.name: o for _, o in pairs}
    assert sum(counts.values()) == obs["llama3-405b-interruptions"].value == 419
    assert sum(counts[c] for c in groups["GPU (all)"]) == 268


# ------------------------------------------------------------------------------------------- switches
def test_default_switches_are_the_page_and_keep_its_figures():
    assert Switches() == PAGE
    # the page's cluster MTBF and step efficiency, through the switches at their defaults
    assert pr.mtbf_min("h100-sxm-80gb", 16_384, PAGE) == pytest.approx(185.585, abs=1e-3)
    assert pr.mtbf_min("a100-sxm-80gb", 16_384, PAGE) == FailureModel().cluster_mtbf_min(16_384)
    assert pr.page_slowdown(16_384) == pytest.approx(1 / step_efficiency(16_384), rel=1e-12)


def test_bad_switch_is_refused():
    with pytest.raises(ValueError, match="rates"):
        Switches(rates="nope")
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_switch("rates", PAGE)
    assert parse_switch("restart=growing", PAGE).restart == "growing"


def test_generation_rates_differ_and_power_law_anchors_h100_at_llama3():
    page_h100 = pr.mtbf_min("h100-sxm-80gb", 16_384, PAGE)
    gen = PAGE.with_(rates="generation")
    assert pr.mtbf_min("h100-sxm-80gb", 16_384, gen) == page_h100
    assert pr.mtbf_min("a100-sxm-80gb", 16_384, gen) == pytest.approx(page_h100 * cal.A100_MTBF_H
                                                                       / cal.GPU_MTBF_H["h100-sxm-80gb"])
    power = gen.with_(size_law="power")
    alpha, _ = cal.size_law()
    assert 0 < alpha < 1  # the data flatten MTTF against size
    # anchored: the same MTBF at the size Llama 3 measured, and falling slower than 1/N below it
    assert pr.mtbf_min("h100-sxm-80gb", 16_384, power) == pytest.approx(page_h100)
    assert pr.mtbf_min("h100-sxm-80gb", 1_024, power) < pr.mtbf_min("h100-sxm-80gb", 1_024, gen)


def test_size_law_is_the_least_squares_line_of_the_fitted_mttfs():
    alpha, intercept = cal.size_law()
    obs = {o["name"]: o for o in first_doc()["observations"]}
    x = [math.log(obs[n]["job"]["gpus"]) for n in cal.FIT_MTTF]
    y = [-math.log(obs[n]["value"]) for n in cal.FIT_MTTF]
    residuals = [yi - (intercept + alpha * xi) for xi, yi in zip(x, y)]
    assert sum(residuals) == pytest.approx(0, abs=1e-9)
    assert sum(r * xi for r, xi in zip(residuals, x)) == pytest.approx(0, abs=1e-9)


def test_straggler_fit_reproduces_both_figures_it_was_fitted_to():
    mu, sigma = cal.straggler_fit()
    share = 1 - cal._norm_cdf((math.log(0.1) - mu) / sigma)
    waste = cal.lognormal_mean(lambda x: x / (1 + x), mu, sigma)
    assert share == pytest.approx(0.425, abs=1e-6)
    assert waste == pytest.approx(1 - 1 / 1.116, abs=1e-6)
    # the quadrature against a Monte Carlo of the same log-normal
    x = __import__("numpy").random.default_rng(0).lognormal(mu, sigma, 400_000)
    assert (x / (1 + x)).mean() == pytest.approx(waste, abs=2e-3)


def test_growing_restart_grows_and_stays_put_when_stated(pairs):
    obs = {o.name: o for _, o in pairs}
    grow = PAGE.with_(restart="growing")
    small = pr.restart_min(obs["bloom176b-gpu-failures-per-week"], 384, grow, [])
    big = pr.restart_min(obs["llama3-405b-interruptions"], 16_384, grow, [])
    assert 5 < small < big and big == pytest.approx(20.0, abs=0.1)
    assert pr.restart_min(obs["rsc1-16k-ettr-60min"], 16_000, grow, []) == 5  # stated by the source


# ------------------------------------------------------------------------------------------- predictions
def test_predictions_are_the_models_formulas(pairs):
    obs = {o.name: o for _, o in pairs}
    p = pr.predict(obs["llama3-405b-interruptions"], PAGE)
    assert p.predicted == pytest.approx(expected_failures(54 * 1440, 185.585, 5.0), rel=1e-5)
    assert p.error == pytest.approx(p.predicted / 419 - 1)
    p = pr.predict(obs["rsc1-16k-ettr-60min"], PRODUCTION)
    m = pr.mtbf_min("a100-sxm-80gb", 16_000, PRODUCTION)
    assert p.predicted == pytest.approx(float(checkpoint_shares(60, m, 0.0, 5.0)["kept"]))
    assert p.error == pytest.approx(p.predicted - 0.70)


def test_page_has_no_causes_production_does(pairs):
    obs = {o.name: o for _, o in pairs}
    assert pr.predict(obs["llama3-cause-hbm3"], PAGE).predicted is None
    assert pr.predict(obs["llama3-cause-hbm3"], PRODUCTION).predicted == pytest.approx(72 / 419)
    # the Table's count and printed share of faulty GPUs disagree: the model follows the counts
    assert pr.predict(obs["llama3-cause-faulty-gpu"], PRODUCTION).error == pytest.approx(148 / 419 - 0.301)


def test_every_observation_has_a_prediction_under_production(pairs):
    preds = pr.predict_all(pairs, PRODUCTION)
    assert all(p.predicted is not None and math.isfinite(p.predicted) for p in preds)
    for p in preds:
        if p.kind in ("ettr", "cause_share", "straggler_share"):
            assert 0 <= p.predicted <= 1


def test_filled_defaults_are_listed(pairs):
    obs = {o.name: o for _, o in pairs}
    p = pr.predict(obs["byterobust-9600gpu-ettr"], PRODUCTION)
    assert any(f.startswith("checkpoint_interval_min=") for f in p.filled)
    assert "restart_min=5" in p.filled and "gpu rate=H100 (Llama 3)" in p.filled
    assert "job.gpus=1024" in pr.predict(obs["falcon-fail-slow-jct"], PAGE).filled


def test_production_improves_on_the_page_where_the_data_asks(pairs):
    page = pr.by_kind(pr.predict_all(pairs, PAGE))
    prod = pr.by_kind(pr.predict_all(pairs, PRODUCTION))
    assert prod["mttf_hours"]["median_abs_error"] < page["mttf_hours"]["median_abs_error"]
    assert prod["ettr"]["median_abs_error"] < page["ettr"]["median_abs_error"]
    assert "cause_share" not in page and prod["cause_share"]["n"] == 7


# ------------------------------------------------------------------------------------------- the command
def test_json_report_shape_and_by_kind():
    rc, out, err = call(["--data", *FILES, "--json"])
    assert rc == 0, err
    d = json.loads(out)
    assert len(d["observations"]) == 27
    for o in d["observations"]:
        assert {"name", "kind", "published", "predicted", "error"} <= set(o)
    errs = [abs(o["error"]) for o in d["observations"] if o["kind"] == "ettr"]
    assert d["by_kind"]["ettr"]["n"] == len(errs)
    assert d["by_kind"]["ettr"]["max_abs_error"] == pytest.approx(max(errs))
    assert set(d["by_kind"]) == set(KINDS)
    held = d["by_file"][FILES[1]]
    assert held["interruptions"]["n"] == 4 and "cause_share" not in held
    assert sum(v["n"] for f in d["by_file"].values() for v in f.values()) == 27


def test_text_report_ends_with_errors_by_kind():
    rc, out, _ = call(["--data", FILES[1], "--model", "page"])
    assert rc == 0
    assert "error by kind" in out and "interruptions" in out.split("error by kind")[1]
    assert "heldout.json" not in out  # one file: no per-file breakdown
    assert "no model" not in out  # the held-out set has no cause shares


def test_page_model_reports_no_cause_prediction():
    rc, out, _ = call(["--data", FILES[0], "--model", "page"])
    assert rc == 0 and "no model" in out


def test_switch_flag_changes_one_switch():
    rc, out, _ = call(["--data", FILES[0], "--json", "--switch", "restart=growing"])
    d = json.loads(out)
    assert rc == 0 and d["switches"]["restart"] == "growing" and d["switches"]["rates"] == "generation"


def test_runs_as_a_module():
    r = subprocess.run([sys.executable, "-m", "lib.straggler", "production", "--data", FILES[1], "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["by_kind"]


# ------------------------------------------------------------------------------------------- bad files
def _mutate(fn):
    doc = copy.deepcopy(first_doc())
    fn(doc)
    return doc


BAD = [
    (lambda d: d["observations"][0].update(kind="uptime"), ["llama3-405b-interruptions", "kind"]),
    (lambda d: d["observations"][0]["job"].update(days=None), ["llama3-405b-interruptions", "job.days"]),
    (lambda d: d["observations"][1].update(value=1.5), ["llama3-405b-ettr", "value", "[0, 1]"]),
    (lambda d: d["observations"][2].pop("cause"), ["llama3-cause-faulty-gpu", "cause"]),
    (lambda d: d["observations"][0]["job"].update(gpus=0), ["llama3-405b-interruptions", "job.gpus"]),
    (lambda d: d["observations"][0]["job"].update(gpus="many"), ["llama3-405b-interruptions", "job.gpus"]),
    (lambda d: d["observations"][0]["cluster"].update(gpus=8), ["llama3-405b-interruptions", "exceeds"]),
    (lambda d: d["observations"][0].update(colour="red"), ["llama3-405b-interruptions", "colour"]),
    (lambda d: d["observations"][0].pop("quote"), ["llama3-405b-interruptions", "quote"]),
    (lambda d: d["observations"][1].update(name="llama3-405b-interruptions"), ["llama3-405b-interruptions",
                                                                                 "more than once"]),
    (lambda d: d.update(observations=[]), ["observations"]),
    (lambda d: d["observations"][20].update(value=0.5), ["bytedance-straggler-waste", "straggler_slowdown"]),
]


@pytest.mark.parametrize("mutate, words", BAD)
def test_bad_file_is_one_line_naming_file_observation_and_field(tmp_path, mutate, words):
    path = write(tmp_path, _mutate(mutate))
    rc, out, err = call(["--data", path])
    assert_one_line(rc, err, "bad.json", *words)
    assert out == ""


@pytest.mark.parametrize("text, words", [("{not json", ["not valid JSON", "line 1"]), ("[]", ["(top level)"])])
def test_broken_json_is_one_line(tmp_path, text, words):
    rc, _, err = call(["--data", write(tmp_path, text)])
    assert_one_line(rc, err, "bad.json", *words)


def test_missing_file_and_same_name_in_two_files(tmp_path):
    rc, _, err = call(["--data", str(tmp_path / "nope.json")])
    assert_one_line(rc, err, "nope.json")
    copy_path = write(tmp_path, first_doc(), "copy.json")
    rc, _, err = call(["--data", FILES[0], copy_path])
    assert_one_line(rc, err, "copy.json", "llama3-405b-interruptions", "also in")


def test_bad_flags_are_one_line():
    assert_one_line(*_rc_err(["--data", FILES[0], "--switch", "rates=sometimes"]), "--switch", "rates")
    assert_one_line(*_rc_err(["--data", FILES[0], "--model", "toy"]), "--model")
    assert_one_line(*_rc_err([]), "--data")


def _rc_err(argv):
    rc, _, err = call(argv)
    return rc, err


def test_load_names_the_file(tmp_path):
    with pytest.raises(ValueError, match="bad.json"):
        load(write(tmp_path, {"source": "x"}))


# ------------------------------------------------------------------------------------------- properties
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from lib.straggler.production import Observation  # noqa: E402
from lib.straggler.switches import CHOICES  # noqa: E402

SWITCHES = st.builds(Switches, **{k: st.sampled_from(v) for k, v in CHOICES.items()})
GPUS = st.integers(1, 1_000_000)


@settings(max_examples=60, deadline=None)
@given(sw=SWITCHES, gpu=st.sampled_from(["h100-sxm-80gb", "a100-sxm-80gb", "tpu v9"]), n=GPUS, m=GPUS)
def test_a_bigger_job_never_fails_less_often(sw, gpu, n, m):
    lo, hi = sorted((n, m))
    assert pr.mtbf_min(gpu, hi, sw) <= pr.mtbf_min(gpu, lo, sw) * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(sw=SWITCHES, n=st.integers(1, 200_000), days=st.floats(0.01, 365),
       ckpt=st.one_of(st.none(), st.floats(0, 30)), interval=st.one_of(st.none(), st.floats(0.1, 600)),
       restart=st.one_of(st.none(), st.floats(0, 60)))
def test_an_ettr_prediction_is_a_share(sw, n, days, ckpt, interval, restart):
    o = Observation(name="x", quote="a quote long enough to stand for one", kind="ettr",
                    cluster={"gpu": "h100-sxm-80gb", "gpus": n},
                    job={"gpus": n, "days": days, "checkpoint_min": ckpt, "checkpoint_interval_min": interval,
                         "restart_min": restart}, value=0.5, unit="ratio")
    p = pr.predict(o, sw)
    assert 0 <= p.predicted <= 1 and math.isfinite(p.error)
