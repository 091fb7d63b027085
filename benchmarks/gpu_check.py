"""The GPU check: real single-device steps, the out-of-memory recovery loop, and the simulator's error.

One command, on any machine with a CUDA GPU (under 8 minutes on one GPU):

    python benchmarks/gpu_check.py                     # presets ci, 49m, 163m on cuda:0
    python benchmarks/gpu_check.py --presets 49m --oom-attempts 50

For every preset it times the everything-on-``cuda:0`` training step with ``lib.placement.torch_env`` (the
write-up's protocol: 2 warm-up steps, median of 5, every device synchronised between phases), profiles every
node's forward and backward on that GPU (the per-node profiler the simulator can use instead of its
roofline), and simulates the same step with the matching hardware profile, once from datasheet figures and
once from the measured node profile. Then it runs the out-of-memory recovery loop the write-up's experiment C
crashed in (about 200 recoveries): many steps under a memory cap too small for the model, each caught and
charged, then one normal step to show the process is still healthy. The report goes to
``data/runs/gpu_check_<host>_<utc>.json`` (written atomically) with the GPU, torch version and git commit.
Without CUDA it prints why and exits 0 without measuring anything. ``--device cpu`` is a dry run of the whole
script on logical CPU devices (the tests use it; its report says ``"dry_run": true`` and measures no GPU).
Used in: Part I, chapter 1.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import gc
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

#: GPU name pattern (as torch reports it) -> hardware profile in data/hardware. Whole words only ("GH200" is
#: not an H200, "RTX A1000" not an A100), and the SXM/NVLink profiles do not describe PCIe or NVL cards.
PROFILE_FOR_GPU = ((r"\bH200\b(?!.*\bNVL\b)", "1xH200"), (r"\bH100\b(?!.*\b(PCIe|NVL)\b)", "8xH100-nvlink"),
                   (r"\bA100\b(?!.*\bPCIE\b)", "4xA100-nvlink"), (r"\bT4\b", "4xT4-pcie"))
#: How much the allocated memory may grow over the whole OOM loop before the check calls it a leak.
OOM_LEAK_SLACK_BYTES = 64 * 2 ** 20
#: GPU cycles ``torch.cuda._sleep`` holds the stream before a timed node (about 1 ms at 2 GHz): longer than the
#: host needs to queue one node's kernels, so the events time the kernels alone.
SLEEP_CYCLES = 2_000_000
NO_CUDA_MESSAGE = "gpu_check: no CUDA device is visible to torch, so there is nothing to measure here."


def profile_for_gpu(gpu_name: str) -> str | None:
    """The hardware profile that describes a GPU called ``gpu_name``, or None when we have none."""
    for pattern, profile in PROFILE_FOR_GPU:
        if re.search(pattern, gpu_name, flags=re.IGNORECASE):
            return profile
    return None


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if out.returncode != 0:
        return "unknown"
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def write_json_atomic(path: str, obj) -> None:
    """Write ``obj`` as JSON to ``path`` whole or not at all."""
    from lib import atomic

    atomic.write_json(path, obj)


def report_path(out_dir: str, host: str | None = None, when: _dt.datetime | None = None) -> str:
    host = re.sub(r"[^A-Za-z0-9_.-]", "_", host or socket.gethostname())[:60] or "host"
    when = when or _dt.datetime.now(_dt.timezone.utc)
    return os.path.join(out_dir, f"gpu_check_{host}_{when.strftime('%Y%m%dT%H%M%SZ')}.json")


def profile_nodes(cfg, device: str = "cuda:0", repeats: int = 10, warmup: int = 3, device_name: str | None = None):
    """Time every node's forward and backward in isolation on ``device`` (median of ``repeats``).

    Inputs are the node's real inputs from one forward pass of the chain (detached, requiring grad like inside
    the chain); the backward is seeded with ones. AdamW is timed over all parameters. On a GPU, CUDA events on
    ``device``'s stream, with the GPU held busy (``torch.cuda._sleep``) while the host queues the node's
    kernels, so the times are the kernels' own and not the host's launch work, which the simulator charges
    separately; the wall clock on a CPU. ``device_name`` is the hardware profile's name for this GPU (what the
    simulator matches); the source records the name torch reports. Returns a
    ``lib.placement.sim_env.NodeProfile`` for ``cfg``'s full batch.
    """
    import torch

    dev = torch.device(device)
    with torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext():  # events, sleeps on dev
        return _profile_nodes(cfg, dev, repeats, warmup, device_name)


def _profile_nodes(cfg, dev, repeats: int, warmup: int, device_name: str | None):
    import torch

    from lib.gpt import build_model, random_batch
    from lib.placement.sim_env import NodeProfile

    device = str(dev)
    model = build_model(cfg, seed=0).to(dev)
    g = model.graph
    idx, tgt = (t.to(dev) for t in random_batch(cfg, seed=0))
    outs, inputs = {}, {}
    with torch.no_grad():
        for n, mod in zip(g.nodes, model.nodes):
            args = [idx] if n.op == "embedding" else [outs[p] for p in n.inputs]
            if n.op == "loss":
                args.append(tgt)
            inputs[n.index] = args
            outs[n.index] = mod(*args)
    del outs
    cuda = dev.type == "cuda"

    def timed(fn):
        if cuda:
            stream = torch.cuda.current_stream(dev)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(SLEEP_CYCLES)  # the GPU waits here while the host queues the node's kernels
            a.record(stream)
            r = fn()
            b.record(stream)
            torch.cuda.synchronize(dev)
            return a.elapsed_time(b) / 1e3, r
        t0 = time.perf_counter()
        r = fn()
        return time.perf_counter() - t0, r

    fwd_s, bwd_s = [], []
    for n, mod in zip(g.nodes, model.nodes):
        f_times, b_times = [], []
        for k in range(warmup + repeats):
            args = [a.detach().requires_grad_(a.is_floating_point()) for a in inputs[n.index]]
            tf, out = timed(lambda: mod(*args))
            grad = None if out.dim() == 0 else torch.ones_like(out)
            tb, _ = timed(lambda: out.backward(grad))
            if k >= warmup:
                f_times.append(tf)
                b_times.append(tb)
            del out, grad, args
        fwd_s.append(statistics.median(f_times))
        bwd_s.append(statistics.median(b_times))
        model.zero_grad(set_to_none=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    opt_times = [timed(opt.step)[0] for _ in range(warmup + repeats)][warmup:]
    n_params = sum(p.numel() for p in model.parameters())
    actual = torch.cuda.get_device_name(dev) if cuda else "cpu"
    name = device_name or actual
    del model, opt, inputs
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return NodeProfile(g.name, cfg.batch_size, name, tuple(fwd_s), tuple(bwd_s),
                       statistics.median(opt_times) / n_params, f"profiled on {device} ({actual})")


def check_preset(preset: str, profile_name: str | None, repeats: int, log, device: str = "cuda:0",
                 profile_repeats: int = 10, profile_warmup: int = 3) -> dict:
    """Measure, profile and simulate the single-device step of one preset on ``device``."""
    import torch

    from lib import hardware as hw
    from lib.gpt import preset as get_preset
    from lib.placement.sim_env import SimPlacementEnv
    from lib.placement.torch_env import TorchPlacementEnv

    cfg = get_preset(preset)
    t0 = time.perf_counter()
    env = TorchPlacementEnv(cfg, [device], sync_phases=True)  # phases synchronised, like the simulation below
    single = [0] * env.n_nodes
    ms = [env.measure(single) for _ in range(repeats)]
    measured = statistics.median(m.step_s for m in ms)
    peak = max(m.peak_mem_bytes[0] for m in ms)  # the allocator's peak (max_memory_allocated) on CUDA
    # what the caching allocator held (its rounding and fragmentation), which the simulator's overhead models
    reserved = int(torch.cuda.max_memory_reserved(device)) if torch.device(device).type == "cuda" else None
    row = {"preset": preset, "device": device, "measured_step_s": measured, "measured_steps_s": [m.step_s for m in ms],
           "measured_phase_s": {ph: statistics.median(m.phase_s[ph] for m in ms) for ph in ms[0].phase_s},
           "measured_peak_bytes": peak, "measured_peak_reserved_bytes": reserved, "source": ms[0].source,
           "oom": any(m.oom for m in ms)}
    del env
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    prof = hw.load(profile_name) if profile_name else None
    nodes = profile_nodes(cfg, device, profile_repeats, profile_warmup, prof.devices[0].name if prof else None)
    row["node_profile"] = nodes.to_dict()
    row["profiled_sum_s"] = sum(nodes.fwd_s) + sum(nodes.bwd_s) + nodes.optimizer_s_per_param * sum(
        n.params for n in SimPlacementEnv(cfg, "cpu").graph.nodes)
    if prof is not None:
        sim = SimPlacementEnv(cfg, prof, sync_phases=True).measure(single)
        sim_np = SimPlacementEnv(cfg, prof, sync_phases=True, node_profile=nodes).measure(single)
        raw = SimPlacementEnv(cfg, prof, alloc_overhead=1.0).peak_memory(single)[0]
        row.update(profile=prof.name, sim_step_s=sim.step_s, sim_phase_s=sim.phase_s,
                   sim_error=(sim.step_s - measured) / measured, sim_node_profile_step_s=sim_np.step_s,
                   sim_node_profile_error=(sim_np.step_s - measured) / measured,
                   sim_peak_bytes=sim.peak_mem_bytes[0], sim_peak_raw_bytes=raw,
                   # like with like: the raw accounting against allocated, the overhead-scaled one against reserved
                   sim_peak_raw_error=(raw - peak) / peak if peak else None,
                   sim_peak_error=(sim.peak_mem_bytes[0] - reserved) / reserved if reserved else None)
    row["wall_s"] = time.perf_counter() - t0
    err = f"{row['sim_error']:+.1%}" if prof is not None else "n/a (no profile)"
    log(f"  {preset:>5}: measured {measured * 1e3:8.2f} ms | simulated {row.get('sim_step_s', float('nan')) * 1e3:8.2f} ms"
        f" ({err}) | from node profile {row.get('sim_node_profile_step_s', float('nan')) * 1e3:8.2f} ms"
        f" | peak allocated {peak / 2**30:.2f} GiB vs {row.get('sim_peak_raw_bytes', 0) / 2**30:.2f} simulated, "
        f"reserved {(reserved or 0) / 2**30:.2f} GiB vs {row.get('sim_peak_bytes', 0) / 2**30:.2f} simulated"
        f" | {row['wall_s']:.0f} s")
    return row


def oom_recovery(preset: str, attempts: int, log, device: str = "cuda:0") -> dict:
    """Run ``attempts`` steps under a cap too small for the model, then one uncapped step.

    On a CPU ``device`` the cap is torch_env's injected budget check, so the loop is testable without a GPU.
    """
    import torch

    from lib.placement.sim_env import SimPlacementEnv
    from lib.placement.torch_env import TorchPlacementEnv

    from lib.placement.torch_env import T4_VISIBLE_BYTES
    from tqdm.auto import tqdm

    cuda = torch.device(device).type == "cuda"
    total = torch.cuda.get_device_properties(device).total_memory if cuda else T4_VISIBLE_BYTES
    allocated_now = (lambda: int(torch.cuda.memory_allocated(device))) if cuda else (lambda: 0)
    need = SimPlacementEnv(preset, "cpu", alloc_overhead=1.0).peak_memory([0] * SimPlacementEnv(preset, "cpu").n_nodes)[0]
    cap = max(1e-9, min(0.9, 0.5 * need / total))  # half of what the step needs: the model states still fit
    t0 = time.perf_counter()
    env = TorchPlacementEnv(preset, [device], mem_cap=cap, warmup=0, timed=1)
    single = [0] * env.n_nodes
    ooms, allocated, error = 0, [], None
    try:
        for k in tqdm(range(attempts), desc=f"OOM loop {preset}", mininterval=2.0, leave=False):
            m = env.measure(single)
            ooms += int(m.oom)
            allocated.append(allocated_now())
    except Exception as e:  # the write-up's run died here ("CUDA launch failure"); record it, do not hide it
        error = f"{type(e).__name__}: {e}"
    finally:  # never leave the card capped for what runs next
        if cuda:
            torch.cuda.set_per_process_memory_fraction(1.0, torch.device(device))
    del env
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    healthy_s = None
    if error is None:
        env = TorchPlacementEnv(preset, [device], mem_cap=None)  # also resets the memory fraction to 1
        m = env.measure(single)
        healthy_s = None if m.oom else m.step_s
        del env
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
    leaked = (max(allocated) - allocated[0]) if allocated else 0
    out = {"preset": preset, "device": device, "mem_cap": cap, "attempts": attempts, "ooms": ooms, "error": error,
           "leaked_bytes": leaked, "ok": error is None and ooms == attempts and leaked <= OOM_LEAK_SLACK_BYTES
           and healthy_s is not None,
           "allocated_after_first_bytes": allocated[0] if allocated else None,
           "allocated_after_last_bytes": allocated[-1] if allocated else None,
           "allocated_max_bytes": max(allocated) if allocated else None,
           "healthy_step_after_s": healthy_s, "wall_s": time.perf_counter() - t0}
    verdict = "OK" if out["ok"] else (f"NOT OK (missed OOMs, a leak over {OOM_LEAK_SLACK_BYTES >> 20} MiB, an error "
                                      "or no healthy step)")
    log(f"  OOM loop ({preset}, cap {cap:.3g}): {ooms}/{attempts} caught, allocated after first "
        f"{(out['allocated_after_first_bytes'] or 0) / 2**20:.0f} MiB, after last "
        f"{(out['allocated_after_last_bytes'] or 0) / 2**20:.0f} MiB; then a normal step: "
        f"{'%.1f ms' % (healthy_s * 1e3) if healthy_s else 'FAILED'}; {error or 'no error'}; "
        f"{verdict}")
    return out


def optimizer_phase(preset: str, log, device: str = "cuda:0", repeats: int = 10) -> dict:
    """Time one AdamW step (PyTorch's default foreach, and after ``clip_grad_norm_``) over the parameters of
    ``preset`` on ``device``, all of them and the embedding/body/head shares separately.

    Settles the simulator's optimizer terms (``lib.placement.sim_mechanisms``): the measured seconds per
    parameter give ``adamw_bw_efficiency`` (80 bytes of traffic per parameter over the datasheet bandwidth), and
    the clipped step's extra time the ``foreach+clip`` term. Median of ``repeats`` after 2 warm-up steps.
    """
    import torch

    from lib.gpt import gpt_graph, preset as gpt_preset

    g = gpt_graph(gpt_preset(preset))
    shares = {"all": [n.params for n in g.nodes if n.params],
              "embedding": [g.nodes[0].params],
              "body": [n.params for n in g.nodes[1:-3] if n.params],
              "head": [n.params for n in g.nodes[-3:] if n.params]}
    cuda = torch.device(device).type == "cuda"
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    out = {"preset": preset, "device": device, "repeats": repeats}
    for label, sizes in shares.items():
        ps = [torch.nn.Parameter(torch.randn(k, device=device) * 0.01) for k in sizes]
        for q in ps:
            q.grad = torch.randn_like(q) * 1e-3
        opt = torch.optim.AdamW(ps, lr=1e-3)
        times = {}
        for clip in (False, True):
            ts = []
            for k in range(repeats + 2):
                sync()
                t0 = time.perf_counter()
                if clip:
                    torch.nn.utils.clip_grad_norm_(ps, 1.0)
                opt.step()
                sync()
                if k >= 2:
                    ts.append(time.perf_counter() - t0)
            times["clip" if clip else "plain"] = statistics.median(ts)
        n = sum(sizes)
        out[label] = {"params": n, "adamw_s": times["plain"], "adamw_clip_s": times["clip"],
                      "s_per_param": times["plain"] / n}
        del ps, opt
        gc.collect()
    if cuda:
        torch.cuda.empty_cache()
        bw = torch.cuda.get_device_properties(device)
        out["gpu"] = bw.name
    a = out["all"]
    log(f"  AdamW ({preset}, {a['params'] / 1e6:.1f}M parameters on {device}): {a['adamw_s'] * 1e3:.1f} ms "
        f"({a['adamw_clip_s'] * 1e3:.1f} ms after clip_grad_norm_); embedding {out['embedding']['adamw_s'] * 1e3:.1f}, "
        f"body {out['body']['adamw_s'] * 1e3:.1f}, head {out['head']['adamw_s'] * 1e3:.1f} ms")
    return out


def duty_cycle_clocks(log, device: str = "cuda:0", n: int = 2048, burst_s: float = 0.05,
                      duties=(1.0, 0.6, 0.3), seconds: float = 4.0) -> dict:
    """Is a GPU faster when it idles part of the time? fp32 GEMM bursts at several duty cycles.

    The hypothesis ``power_boost`` of ``lib.placement.sim_mechanisms`` (adopted only because it can produce the
    write-up's A gain) says a power-capped GPU (a T4: 70 W) busy a fraction u of the time runs its compute
    ``1 - g (1 - u)`` times as long as at full load. This runs ``burst_s`` of back-to-back n x n fp32 matmuls,
    then sleeps so that the GPU is busy a fraction u, for ``seconds`` per duty cycle, and reports the median
    matmul time in the bursts of each (and the SM clock when pynvml is there). g = (1 - t_u / t_1) / (1 - u);
    a g near 0 on a T4 refutes the hypothesis; near 0.15-0.25 supports it.
    """
    import torch

    cuda = torch.device(device).type == "cuda"
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    clock = None
    if cuda:
        with contextlib.suppress(Exception):
            import pynvml

            pynvml.nvmlInit()
            h = pynvml.nvmlDeviceGetHandleByIndex(torch.device(device).index or 0)
            clock = lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
    out = {"device": device, "n": n, "burst_s": burst_s, "duties": {}}
    for u in duties:
        per, clocks = [], []
        t_end = time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            t0 = time.perf_counter()
            k = 0
            while time.perf_counter() - t0 < burst_s:
                s0 = time.perf_counter()
                torch.mm(a, b)
                sync()
                per.append(time.perf_counter() - s0)
                k += 1
            if clock is not None:
                with contextlib.suppress(Exception):
                    clocks.append(clock())
            busy = time.perf_counter() - t0
            if u < 1:
                time.sleep(busy * (1 - u) / u)
        keep = per[len(per) // 4:]  # drop the first quarter: the clock settles
        out["duties"][str(u)] = {"matmul_s": statistics.median(keep), "n_matmuls": len(per),
                                 "sm_clock_mhz": statistics.median(clocks) if clocks else None}
    t1 = out["duties"][str(duties[0])]["matmul_s"]
    out["g"] = {str(u): (1 - d["matmul_s"] / t1) / (1 - u) for u, d in
                ((float(k), v) for k, v in out["duties"].items()) if u < 1}
    log("  duty cycle: " + ", ".join(f"busy {k}: {v['matmul_s'] * 1e3:.2f} ms per matmul"
                                     + (f" at {v['sm_clock_mhz']:.0f} MHz" if v["sm_clock_mhz"] else "")
                                     for k, v in out["duties"].items())
        + "; g = " + ", ".join(f"{v:+.3f} (busy {k})" for k, v in out["g"].items()))
    return out


def reinforce_real(preset: str, updates: int, log, out_dir: str, device: str = "cuda:0") -> dict:
    """A short REINFORCE run (``updates`` updates of 8 samples, co-location groups) on real CUDA devices.

    With one GPU the placer still chooses among 4 logical devices that all map to ``cuda:0``, so the real
    executor, the run log and the resume checkpoint are exercised end to end; with several GPUs it uses them all.
    """
    import torch

    from lib.graph import colocate
    from lib.placement.reinforce import TrainConfig, train
    from lib.placement.torch_env import TorchPlacementEnv

    n = torch.cuda.device_count() if device.startswith("cuda") else 0
    devices = [f"cuda:{i}" for i in range(n)] if n >= 2 else [device] * 4
    env = TorchPlacementEnv(preset, devices)
    path = os.path.join(out_dir, f"gpu_check_reinforce_{preset}_{socket.gethostname()}.jsonl")
    for stale in (path, path + ".ckpt.pt"):
        if os.path.exists(stale):
            os.remove(stale)
    t0 = time.perf_counter()
    result = train(env, env.graph, TrainConfig(n_iters=updates, seed=0), groups=colocate(env.graph), log_path=path,
                   resume=False, progress=False, env_info={"describe": env.describe(), "devices": devices})
    wall = time.perf_counter() - t0
    best_s = min(t for _, t in result.top) if result.top else None
    log(f"REINFORCE on {env.describe()}: {updates} updates x 8 samples in {wall:.1f} s; "
        f"best step {best_s * 1e3:.1f} ms; log {os.path.relpath(path, ROOT)}")
    return {"preset": preset, "devices": devices, "updates": updates, "wall_s": wall, "best_step_s": best_s,
            "log": os.path.relpath(path, ROOT)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", default="ci,49m,163m", help="comma-separated GPT presets")
    ap.add_argument("--repeats", type=int, default=3, help="measurements (each the median of 5 steps) per preset")
    ap.add_argument("--oom-attempts", type=int, default=1000,
                    help="steps of the OOM recovery loop (0 to skip); the write-up's run died after about 200")
    ap.add_argument("--oom-preset", default="49m")
    ap.add_argument("--reinforce-updates", type=int, default=3, help="updates of the short real REINFORCE run (0 to skip)")
    ap.add_argument("--reinforce-preset", default="49m")
    ap.add_argument("--out", default=os.path.join(ROOT, "data", "runs"))
    ap.add_argument("--device", default="cuda:0", help="cuda:N, or cpu for a dry run of the script (no GPU measured)")
    ap.add_argument("--profile-repeats", type=int, default=10, help="timings per node in the node profiler")
    ap.add_argument("--mechanisms", type=int, default=1,
                    help="1: time the AdamW step and the duty-cycle clock test that settle the simulator's "
                         "optimizer and power-clock terms; 0 to skip")
    a = ap.parse_args(argv)
    dry = a.device == "cpu"
    if not dry and not a.device.startswith("cuda"):
        raise ValueError(f"--device must be cuda, cuda:N or cpu; got {a.device!r}")
    try:
        import torch
    except ImportError:
        print(NO_CUDA_MESSAGE + " (torch is not installed)")
        return 0
    if not dry and not torch.cuda.is_available():
        print(f"{NO_CUDA_MESSAGE} (torch {torch.__version__}, built for CUDA {torch.version.cuda}). "
              "Run it on a machine with a GPU; no report was written.")
        return 0
    t_start = time.perf_counter()
    lines: list[str] = []

    def log(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    if dry:
        gpus, profile = [], "cpu"
        log(f"gpu_check DRY RUN on the CPU ({platform.machine()}), torch {torch.__version__}: exercises the script, "
            "measures no GPU")
    else:
        props = torch.cuda.get_device_properties(a.device)
        gpus = [{"index": i, "name": torch.cuda.get_device_name(i),
                 "total_memory_bytes": int(torch.cuda.get_device_properties(i).total_memory),
                 "capability": list(torch.cuda.get_device_capability(i))} for i in range(torch.cuda.device_count())]
        profile = profile_for_gpu(props.name)
        log(f"gpu_check on {props.name} ({props.total_memory / 2**30:.2f} GiB), torch {torch.__version__}, "
            f"hardware profile {profile or 'none matches'}")
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 as in the write-up (the default, made explicit)
        torch.backends.cudnn.allow_tf32 = False
    rows = [check_preset(p, profile, a.repeats, log, a.device, a.profile_repeats) for p in a.presets.split(",") if p]
    oom = oom_recovery(a.oom_preset, a.oom_attempts, log, a.device) if a.oom_attempts > 0 else None
    rl = (reinforce_real(a.reinforce_preset, a.reinforce_updates, log, a.out, a.device)
          if a.reinforce_updates > 0 else None)
    mech = None
    if a.mechanisms:
        mech = {"optimizer": optimizer_phase("ci" if dry else "49m", log, a.device, repeats=3 if dry else 10),
                "duty_cycle": duty_cycle_clocks(log, a.device, n=64 if dry else 2048, burst_s=0.01 if dry else 0.05,
                                                seconds=0.1 if dry else 4.0)}
    report = {
        "kind": "gpu_check", "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(), "git_commit": git_commit(), "python": platform.python_version(),
        "torch": torch.__version__, "cuda": torch.version.cuda, "gpus": gpus, "profile": profile,
        "device": a.device, "dry_run": dry,
        "protocol": f"single device {a.device}; TorchPlacementEnv (2 warm-up + median of 5, phases synchronised); "
                    "simulated with sync_phases=True",
        "single_device": rows, "oom_recovery": oom, "reinforce": rl, "mechanisms": mech, "log": lines,
        "wall_s": time.perf_counter() - t_start,
    }
    path = report_path(a.out)
    write_json_atomic(path, report)
    print(f"report: {os.path.relpath(path, ROOT)} ({report['wall_s']:.0f} s)")
    ok = all(not r["oom"] for r in rows) and (oom is None or oom["ok"])  # every cap step caught, nothing leaked
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
