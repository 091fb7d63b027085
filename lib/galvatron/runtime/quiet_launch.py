"""Start a plan's ranks as ``torchrun`` does, but keep to the book's error convention.

``torchrun`` adds its own report to every failed run: a traceback through its agent and a box of failures,
some 40 lines after the one line our ranks printed, and it exits 1 whatever the ranks' codes were. This is
``torchrun`` in-process (its own parser, rendezvous and agent), with the agent's logs turned down and the
failure report replaced by the root cause's exit code (2 for a user's mistake, as every CLI here):

    python -m lib.galvatron launch --nproc-per-node 2 run --plan plan.json --check
    python -m lib.galvatron launch --nnodes 2 --node-rank R --nproc-per-node 1 \\
        --master-addr HOST --master-port P run --plan plan.json

Everything before ``run`` is torchrun's (``torchrun --help``); ``run`` and after go to every rank. ``--debug``
(anywhere) keeps torchrun's report too. Used in: the README's multi-GPU runs, ``Plan.to_torchrun``.
"""

from __future__ import annotations

import contextlib
import logging
import os

from lib.cli_errors import UserError

WORKER = ("-m", "lib.galvatron")
_AGENT_LOGGERS = ("torch.distributed.elastic", "torch.distributed.run", "torch.distributed.launcher")


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """(torchrun's options, the ranks' ``run ...`` command line); a ``ValueError`` when there is no ``run``."""
    if "run" not in argv:
        raise UserError("launch: expected torchrun's options, then run and the ranks' flags, e.g. "
                         "launch --nproc-per-node 2 run --plan plan.json")
    i = argv.index("run")
    return list(argv[:i]), list(argv[i:])


def torchrun_args(launcher: list[str], worker: list[str]):
    """torchrun's parsed arguments for ``torchrun <launcher> -m lib.galvatron <worker>``; a bad torchrun
    option is a ``ValueError`` (one line), not argparse's usage text."""
    from torch.distributed import run as tr

    parser = tr.get_args_parser()

    def error(message):
        raise UserError(f"launch: {message}; the options before run are torchrun's (torchrun --help)")

    parser.error = error
    if any(a in ("-m", "--module", "--no-python", "--no_python") for a in launcher):
        raise UserError("launch: -m/--no-python are set by launch itself; give torchrun's options, then run ...")
    args = parser.parse_args([*launcher, *WORKER, *worker])
    check_bounds(args)
    if args.shutdown_timeout is None:  # a stopped rank ignores SIGTERM: kill it soon, not after torchrun's 30 s
        args.shutdown_timeout = SHUTDOWN_S
    return args


#: Seconds the agent waits for the other ranks to exit after one failed, before it kills them. torchrun waits
#: 30 s, so a stopped peer (SIGSTOP, a hung kernel) held the run 30 s past ``--timeout-s``.
SHUTDOWN_S = 2
MAX_NODES, MAX_PROCS = 65536, 1024


def _int(text: str, flag: str, lo: int, hi: int, why: str) -> int:
    try:
        v = int(str(text).strip())
    except ValueError:
        raise UserError(f"launch {flag}: {text!r} is not an integer; allowed: [{lo}, {hi}] ({why})") from None
    if not lo <= v <= hi:
        raise UserError(f"launch {flag}: {v} is out of range; allowed: [{lo}, {hi}] ({why})")
    return v


def check_bounds(args) -> None:
    """Every torchrun option this launcher takes within a range that says why; a :class:`UserError` naming
    the option otherwise (torchrun itself asserts, or starts nothing and waits)."""
    if str(args.nproc_per_node) not in ("cpu", "gpu", "auto"):
        _int(args.nproc_per_node, "--nproc-per-node", 1, MAX_PROCS, "ranks on this node; or cpu, gpu, auto")
    lo_hi = str(args.nnodes).split(":")
    if len(lo_hi) > 2:
        raise UserError(f"launch --nnodes: {args.nnodes!r} is not N or MIN:MAX; allowed: e.g. 2 or 1:4")
    lo = _int(lo_hi[0], "--nnodes", 1, MAX_NODES, "nodes")
    hi = _int(lo_hi[-1], "--nnodes", lo, MAX_NODES, "nodes; MAX at least MIN")
    _int(args.node_rank, "--node-rank", 0, hi - 1, f"this node's index among {hi} nodes")
    if args.master_port is not None:
        _int(args.master_port, "--master-port", 1, 65535, "a TCP port")
    _int(args.max_restarts, "--max-restarts", 0, 100, "restarts of the whole group")
    if not (0 < float(args.monitor_interval) <= 3600):
        raise UserError(f"launch --monitor-interval: {args.monitor_interval} is out of range; allowed: (0, 3600] "
                        f"seconds")
    if args.shutdown_timeout is not None:
        _int(args.shutdown_timeout, "--shutdown-timeout", 0, 3600, "seconds before stopped ranks are killed")


def exit_code(failures: dict) -> int:
    """The root cause's exit code (the first failure in time, as torchrun reports it); 1 if it had none > 0."""
    if not failures:
        return 1
    first = min(failures.values(), key=lambda f: f.timestamp)
    return first.exitcode if first.exitcode and first.exitcode > 0 else 1


def launch(argv: list[str]) -> int:
    from torch.distributed import run as tr
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    debug = "--debug" in argv
    args = torchrun_args(*split_argv(argv))
    if not debug:
        for name in _AGENT_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        # the ranks' c10d warnings (a store's socket timing out before our one line says so) stay out too
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    try:
        with _prompt_shutdown(args.shutdown_timeout):
            tr.run(args)
    except ChildFailedError as e:
        if debug:
            raise
        return exit_code(e.failures)
    return 0


def _state(pid: int) -> str:
    """The one-letter state of ``pid`` in ``/proc`` (``T`` stopped, ``t`` traced); empty when unknown."""
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError, IndexError):
        return ""


def wake_stopped(pids) -> list[int]:
    """Send SIGTERM, then SIGCONT, to each of ``pids`` that is stopped (SIGSTOP, Ctrl-Z): a stopped process
    acts on SIGTERM only once continued, so torchrun's shutdown otherwise waits its whole grace before SIGKILL
    (2 of the 8.5 s a stopped peer held ``launch --timeout-s 5``). Returns the pids woken."""
    import signal

    woken = []
    for pid in pids:
        if _state(pid) == "T":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
                os.kill(pid, signal.SIGCONT)
                woken.append(pid)
    return woken


@contextlib.contextmanager
def _prompt_shutdown(timeout_s: int):
    """While the block runs, the ranks left after a failure get ``timeout_s`` of grace before SIGKILL, not 30 s:
    torchrun's ``--shutdown-timeout`` reaches only its signal path, while a failed rank's path (the process
    context's ``close()``) waits 30 s for a stopped peer that cannot act on SIGTERM. A stopped rank is first
    sent SIGTERM and SIGCONT (:func:`wake_stopped`), so it ends at once instead of after the grace."""
    from torch.distributed.elastic.multiprocessing import api as mp_api

    original = mp_api.PContext.__dict__.get("close")
    if original is None:  # another torch: keep its own behaviour
        yield
        return

    def close(self, death_sig=None, timeout: int = 30) -> None:
        wake_stopped(self.pids().values())
        return original(self, death_sig, min(timeout, timeout_s))

    mp_api.PContext.close = close
    try:
        yield
    finally:
        mp_api.PContext.close = original
