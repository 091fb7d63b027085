"""nanotron's published runs (data/published_runs/playbook_best.json, nanotron_tp_sweep.json): the Ultra-Scale
Playbook's best configuration of each model size and node count, and the TP sweep of the script behind its
benchmarks. Each figure follows from its quote; the runs state their stack and fabric; the report over them
is computed, with bounds that held-out data could break."""

import re
from pathlib import Path

import pytest

from lib.cli_errors import UserError
from lib.galvatron.published import load_runs, to_job
from lib.galvatron.ranking import sweep_of
from lib.galvatron.validate import validate_runs
from tests import ROOT as _ROOT

ROOT = Path(_ROOT)

BEST = ROOT / "data" / "published_runs" / "playbook_best.json"
TP = ROOT / "data" / "published_runs" / "nanotron_tp_sweep.json"


def _flops_per_token(m) -> float:
    """nanotron's get_flops (models/llama.py) per token: forward x 3, attention over the full square."""
    L, h, f, V, s = m.layers, m.hidden, m.ffn, m.vocab, m.seq_len
    return 3 * (2 * L * h * 3 * h + 4 * L * s * h + 2 * L * h * h + 6 * L * h * f + 2 * V * h)


@pytest.fixture(scope="module")
def best():
    return load_runs(str(BEST)).runs


def test_every_cell_of_the_heatmap_adds_up(best):
    assert len(best) == 26 and {r.stack for r in best} == {"nanotron"}
    assert {r.cluster.fabric for r in best} == {"efa-p5"}
    for r in best:
        q = re.search(r"'DP: (\d+) TP: (\d+) PP: (\d+) GAS: (\d+) MBS: (\d+) ZeRO-(\d)', MFU ([\d.]+)", r.quote)
        dp, tp, pp, gas, mbs, zero = map(int, q.groups()[:6])
        c = r.config
        assert (c.dp, c.tp, c.pp, c.micro_batch, c.zero) == (dp, tp, pp, mbs, zero), r.name
        assert dp * gas * mbs == r.global_batch == 256 and dp * tp * pp == r.cluster.gpus, r.name
        assert c.sequence_parallel == (tp > 1) and c.tp_comm_overlap and c.recompute == "none"
        mem = float(re.search(r"memory ([\d.]+)GB", r.quote).group(1))
        assert r.measured.peak_memory_gb == mem and "max_memory_reserved" in r.measured.memory_basis
        mfu = float(q.group(7)) / 100
        assert r.measured.tokens_per_s_per_gpu == pytest.approx(mfu * 989.5e12 / _flops_per_token(r.model),
                                                                rel=1e-4), r.name
    # the four model sizes of the figure, from the script's shapes (estimate_num_params, embeddings tied
    # below 4B): 1.34, 3.57, 8.86 and 80.0 billion
    sizes = {}
    for r in best:
        m = r.model
        emb = m.vocab * m.hidden * (1 if m.ffn < 10_000 else 2)
        sizes[r.name.split("-")[1]] = (emb + m.layers * (3 * m.hidden * m.ffn + 4 * m.hidden**2)) / 1e9
    assert sizes == pytest.approx({"1.34b": 1.34, "3.57b": 3.57, "8.86b": 8.86, "80b": 80.0}, abs=0.007)


def test_tp_sweep_rates_follow_their_tflops():
    rs = load_runs(str(TP)).runs
    assert len(rs) == 5 and len({sweep_of(r.name) for r in rs}) == 1
    for r in rs:
        tfl = float(re.search(r"# ([\d.]+) TFLOPs", r.quote).group(1))
        tok = float(re.search(r"TFLOPs, ([\d.]+) tok/s/gpu", r.quote).group(1))
        assert r.measured.tokens_per_s_per_gpu == tok
        # the comment's TFLOP/s over its tokens/s is nanotron's FLOPs per token at sequence 4096
        assert tfl * 1e12 / tok == pytest.approx(_flops_per_token(r.model), rel=2e-3)
        assert r.config.tp == r.cluster.gpus and r.global_batch == r.config.micro_batch


def test_jobs_carry_the_fabric_and_its_line_rate(best, tmp_path):
    j = to_job(best[0])
    assert j.fabric == "efa-p5" and j.port_gb_s == 50.0
    tp2 = to_job(load_runs(str(TP)).runs[0])                      # 2 GPUs of an 8-GPU node
    assert tp2.port_gb_s == 50.0 and tp2.gpus_per_node == 2
    bad = BEST.read_text().replace('"efa-p5"', '"token-ring"', 1)
    (tmp_path / "bad.json").write_text(bad)
    with pytest.raises(UserError, match=r"field cluster.fabric: 'token-ring' is not a fabric"):
        load_runs(str(tmp_path / "bad.json"))


def test_report_over_them(best):
    """Held out (nothing fitted or chosen on them): the one-node cells priced within a quarter, every
    published configuration fits, and the TP sweep ranked in order."""
    rep = validate_runs([(str(BEST), r) for r in best], search=False, progress=False)
    rows = {r["name"]: r for r in rep["runs"]}
    assert all(r["fits"] for r in rep["runs"])
    assert all(abs(rows[f"playbook-{m}-1n"]["error"]) < 0.25 for m in ("1.34b", "3.57b", "8.86b"))
    tp = validate_runs([(str(TP), r) for r in load_runs(str(TP)).runs], search=False, progress=False)
    assert tp["sweeps"][0]["spearman"] > 0.8 and tp["sweeps"][0]["top1_regret"] < 0.05


def test_playbook_report_prices_each_run_three_ways_and_draws_them():
    from lib.galvatron import practice_figures as pf
    from lib.galvatron.playbook_report import BANDS, band_rows, band_table, playbook_report

    rep = playbook_report(search=False)
    rows = rep["rows"]
    assert len(rows) == 26 and sum(len(band_rows(rep, b)) for b, _, _ in BANDS) == 26
    # one node: no traffic between nodes, the fabric changes nothing; 64 nodes: it changes every run
    assert all(r["estimate"] == r["estimate_default"] for r in rows if r["nodes"] == 1)
    assert all(r["estimate"] != r["estimate_default"] for r in rows if r["nodes"] == 64)
    # the what-if reading differs from the file's between nodes, and not on one node
    assert all(r["error"] == r["error_bandwidth"] for r in rows if r["nodes"] == 1)
    assert all(r["error"] != r["error_bandwidth"] for r in rows if r["nodes"] == 64)
    t = band_table(rep)
    assert [r[0] for r in t.rows] == [b for b, _, _ in BANDS] and [r[1] for r in t.rows] == ["14", "4", "8"]
    fig = pf.playbook_figure(rep, "t")
    markers = [tr for tr in fig.data if tr.mode == "markers"]
    assert len(markers) == 3 and all(len(tr.y) == 26 for tr in markers)
    assert sorted(markers[0].y) == sorted(1 + r["error"] for r in rows)
    assert sorted(markers[1].y) == sorted(1 + r["error_bandwidth"] for r in rows)
    assert fig.layout.yaxis.type == "log"


def test_validate_sets_the_memory_estimate_beside_the_measured_one(best, capsys):
    """``measured.peak_memory_gb`` (optional): validate reports the estimated peak over the measured one for
    the runs that state it, and nothing for the others."""
    from lib.galvatron.__main__ import main

    rep = validate_runs([(str(BEST), r) for r in best[:3]] + [(str(TP), load_runs(str(TP)).runs[0])],
                        search=False, progress=False)
    rows = rep["runs"]
    for row, run in zip(rows[:3], best[:3]):
        assert row["published_peak_gb"] == run.measured.peak_memory_gb
        assert row["memory_error"] == pytest.approx(row["peak_gb"] / run.measured.peak_memory_gb - 1, abs=5e-4)
    assert rows[3]["memory_error"] is None and rows[3]["published_peak_gb"] is None
    assert rep["memory_runs"] == 3
    assert rep["median_memory_error"] == pytest.approx(sorted(r["memory_error"] for r in rows[:3])[1])
    assert main(["validate", "--runs", str(TP), "--no-search"]) == 0
    assert "peak memory" not in capsys.readouterr().out
    assert main(["validate", "--runs", str(BEST), "--no-search"]) == 0
    assert "peak memory, estimated against measured: median" in capsys.readouterr().out


def test_fabric_readings_agree_on_the_benchmarks_message_and_part_on_a_larger_one():
    """Read as latency, the network reproduces the playbook's 256 MB all-reduce from 4 nodes on, and a 4 GB
    one on 64 nodes runs several times faster per byte; read as bandwidth, the larger message gains nothing
    (within its latency) and stays below the published points. The figure draws 1 + 4 traces."""
    from lib.galvatron import practice_figures as pf
    from lib.galvatron.playbook_report import fabric_readings

    r = fabric_readings()
    assert r["nodes"] == [2, 4, 8, 16, 32, 64] and r["message_bytes"] == 256 * 2**20
    at = {n: i for i, n in enumerate(r["nodes"])}
    for n, i in at.items():
        if n >= 4:
            assert r["latency"]["message"][i] == pytest.approx(r["published"][i], rel=1e-6)
        assert r["bandwidth"]["large"][i] <= r["published"][i] * 1.0001
        assert r["bandwidth"]["large"][i] == pytest.approx(r["bandwidth"]["message"][i], rel=0.05)
        assert r["latency"]["large"][i] >= r["latency"]["message"][i]
    assert r["latency"]["large"][at[64]] > 4 * r["published"][at[64]]
    fig = pf.fabric_readings_figure(r, "t")
    assert len(fig.data) == 5 and fig.layout.xaxis.type == "log"


def test_validate_reads_a_fabric_as_asked(capsys):
    """``validate --fabric-reading``: "bandwidth" prices nanotron's TP 32 (4 nodes of EFA) as the fabric read
    as bandwidth does, slower than the file's latency reading; a bad reading is one line naming the flag."""
    from lib.galvatron.__main__ import main

    def tp32(out):
        return float(next(line for line in out.splitlines() if "#tp32" in line).split()[2])

    assert main(["validate", "--runs", str(TP), "--no-search"]) == 0
    as_file = capsys.readouterr().out
    assert main(["validate", "--runs", str(TP), "--no-search", "--fabric-reading", "bandwidth"]) == 0
    as_bw = capsys.readouterr().out
    assert "fabrics read as bandwidth" in as_bw and "fabrics read as" not in as_file
    assert tp32(as_bw) < 0.8 * tp32(as_file)
    assert main(["validate", "--runs", str(TP), "--fabric-reading", "wide"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --fabric-reading: unknown reading 'wide'; allowed: file, bandwidth, latency"]
