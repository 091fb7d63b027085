"""``python -m lib.straggler``: the five ways to run the same two weeks, printed in a terminal (``--json`` for
machines). Every number is checked up front (finite, within a range that says why); a mistake is one line on
stderr and exit 2 (``lib.cli_errors``), ``--debug`` shows its traceback. Used in:
book/stragglers/01_the_one_slow_gpu."""

from __future__ import annotations

import json
import sys

from lib.cli_errors import OneLineParser, run_cli
from lib.straggler.model import FailureModel, backup_count, optimal_interval_min, step_efficiency, young_daly_min
from lib.straggler.simulate import five_ways


from lib.straggler.settings import MAX_DAYS, MAX_GPUS, MAX_MTBF_GPU_H, MIN_MTBF_GPU_H, check_setting  # noqa: F401


def parse_args(argv=None):
    p = OneLineParser(prog="python -m lib.straggler", description="The five ways to run the same two weeks "
                                "(too often, Young-Daly, too rarely, Young-Daly + 2% backups, your settings).",
                     epilog="'python -m lib.straggler production --help': the models against published figures.")
    p.add_argument("--gpus", type=int, default=16_384, help="GPUs in the cluster (default 16384)")
    p.add_argument("--interval", type=float, default=120.0, help="your checkpoint interval, minutes (default 120)")
    p.add_argument("--backups", type=float, default=0.0,
                   help="your backup GPUs as a percentage of the cluster, e.g. 2 for 2%% (default 0)")
    p.add_argument("--days", type=float, default=14.0, help="length of the run, days (default 14)")
    p.add_argument("--seed", type=int, default=0, help="seed of the failure gaps (default 0)")
    p.add_argument("--mtbf-gpu-h", type=float, default=FailureModel().per_gpu_mtbf_h,
                   help="mean hours between failures of one GPU (default: Meta's Llama 3 figure, 50677 h)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    a = p.parse_args(argv)
    for name, flag in (("n_gpus", "--gpus"), ("interval_min", "--interval"), ("backup_pct", "--backups"),
                       ("days", "--days"), ("seed", "--seed"), ("mtbf_gpu_h", "--mtbf-gpu-h")):
        check_setting(name, getattr(a, flag[2:].replace("-", "_")), flag)  # the widget's bounds too
    return a


def main(argv=None) -> int:
    """The CLI: one line and exit 2 for a mistake (``--debug``: the traceback), 0 when done. ``production`` as
    the first argument runs :mod:`lib.straggler.production_cli` instead."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["production"]:
        from lib.straggler import production_cli

        return run_cli(production_cli.main, args[1:])
    return run_cli(_main, args)


def _main(argv=None) -> int:
    args = parse_args(argv)
    failure = FailureModel(per_gpu_mtbf_h=args.mtbf_gpu_h, run_days=args.days)
    comparison, _ = five_ways(args.gpus, args.interval, args.backups / 100, args.days, args.seed, failure=failure)
    b = backup_count(args.gpus, 0.02)
    mtbf = failure.cluster_mtbf_min(args.gpus)
    summary = {
        "cluster_mtbf_h": mtbf / 60,
        "young_daly_min": young_daly_min(mtbf, failure.checkpoint_min),
        "best_interval_min": optimal_interval_min(mtbf, failure.checkpoint_min),
        "step_efficiency": step_efficiency(args.gpus, 0),
        "step_efficiency_2pct_backups": step_efficiency(args.gpus, b),
    }
    if args.json:
        print(json.dumps({"summary": summary, **comparison.to_dict()}, indent=2))
        return 0
    print(f"Five ways to run the same {args.days:g} days on {args.gpus:,} GPUs (seed {args.seed}); "
          f"every row sees the same failures.")
    print(f"cluster MTBF {summary['cluster_mtbf_h']:.2f} h; Young-Daly {summary['young_daly_min']:.1f} min; "
          f"exact best {summary['best_interval_min']:.1f} min; step efficiency {summary['step_efficiency']:.1%} "
          f"({summary['step_efficiency_2pct_backups']:.1%} with {b:,} backups)\n")
    print(comparison.to_text())
    print("\nSimulated with the straggler model of lib/straggler/model.py; (exp.) = exact expected value; "
          "goodput = kept x step efficiency.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
