"""The held-out published runs (data/published_runs/heldout.json): runs from sources other than the
calibration set's (BigScience BLOOM-176B; MosaicML llm-foundry's MPT throughput tables; MT-NLG 530B), which judge the
`practice` rules without having been used to build or fit them. The file must parse under the strict
schema, its derived figures must follow from its stated formulas, and validate must run over it. No accuracy
threshold is asserted: the errors are reported (chapter 9, "Held-out runs from other sources"), not tuned.
The one result asserted, that every published configuration fits, was set after seeing the results."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from lib.cli_errors import run_cli
from lib.galvatron.published import load_runs
from lib.galvatron.validate import main, validate_runs

ROOT = Path(__file__).resolve().parents[2]
HELD = ROOT / "data" / "published_runs" / "heldout.json"
CAL = ROOT / "data" / "published_runs" / "calibration.json"


@pytest.fixture(scope="module")
def held():
    return load_runs(str(HELD)).runs


@pytest.fixture(scope="module")
def report(held):
    return validate_runs([(str(HELD), r) for r in held], "practice", search=False, progress=False)


def test_parses_under_the_strict_schema_and_quotes_every_run(held):
    assert 5 <= len(held) <= 15
    for r in held:
        assert r.quote and r.measured.basis, r.name
        assert r.measured.basis.split(":")[0] in ("measured", "derived"), r.name


def test_disjoint_from_the_calibration_set(held):
    cal = load_runs(str(CAL)).runs
    assert not {r.name for r in held} & {r.name for r in cal}
    # other sources: none of the calibration set's (SC'21, Megatron-LM README, Llama 3)
    assert not any(re.search(r"SC'21|2104\.04473|model_table|Llama 3|2407\.21783", r.quote) for r in held)


def test_tests_mechanisms_the_calibration_set_cannot(held):
    """FSDP (ZeRO-3), ZeRO-1 with pipelining, sequences longer than any calibration run, a slow fabric."""
    cal = load_runs(str(CAL)).runs
    assert not any(r.config.zero == 3 for r in cal) and any(r.config.zero == 3 for r in held)
    assert max(r.model.seq_len for r in held) > max(r.model.seq_len for r in cal)
    assert any(r.config.zero == 1 and r.config.pp > 1 for r in held)
    assert any((r.cluster.fabric_gb_s_per_gpu or 99) < 25 for r in held)


def test_every_null_field_is_listed_as_assumed(held):
    for r in held:
        nulls = [f for f in ("cp", "vp", "micro_batch", "sequence_parallel", "zero", "recompute")
                 if getattr(r.config, f) is None]
        nulls += [f for f in ("gpus_per_node", "fabric_gb_s_per_gpu") if getattr(r.cluster, f) is None]
        nulls += [f for f in ("kv_heads", "ffn", "gated_mlp", "dropout") if getattr(r.model, f) is None]
        for f in nulls:
            assert any(f in a for a in r.assumed), (r.name, f)


def test_mosaic_batches_add_up(held):
    """The table's MicroBatchSize x GradAccum x #GPUs is its GlobalBatchSize (FSDP: dp = #GPUs)."""
    mpt = [r for r in held if r.name.startswith("mpt-")]
    assert mpt
    for r in mpt:
        ga = int(re.search(r"GradAccum (\d+)", r.measured.basis).group(1))
        assert r.config.micro_batch * ga * r.config.dp == r.global_batch, r.name
        assert r.config.zero == 3 and r.config.tp == r.config.pp == 1


def test_bloom_rate_follows_bigscience_formula(held):
    """tokens/s/GPU = TFLOP/s / (8 x parameters), parameters from the shape (l(12h^2 + 13h) + V h)."""
    (b,) = [r for r in held if r.name.startswith("bloom")]
    m = b.model
    params = m.layers * (12 * m.hidden ** 2 + 13 * m.hidden) + m.vocab * m.hidden
    assert params == pytest.approx(176.247e9, rel=1e-4)
    assert b.measured.tokens_per_s_per_gpu == pytest.approx(b.measured.tflops_per_gpu * 1e12 / (8 * params),
                                                            rel=1e-3)


def test_mtnlg_rate_follows_the_iteration_time(held):
    """tokens/s/GPU = global batch x sequence / (iteration time x GPUs), the time as the basis states it."""
    mt = [r for r in held if r.name.startswith("mtnlg")]
    assert len(mt) == 3 and sorted(r.config.dp for r in mt) == [8, 10, 12]
    for r in mt:
        t = float(re.search(r"/ \(([\d.]+) s per iteration", r.measured.basis).group(1))
        want = r.global_batch * r.model.seq_len / (t * r.cluster.gpus)
        assert r.measured.tokens_per_s_per_gpu == pytest.approx(want, abs=0.01), r.name
        assert r.config.tp * r.config.pp * r.config.dp == r.cluster.gpus and r.config.pp == 35


def test_validate_runs_over_it(held, report):
    rows = report["runs"]
    assert [r["name"] for r in rows] == [r.name for r in held]
    assert all(math.isfinite(r["estimate"]) and r["estimate"] > 0 for r in rows)
    errs = np.abs([r["error"] for r in rows])
    assert report["median_abs_error"] == pytest.approx(np.median(errs), abs=1e-4)
    assert report["max_abs_error"] == pytest.approx(errs.max(), abs=1e-4)


def test_every_published_configuration_fits(report):
    """Set after seeing the results: every one of them trained, and every one fits in the practice
    memory model."""
    assert all(r["fits"] for r in report["runs"]), [r["name"] for r in report["runs"] if not r["fits"]]


def test_cli_json_over_both_files(capsys):
    code = run_cli(main, ["--runs", str(CAL), str(HELD), "--json", "--no-search"])
    out = capsys.readouterr().out
    assert code == 0
    names = [r["name"] for r in json.loads(out)["runs"]]
    assert len(names) == len(set(names)) == 21 + len(load_runs(str(HELD)).runs)
