"""Checkpointing and resuming a REINFORCE run: the run log's model signature, the checkpoint next to the log,
and the rules for picking a run up again.

After every update the trainer appends one record to its run log and then saves its whole state (placer,
optimizer, sampling generator, the environment's random state, baseline, top placements) atomically to
``<log>.ckpt.pt``. A run killed at any point resumes from the last checkpoint; a record written after it (killed
between the two writes) is dropped and its update redone, so the log ends as an uninterrupted run's would.
Used in: Part I, chapters 2-3.
"""

from __future__ import annotations

import io
import os
from typing import Callable

import numpy as np
import torch

from lib import atomic, runlog
from lib.cli_errors import UserError

#: Config keys that may differ between a run and its resumption (they do not change the records).
RESUMABLE_KEYS = ("n_iters",)


def model_signature(graph, groups, n_devices: int) -> dict:
    """What a run log must match to be resumed or evaluated: the model and the device count."""
    return {
        "graph": getattr(graph, "name", None),
        "n_nodes": len(graph.nodes),
        "groups": [list(g) for g in groups] if groups is not None else None,
        "n_devices": int(n_devices),
    }


def check_signature(header: dict, expected: dict, path: str = "run log") -> None:
    """Raise ``ValueError`` naming the first mismatch between a log's model and the expected one."""
    got = header.get("model")
    if got is None:
        raise UserError(f"{path} has no model signature in its header")
    for key in ("graph", "n_nodes", "n_devices", "groups"):
        if got.get(key) != expected.get(key):
            raise UserError(
                f"{path} was written for another model: {key}={got.get(key)!r}, expected {expected.get(key)!r}"
            )


def _env_rng(env):
    for name in ("rng", "_rng"):
        r = getattr(env, name, None)
        if isinstance(r, np.random.Generator):
            return r
    return None


def env_rng_state(env):
    """The environment's random state (None when it has none): a noisy simulator keeps a numpy Generator."""
    if hasattr(env, "get_rng_state") and hasattr(env, "set_rng_state"):
        return ("method", env.get_rng_state())
    r = _env_rng(env)
    return ("generator", r.bit_generator.state) if r is not None else None


def set_env_rng_state(env, state) -> None:
    """Restore what :func:`env_rng_state` returned."""
    if state is None:
        return
    how, s = state
    if how == "method":
        env.set_rng_state(s)
    else:
        _env_rng(env).bit_generator.state = s


def save_atomic(obj, path: str) -> None:
    """``torch.save`` to ``path`` whole or not at all."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic.write_bytes(path, buf.getvalue())


CHECKPOINT_KEYS = ("n_updates", "placer", "opt", "gen", "env_rng", "baseline", "top", "stopped")


def load_checkpoint(path: str) -> dict:
    """A trainer's state from ``path``; ``ValueError`` naming the file if it is damaged or not a checkpoint."""
    try:
        state = torch.load(path, weights_only=False)
    except Exception as e:  # torch raises many kinds (RuntimeError, EOFError, UnpicklingError...) for bad bytes
        raise UserError(f"{path}: damaged checkpoint ({type(e).__name__}: {' '.join(str(e).split())[:120]}); "
                         f"delete it and start over with --no-resume") from e
    missing = [k for k in CHECKPOINT_KEYS if not isinstance(state, dict) or k not in state]
    n = state.get("n_updates") if isinstance(state, dict) else None
    if missing or isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise UserError(f"{path}: not a REINFORCE checkpoint (missing {missing or 'a valid n_updates'}); "
                         f"delete it and start over with --no-resume")
    return state


def checkpoint_path(log_path: str) -> str:
    """Where a run log's checkpoint lives: next to it."""
    return log_path + ".ckpt.pt"


def open_run_log(path: str, resume: bool, make_header: Callable[[], dict], config: dict, signature: dict,
                 env_info) -> tuple[runlog.RunLog, list, dict | None]:
    """Open ``path`` for appending: ``(log, records so far, checkpointed state or None)``.

    With ``resume`` and an existing log, check that it was written for the same model (``signature``), config
    (but for ``RESUMABLE_KEYS``) and environment, drop records newer than the checkpoint, and raise the
    header's ``n_iters`` if this run asks for more. Otherwise start a new log from ``make_header()``.
    A damaged log (interleaved updates, a second header, a bad line) or checkpoint raises ``ValueError``
    naming the file; a truncated last line past the checkpoint (a kill mid-append) is dropped with the
    uncheckpointed record, since that update is redone. The caller holds the run's ``runlog.writer_lock``.
    """
    ckpt = checkpoint_path(path)
    if resume and os.path.exists(path):
        scanned = runlog.scan(path)  # refuses interleaved writers, second headers, bad JSON (file and line)
        header, records = scanned.header, scanned.records
        check_signature(header, signature, path)
        mine = {k: v for k, v in config.items() if k not in RESUMABLE_KEYS}
        theirs = {k: v for k, v in header.get("config", {}).items() if k not in RESUMABLE_KEYS}
        if mine != theirs:
            diff = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
            raise UserError(f"{path} was written with another config (differs in {diff}); "
                             f"use another output path or resume=False")
        if header.get("env") != env_info:
            raise UserError(f"{path} was written on env {header.get('env')!r}, not {env_info!r}")
        state = load_checkpoint(ckpt) if os.path.exists(ckpt) else None
        n = state["n_updates"] if state is not None else 0
        if state is None and records:
            raise UserError(f"{path} has {len(records)} records but no checkpoint {ckpt!r}; cannot resume")
        if len(records) < n:
            raise UserError(f"{path} has {len(records)} complete records but its checkpoint is at update {n}; "
                             f"start over with --no-resume (resume=False)")
        # A truncated last line *past* the checkpoint is what a crash of this run's own writer leaves (killed
        # mid-append): that update is redone anyway, so dropping it loses nothing. Inside the checkpointed
        # records it is damage, and only an explicit --repair (runlog.repair) may drop it.
        if scanned.torn_line is not None and scanned.torn_line - 2 < n:
            runlog.read(path)  # raises: names the file and line, says to pass --repair
        numbers = [r.get("update") for r in records[:n]]
        if numbers != list(range(n)):
            raise runlog.RunLogError(f"run log {path!r}: its first {n} records should be updates 0..{n - 1} "
                                     f"(the checkpoint's); got {numbers[:8]}...")
        if len(records) > n or scanned.torn_line is not None:  # killed between a record and its checkpoint
            runlog.rewrite(path, header, records[:n])           # (or mid-append): redo that update
            records = records[:n]
        log = runlog.RunLog(path)
        if config["n_iters"] > header["config"]["n_iters"]:  # an extended run: keep the header honest
            header["config"]["n_iters"] = config["n_iters"]
            runlog.rewrite(path, header, records)
        return log, list(records), state
    if os.path.exists(ckpt):
        os.unlink(ckpt)
    return runlog.RunLog.create(path, make_header()), [], None
