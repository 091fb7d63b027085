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

import logging

WORKER = ("-m", "lib.galvatron")
_AGENT_LOGGERS = ("torch.distributed.elastic", "torch.distributed.run", "torch.distributed.launcher")


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """(torchrun's options, the ranks' ``run ...`` command line); a ``ValueError`` when there is no ``run``."""
    if "run" not in argv:
        raise ValueError("launch: expected torchrun's options, then run and the ranks' flags, e.g. "
                         "launch --nproc-per-node 2 run --plan plan.json")
    i = argv.index("run")
    return list(argv[:i]), list(argv[i:])


def torchrun_args(launcher: list[str], worker: list[str]):
    """torchrun's parsed arguments for ``torchrun <launcher> -m lib.galvatron <worker>``; a bad torchrun
    option is a ``ValueError`` (one line), not argparse's usage text."""
    from torch.distributed import run as tr

    parser = tr.get_args_parser()

    def error(message):
        raise ValueError(f"launch: {message}; the options before run are torchrun's (torchrun --help)")

    parser.error = error
    if any(a in ("-m", "--module", "--no-python", "--no_python") for a in launcher):
        raise ValueError("launch: -m/--no-python are set by launch itself; give torchrun's options, then run ...")
    return parser.parse_args([*launcher, *WORKER, *worker])


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
    try:
        tr.run(args)
    except ChildFailedError as e:
        if debug:
            raise
        return exit_code(e.failures)
    return 0
