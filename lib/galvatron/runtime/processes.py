"""Start ranks and their process group, whatever they run: local ranks (``spawn_ranks``) or this rank under
``torchrun`` (``torchrun_rank``). What a rank does is a function ``run(job, rank, world_size) -> dict`` passed in
(``jobs.run_job`` for plans, the profiler's ``comm_measurements``), so this module imports neither.

``spawn_ranks`` starts ``world_size`` processes with the ``spawn`` method on 127.0.0.1 and a free port, waits
for all of them up to a deadline, kills any that are left, checks every exit code, and returns each rank's
result dict. A rank that fails writes its error; the caller gets a ``RuntimeError`` (or the ranks' common
``ValueError`` for a bad plan) naming it. Used in: book/galvatron/04_from_plan_to_run (through ``launch``).
"""

from __future__ import annotations

import datetime
import json
import os
import resource
import socket
import tempfile
import time
import traceback

import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_json(path: str, obj) -> None:
    from lib import atomic

    atomic.write_json(path, obj, indent=None)


def peak_rss_bytes() -> int:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _init(rank: int, world_size: int, backend: str, timeout_s: float, device: str):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    extra = {}
    if device.startswith("cuda"):  # one GPU per local rank, whatever the backend
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
        if "nccl" in backend:     # bind the group to this rank's GPU: NCCL no longer guesses it from the rank
            extra["device_id"] = torch.device("cuda", torch.cuda.current_device())   # (its barrier warned)
    dist.init_process_group(backend, rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=timeout_s), **extra)


def _entry(rank: int, world_size: int, port: int, job: dict, outdir: str, run, precheck) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank))
    import torch.distributed as dist

    try:
        if precheck is not None:
            precheck(job, world_size)  # a bad plan fails here, on every rank, before anyone waits on a peer
        _init(rank, world_size, job.get("backend", "gloo"), job.get("timeout_s", 60), job.get("device", "cpu"))
        result = run(job, rank, world_size)
        result.setdefault("peak_rss_bytes", peak_rss_bytes())
        _write_json(os.path.join(outdir, f"rank{rank}.json"), result)
    except BaseException as e:  # report, then exit non-zero
        _write_json(os.path.join(outdir, f"rank{rank}.err"),
                    {"type": type(e).__name__, "msg": str(e), "tb": traceback.format_exc()})
        raise SystemExit(1)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def spawn_ranks(run, job: dict, world_size: int, timeout_s: float = 120.0, precheck=None) -> list[dict]:
    """``run(job, rank, world_size)`` on ``world_size`` local ranks (gloo, 127.0.0.1) once each has joined the
    process group; every rank's result, in rank order. ``precheck(job, world_size)``, when given, runs first on
    every rank. Both must be module-level functions (the ``spawn`` method pickles them by name)."""
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1; got {world_size}")
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="galvatron_rt_") as outdir:
        job = dict(job, timeout_s=min(float(job.get("timeout_s", timeout_s)), timeout_s))
        port = free_port()
        procs = [ctx.Process(target=_entry, args=(r, world_size, port, job, outdir, run, precheck),
                             daemon=True)
                 for r in range(world_size)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout_s
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        hung = [r for r, p in enumerate(procs) if p.is_alive()]
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
        codes = [p.exitcode for p in procs]
        errors = {}
        for r in range(world_size):
            path = os.path.join(outdir, f"rank{r}.err")
            if os.path.exists(path):
                with open(path) as f:
                    errors[r] = json.load(f)
        if hung or any(c != 0 for c in codes):
            if errors and all(e["type"] in ("ValueError", "UserError") for e in errors.values()) and not hung:
                from lib.cli_errors import UserError

                msgs = sorted({e["msg"] for e in errors.values()})
                user = all(e["type"] == "UserError" for e in errors.values())
                raise (UserError if user else ValueError)(
                    f"rejected on ranks {sorted(errors)} (exit codes {codes}): {'; '.join(msgs)}")
            detail = "; ".join(f"rank {r}: {e['type']}: {e['msg']}" for r, e in sorted(errors.items()))
            tb = next(iter(errors.values()))["tb"] if errors else ""
            raise RuntimeError(f"ranks failed: exit codes {codes}, still running after {timeout_s:.0f} s: {hung}; "
                               f"{detail}\n{tb}")
        out = []
        for r in range(world_size):
            with open(os.path.join(outdir, f"rank{r}.json")) as f:
                out.append(json.load(f))
        return out


def agree(fingerprint: dict, world: int) -> None:
    """Every rank has the same ``fingerprint`` (a name -> value dict: ``"the plan"``, ``"--steps"``...), or a
    ``ValueError`` on every rank naming what differs, rank by rank: the ranks' hashes are all-gathered over the
    default group (which must exist), so every rank computes the same verdict and none waits on a peer."""
    import hashlib

    import torch.distributed as dist

    mine = {k: hashlib.sha256(json.dumps(v, sort_keys=True, default=str).encode()).hexdigest()[:16]
            for k, v in fingerprint.items()}
    everyone = [None] * world
    dist.all_gather_object(everyone, mine)
    differ = {}
    for r, h in enumerate(everyone):
        for k in sorted(set(h) | set(everyone[0])):
            if h.get(k) != everyone[0].get(k):
                differ.setdefault(k, []).append(r)
    if differ:
        what = ", ".join(f"{k} (ranks {v} differ from rank 0)" for k, v in differ.items())
        from lib.cli_errors import UserError

        raise UserError(f"the ranks were started with different inputs: {what}; start every rank with the same "
                         f"plan file and arguments")


def torchrun_rank(run, job: dict, gather: bool = False, precheck=None):
    """``run(job, rank, world_size)`` on this rank under ``torchrun`` (reads RANK, WORLD_SIZE, MASTER_ADDR/PORT
    from the environment), after ``precheck(job, world_size)`` when given.

    The process group is created with ``job["timeout_s"]`` (default 60 s) as the timeout of its creation and of
    every collective, so a missing or hung peer is an error within that time. With ``job["agree"]`` (a name ->
    value dict), the ranks first check that they have the same values (``agree``). With ``gather``, every rank
    returns the list of all ranks' results (collected before shutdown)."""
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    backend = job.get("backend") or "gloo"
    _init(rank, world, backend, float(job.get("timeout_s", 60)), job.get("device", "cpu"))
    try:
        if job.get("agree"):
            agree(job["agree"], world)
        if precheck is not None:  # after the agreement: the same inputs give the same verdict on every rank
            precheck(job, world)
        result = run(job, rank, world)
        result.setdefault("peak_rss_bytes", peak_rss_bytes())
        if not gather:
            return result
        allr = [None] * world
        dist.all_gather_object(allr, result)
        return allr
    finally:
        dist.destroy_process_group()
