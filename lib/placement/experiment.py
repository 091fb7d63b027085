"""An experiment of Part I: which environment (``EnvSpec``, ``make_env``), a training run and its log
(``train_run``), the head-to-head of its picks (``evaluate_run``, ``read_evaluation``), and every figure from
every log (``figures``), all under ``data/runs/`` by default (``DEFAULT_OUT``).

The chapters and the command line (``python -m lib.placement``, ``cli.py``) both call these, so a chapter and a
terminal produce the same logs. Used in: book/placement/02_the_placer, 03_colocation.
"""

from __future__ import annotations

import glob
import numbers
import os
from dataclasses import asdict, dataclass, replace

import numpy as np

from lib import runlog
from lib.cli_errors import UserError
from lib.runlog_schema import check_records

DEFAULT_OUT = os.path.join("data", "runs")


@dataclass(frozen=True)
class EnvSpec:
    """Which environment a run used: simulated (``profile``) or real (``device="real"``), and its settings."""

    device: str = "sim"
    profile: str = "4xT4-pcie"
    preset: str = "49m"
    n_micro: int = 1
    mem_cap: float | None = None
    noise: bool = False
    env_seed: int = 0
    node_profile: str | None = None  # a gpu_check report whose measured node times replace the roofline (sim)
    mechanisms: dict | None = None  # optional simulator terms (lib.placement.sim_mechanisms.Mechanisms fields)

    def __post_init__(self):
        # exact types: a spec read back from a log's header is not coerced (n_micro "2" or 2.5 is refused)
        if self.device not in ("sim", "real"):
            raise ValueError(f"device must be 'sim' or 'real'; got {self.device!r}")
        for name in ("profile", "preset"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a name (a string); got {getattr(self, name)!r}")
        for name, lo in (("n_micro", 1), ("env_seed", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}; got {v!r}")
        m = self.mem_cap
        if m is not None and (isinstance(m, bool) or not isinstance(m, numbers.Real) or not 0 < m <= 1):
            raise ValueError(f"mem_cap must be None or a fraction in (0, 1]; got {m!r}")
        if not isinstance(self.noise, bool):
            raise ValueError(f"noise must be true or false; got {self.noise!r}")
        if self.node_profile is not None and not isinstance(self.node_profile, str):
            raise ValueError(f"node_profile must be None or a path; got {self.node_profile!r}")
        if self.mechanisms is not None:
            from lib.placement.sim_mechanisms import Mechanisms

            if not isinstance(self.mechanisms, dict):
                raise ValueError(f"mechanisms must be None or a mapping of Mechanisms fields; got {self.mechanisms!r}")
            m = Mechanisms.from_dict(self.mechanisms)
            object.__setattr__(self, "mechanisms", None if m.is_base else
                               {k: v for k, v in m.to_dict().items() if v != getattr(Mechanisms(), k)})

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "EnvSpec":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def header_spec(path: str, header: dict) -> EnvSpec:
    """The environment a log's header records (``header.env``), its types checked as ``EnvSpec`` checks them;
    a :class:`UserError` naming the file and the field otherwise (a hand-edited ``n_micro: "2"``)."""
    env = header.get("env")
    if not isinstance(env, dict):
        raise UserError(f"run log {path}: line 1 (header): env: {env!r} is not an object; allowed: the "
                        f"environment the run was trained on (device, profile, preset, ...)")
    where = f"run log {path}: line 1 (header): env"
    try:
        spec = EnvSpec.from_dict(env)
    except (ValueError, TypeError) as e:
        raise UserError(f"{where}: {e}") from None
    from lib import hardware
    from lib.gpt import PRESETS

    # the names and the split the train flags are checked against (cli.check_train_args), here for a header
    if spec.preset not in PRESETS:
        raise UserError(f"{where}.preset: {spec.preset!r} is not a GPT preset; allowed: {', '.join(sorted(PRESETS))}")
    if spec.device == "sim" and spec.profile not in hardware.names():
        raise UserError(f"{where}.profile: {spec.profile!r} is not a hardware profile; allowed: "
                        f"{', '.join(hardware.names())}")
    batch = PRESETS[spec.preset].batch_size
    if batch % spec.n_micro:
        raise UserError(f"{where}.n_micro: {spec.n_micro} does not divide the batch of {spec.preset} ({batch}); "
                        f"allowed: a divisor of {batch}")
    return spec


def check_node_profile_fits(spec: EnvSpec, nodes, n_nodes: int) -> None:
    """The node profile read from ``spec.node_profile`` times each node of the graph, on a device of
    ``spec.profile``; a :class:`UserError` naming the file and the field otherwise (the simulator's own check
    cannot name the file)."""
    from lib import hardware

    where = f"--node-profile {spec.node_profile}: node_profile"
    if len(nodes.fwd_s) != n_nodes:
        raise UserError(f"{where}.fwd_s: {len(nodes.fwd_s)} times for the {n_nodes} nodes of {nodes.graph_name}; "
                        f"allowed: one time per node")
    names = sorted({d.name for d in hardware.load(spec.profile).devices})
    if nodes.device_name not in names:
        raise UserError(f"{where}.device_name: {nodes.device_name!r} is not a device of --profile {spec.profile}; "
                        f"allowed: {', '.join(names)}")


def make_env(spec: EnvSpec):
    """Build the environment a spec describes (the simulator, or real CUDA devices)."""
    if spec.device == "sim":
        from lib.placement.sim_env import NoiseModel, SimPlacementEnv

        nodes = None
        if spec.node_profile:
            from lib.gpt import gpt_graph, preset
            from lib.placement.sim_engine import NodeProfile

            g = gpt_graph(preset(spec.preset))
            nodes = NodeProfile.from_report(spec.node_profile, g.name)
            check_node_profile_fits(spec, nodes, g.n_nodes)
            nodes = nodes.scaled_to(g.batch // spec.n_micro)
        from lib.placement.sim_mechanisms import Mechanisms

        mech = Mechanisms.from_dict(spec.mechanisms) if spec.mechanisms else None
        return SimPlacementEnv(spec.preset, spec.profile, n_micro=spec.n_micro, mem_cap=spec.mem_cap,
                               noise=NoiseModel() if spec.noise else None, seed=spec.env_seed, node_profile=nodes,
                               mechanisms=mech)
    import torch

    from lib.placement.torch_env import TorchPlacementEnv

    n = torch.cuda.device_count()
    if n < 2:
        raise UserError(f"--device real (or a run log's env.device real) needs at least 2 CUDA devices; this "
                        f"machine has {n}; allowed: --device sim, the simulator")
    return TorchPlacementEnv(spec.preset, [f"cuda:{i}" for i in range(n)], n_micro=spec.n_micro,
                             mem_cap=spec.mem_cap, seed=spec.env_seed)


def run_name(spec: EnvSpec, cfg, colocate: bool) -> str:
    """A file name that says what the run was, e.g. ``49m_4xT4-pcie_m1_coloc_ma_lr0.001_ent0_s0``."""
    where = spec.profile if spec.device == "sim" else "real"
    base = {"moving_average": "ma", "leave_one_out": "loo"}[cfg.baseline]
    name = f"{spec.preset}_{where}_m{spec.n_micro}_{'coloc' if colocate else 'nodes'}_{base}_lr{cfg.lr:g}_ent{cfg.entropy:g}"
    if spec.mem_cap is not None:
        name += f"_cap{spec.mem_cap:g}"
    if spec.mechanisms:
        name += "_mech-" + "-".join(f"{k}{v:g}" if isinstance(v, float) else f"{k}{v}"
                                    for k, v in sorted(spec.mechanisms.items()))
    if spec.noise:
        name += f"_noise{spec.env_seed}"
    if cfg.stop_when_identical:
        name += "_stop"
    return name + f"_s{cfg.seed}"


def train_run(spec: EnvSpec, cfg, colocate: bool = True, out_dir: str = DEFAULT_OUT, name: str | None = None,
              resume: bool = True, progress: bool = True, repair: bool = False):
    """Train (or resume) one run on ``spec`` and return its :class:`RunResult`; the log is ``<out>/<name>.jsonl``.

    The run's writer lock (``<log>.lock``) is held throughout: a second process training the same run gets
    ``runlog.RunLogBusy`` at once. ``repair`` first drops a truncated last line of the log (every complete
    record is kept); a truncated line past the checkpoint, as a crash mid-append leaves, is dropped anyway.
    """
    from lib.graph import colocate as colocate_groups
    from lib.placement.reinforce import RunResult, train

    path = os.path.join(out_dir, (name or run_name(spec, cfg, colocate)) + ".jsonl")
    with runlog.writer_lock(path):
        if repair and resume and os.path.exists(path):
            runlog.repair(path)
        env = make_env(spec)
        if spec.device == "sim" and not spec.noise:
            cfg = replace(cfg, cache_measurements=True)  # deterministic: identical placements give identical times
        groups = colocate_groups(env.graph) if colocate else None
        info = {**spec.to_dict(), "describe": env.describe()}
        train(env, env.graph, cfg, groups=groups, log_path=path, resume=resume, progress=progress, env_info=info)
        return RunResult.from_log(path)  # what the chapters show is what the log on disk says


def independent_noise(env, spec: EnvSpec, seed: int, run_path: str) -> None:
    """Give a simulated machine's timing noise its own stream for this evaluation of this run: the machine (its
    GPUs' speed factors, drawn from ``spec.env_seed`` when it was built) stays the same, but two runs judged on
    one machine no longer share their noise draws, which made their tables repeat the same spreads."""
    import zlib

    if spec.device == "sim" and hasattr(env, "rng"):
        env.rng = np.random.default_rng([spec.env_seed, seed, zlib.crc32(os.path.basename(run_path).encode())])


def evaluate_run(run_path: str, spec: EnvSpec | None = None, rounds_select: int = 4, rounds_confirm: int = 8,
                 steps_per_round: int = 10, seed: int = 0, phase_steps: int = 12, out_path: str | None = None,
                 progress: bool = False, relabel: bool = True):
    """The head-to-head of a run's picks on ``spec`` (default: the run's own environment with noise on and
    another machine seed); writes ``<run>.eval.jsonl`` and returns ``(HeadToHead, PhaseTiming)`` read back from
    it. ``relabel``: every side chooses its GPUs on that machine, its busiest GPU on the fastest, the GPUs
    ranked by timing them first (``evaluate.rank_devices``, ``seed_sides``); False: the write-up's protocol,
    in which the RL candidates keep the GPUs they were trained on (the log is then
    ``<run>.as-labelled.eval.jsonl``)."""
    from lib.placement.evaluate import head_to_head, phase_timing, rank_devices, seed_sides
    from lib.placement.reinforce import RunResult, check_signature, model_signature

    run = RunResult.from_log(run_path)
    check_records(run_path, run.header, [])  # the header's env and model, before they are read
    if spec is None:
        spec = replace(header_spec(run_path, run.header), noise=True, env_seed=seed + 1)
    env = make_env(spec)
    independent_noise(env, spec, seed, run_path)
    groups = run.header["model"]["groups"]
    check_signature(run.header, model_signature(env.graph, groups, env.n_devices), run_path)
    rng = np.random.default_rng(seed)
    order = rank_devices(env, rounds_select, steps_per_round, rng) if relabel else None
    sides, fixed = seed_sides(run, env.graph, env.n_devices, gpu_order=order)
    h2h = head_to_head(env, sides, fixed, rounds_select, rounds_confirm, steps_per_round, rng=rng,
                       progress=progress)
    check_some_placement_fits(h2h, spec, run_path)
    best_gpu = h2h.entry("single_gpu")
    pair = [("winner: " + h2h.winner.label, h2h.winner.placement)]
    if h2h.winner.label != best_gpu.label and not best_gpu.oom:  # under a memory cap one GPU may not fit
        pair.append(("best single GPU: " + best_gpu.label, best_gpu.placement))
    phases = phase_timing(env, pair, phase_steps) if not h2h.winner.oom else None
    stem = run_path[:-len(".jsonl")] if run_path.endswith(".jsonl") else run_path
    out_path = out_path or stem + (".eval.jsonl" if relabel else ".as-labelled.eval.jsonl")
    header = runlog.make_header({"rounds_select": rounds_select, "rounds_confirm": rounds_confirm,
                                 "steps_per_round": steps_per_round, "phase_steps": phase_steps,
                                 "relabel": relabel, "gpu_order": None if order is None else list(order),
                                 "run": os.path.basename(run_path)},
                                {**spec.to_dict(), "describe": env.describe()}, seed, run_kind="evaluate",
                                model=run.header["model"])
    log = runlog.RunLog.create(out_path, header)
    log.append(h2h.to_dict())
    if phases is not None:
        log.append({"kind": "phase_timing", **phases.to_dict()})
    _, h2h_logged, phases_logged = read_evaluation(out_path)
    return h2h_logged, phases_logged


def check_some_placement_fits(h2h, spec: EnvSpec, run_path: str) -> None:
    """A :class:`UserError` when every confirmed placement ran out of memory: each "time" is then the OOM penalty
    (``env.OOM_PENALTY_S``), not a measurement, and the head-to-head has nothing to compare. Checked before the
    evaluation log is written, so no log presents the penalty as timings."""
    if all(e.oom for e in h2h.entries):
        cap = f"the memory cap {spec.mem_cap:g} of each device's memory" if spec.mem_cap is not None else \
            "each device's memory"
        raise UserError(f"--run {run_path}: every placement ({len(h2h.entries)}: the picks and the baselines) is "
                        f"over {cap} on {spec.profile if spec.device == 'sim' else 'this machine'}, so no step "
                        f"time was measured; allowed: a run whose memory cap fits at least one placement "
                        f"(train it with a larger --mem-cap, or none)")


def read_evaluation(path: str):
    """``(header, HeadToHead, PhaseTiming | None)`` from an ``.eval.jsonl`` log."""
    from lib.placement.evaluate import HeadToHead, PhaseTiming

    header, recs = runlog.read(path)
    if header.get("run_kind") != "evaluate":
        raise UserError(f"{path!r} is not an evaluation log (run_kind={header.get('run_kind')!r})")
    h2h = next(HeadToHead.from_dict(r) for r in recs if r["kind"] == "head_to_head")
    if all(e.oom for e in h2h.entries):  # as check_some_placement_fits refuses to write one
        raise UserError(f"evaluation log {path}: every entry has oom: true, so its times are the out-of-memory "
                        f"penalty, not measurements; allowed: a log where at least one placement fits")
    ph = next((PhaseTiming.from_dict({k: v for k, v in r.items() if k != "kind"}) for r in recs
               if r["kind"] == "phase_timing"), None)
    return header, h2h, ph


def resolve_run(run: str, out_dir: str = DEFAULT_OUT) -> str:
    """The log of ``run``: a path, a file in ``out_dir``, or a run name there."""
    for cand in (run, os.path.join(out_dir, run), os.path.join(out_dir, run + ".jsonl")):
        if os.path.isfile(cand):
            return cand
    raise UserError(f"no run log {run!r} (looked in {out_dir!r}); list them with: ls {out_dir}")


def _write_html(fig, path: str) -> None:
    from lib import atomic

    atomic.write_text(path, fig.to_html(include_plotlyjs="cdn", full_html=True))


def spec_on_device(run_path: str, device: str, seed: int = 0) -> EnvSpec:
    """The run's own environment moved to ``device`` (noise on in the simulator, another machine seed)."""
    from lib.placement.reinforce import RunResult

    header = RunResult.from_log(run_path).header
    check_records(run_path, header, [])
    base = header_spec(run_path, header)
    return replace(base, device=device, noise=device == "sim", env_seed=seed + 1)


def figures(out_dir: str = DEFAULT_OUT, fig_dir: str | None = None) -> list[dict]:
    """Every figure from every log in ``out_dir`` (HTML under ``fig_dir``); returns one summary row per run."""
    from lib.placement import figures as F
    from lib.placement.env import OOM_PENALTY_S
    from lib.placement.reinforce import RunResult

    fig_dir = fig_dir or os.path.join(out_dir, "figures")
    rows = []
    for path in sorted(glob.glob(os.path.join(out_dir, "*.jsonl"))):
        name = os.path.basename(path)[: -len(".jsonl")]
        kind = runlog.read(path)[0].get("run_kind")
        if kind == "reinforce":
            res = RunResult.from_log(path)
            if not res.records:
                continue
            _write_html(F.learning_curves({name: res}, title=name), os.path.join(fig_dir, name + ".html"))
            first = F.first_identical(res)
            rows.append({"run": name, "updates": res.n_updates, "first_mean_ms": res.records[0]["mean_step_s"] * 1e3,
                         "last_mean_ms": res.records[-1]["mean_step_s"] * 1e3,
                         "best_ms": res.top[0][1] * 1e3 if res.top[0][1] < OOM_PENALTY_S else None,  # no time
                         "all_identical_at": first})
        elif kind == "evaluate":
            _, h2h, ph = read_evaluation(path)
            _write_html(F.head_to_head_figure(h2h, title=name), os.path.join(fig_dir, name + ".html"))
            if ph is not None:
                _write_html(F.phase_figure(ph, title=name), os.path.join(fig_dir, name + ".phases.html"))
    return rows
