"""Chapter 9's held-out check on another stack's published benchmarks: nanotron on up to 64 nodes of H100 with
AWS EFA between them, as the Ultra-Scale Playbook measured it (``data/published_runs/playbook_best.json``: the
best layout of each model size and node count; ``nanotron_tp_sweep.json``: a TP sweep), nothing fitted or
chosen on them.

- :func:`playbook_report`: ``validate``'s rows (the planner's picks included) with the runs on the fabric they
  state (``efa-p5``: the playbook's collective benchmark, ``data/hardware/fabrics/fabrics.json``, whose loss
  below the line rate the file reads as per-step latency), again with that loss read as bandwidth (the
  what-if ``rules.fabric_reading``: the reading before), and with no fabric stated (the GPU type's default port at
  its link efficiency), by node band, and the TP sweep's ranking.
- :func:`band_table`: median signed and absolute error by band, all three ways.
- :func:`fabric_readings`: the fabric's published all-reduce bus bandwidth by node count beside what the network
  prices for the benchmark's message and for a larger one, under both readings (chapter 9's figure of them).

Every throughput here is estimated (``search/cost.py``); every measured figure is quoted from its run's
source. Used in: book/galvatron/05_from_paper_to_practice, tests/galvatron/test_playbook_runs.py.
"""

from __future__ import annotations

from statistics import median

from .practice_picks import RUNS_DIR
from .published import load_runs, to_job
from .search import collectives as col
from .search import fabrics as fb
from .search.cost import network_of
from .search.report import Table
from .search.rules import get_rules
from .validate import validate_runs

BEST = RUNS_DIR / "playbook_best.json"
TP_SWEEP = RUNS_DIR / "nanotron_tp_sweep.json"
#: The node bands of chapter 9's table: up to 8 nodes, 16, and 32 to 64.
BANDS = (("1-8 nodes", 1, 8), ("16 nodes", 16, 16), ("32-64 nodes", 32, 64))


def _no_fabric(run):
    return run.model_copy(update={"cluster": run.cluster.model_copy(update={"fabric": None})})


def reading_rules(reading: str):
    """``practice`` with a stated fabric's loss read as ``reading`` (``rules.FABRIC_READINGS``)."""
    return get_rules("practice").with_(name=f"practice, fabric read as {reading}", fabric_reading=reading)


def playbook_report(search: bool = True) -> dict:
    """{"rows": [{"name", "model", "nodes", "published", "estimate", "error", "estimate_default",
    "error_default", "error_bandwidth", "config", "pick", "pick_estimate", "lead", "plausibility", "fits"}],
    "tp_sweep": validate's sweep dict, "tp_rows": its rows, "tp_errors_bandwidth": {name: error}};
    ``estimate_default``: the same run with no fabric stated; ``error_bandwidth``: on its fabric with the
    loss read as bandwidth."""
    runs = load_runs(str(BEST)).runs
    tp_runs = load_runs(str(TP_SWEEP)).runs
    rep = validate_runs([(BEST.name, r) for r in runs], search=search, progress=False)
    plain = validate_runs([(BEST.name, _no_fabric(r)) for r in runs], search=False, progress=False)
    as_bw = reading_rules("bandwidth")
    bw = validate_runs([(BEST.name, r) for r in runs], rules=as_bw, search=False, progress=False)
    tp_bw = validate_runs([(TP_SWEEP.name, r) for r in tp_runs], rules=as_bw, search=False, progress=False)
    by_plain = {r["name"]: r for r in plain["runs"]}
    by_bw = {r["name"]: r for r in bw["runs"]}
    rows = []
    for run, r in zip(runs, rep["runs"]):
        p = by_plain[r["name"]]
        rows.append({**r, "model": r["name"].split("-")[1].upper(),
                     "nodes": run.cluster.gpus // (run.cluster.gpus_per_node or 8),
                     "estimate_default": p["estimate"], "error_default": p["error"],
                     "error_bandwidth": by_bw[r["name"]]["error"]})
    tp = validate_runs([(TP_SWEEP.name, r) for r in tp_runs], search=False, progress=False)
    return {"rows": rows, "tp_sweep": tp["sweeps"][0], "tp_rows": tp["runs"],
            "tp_errors_bandwidth": {r["name"]: r["error"] for r in tp_bw["runs"]}}


def band_rows(report: dict, band: str) -> list:
    lo, hi = next((lo, hi) for name, lo, hi in BANDS if name == band)
    return [r for r in report["rows"] if lo <= r["nodes"] <= hi]


def band_table(report: dict) -> Table:
    """Median signed error / median absolute error by node band: on the stated fabric read as latency (the
    file's reading), read as bandwidth, and on the default port."""
    def cell(errors):
        return f"{median(errors):+.0%} / {median(abs(x) for x in errors):.0%}"

    out = []
    for name, _, _ in BANDS:
        rs = band_rows(report, name)
        out.append([name, f"{len(rs)}"] + [cell([r[k] for r in rs])
                                           for k in ("error", "error_bandwidth", "error_default")])
    return Table(["nodes", "runs", "EFA, loss as latency", "EFA, loss as bandwidth", "default port"], out)


def fabric_readings(large_bytes: float = 4 * 2**30) -> dict:
    """All-reduce bus bandwidth (bytes/s per GPU, nccl-tests' convention) over every GPU of n nodes, on the
    fabric the playbook's runs name: {"fabric", "message_bytes", "large_bytes", "nodes": [...], "published":
    [...] (quoted), and for each reading ("latency", "bandwidth") and each size ("message", "large") the
    priced bus bandwidth (estimated)}. Read as bandwidth the larger message runs no faster than the
    published one; read as latency it pays the same per-step latency for more bytes, so it runs faster."""
    run = load_runs(str(BEST)).runs[0]
    job, fabric = to_job(run), run.cluster.fabric
    size = fb.message_bytes(fabric)
    pts = fb.busbw_points(fabric)
    nodes = [n for n, _ in pts]
    out = {"fabric": fabric, "message_bytes": size, "large_bytes": float(large_bytes), "nodes": nodes,
           "published": [b for _, b in pts]}

    def busbw(net, nbytes, n):
        ranks = n * job.gpus_per_node
        return col.bus_bytes("all-reduce", nbytes, ranks) / col.group_s("all-reduce", nbytes, ranks, 1, net)

    for reading in ("latency", "bandwidth"):
        net = network_of(job, reading_rules(reading))
        out[reading] = {"message": [busbw(net, size, n) for n in nodes],
                        "large": [busbw(net, float(large_bytes), n) for n in nodes]}
    return out
