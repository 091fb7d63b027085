"""``python -m lib.straggler production --data FILE... [--json]``: every published observation of the files
(schema: ``lib/straggler/production.py``) beside the model's prediction, then the median and largest error per
kind. ``--model page`` is the page's model, ``--model production`` (the default) every switch the data
supports; ``--switch NAME=VALUE`` changes one switch. With several files the errors are also given per file
(the calibration set and the held-out set apart). A bad file is one line naming the file, the observation
and the field, exit 2 (``lib.cli_errors``). Used in: book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

import json

from lib.cli_errors import OneLineParser, UserError
from lib.straggler import predict as pr
from lib.straggler.production import SHARE_KINDS, load_many
from lib.straggler.switches import CHOICES, PROFILES, parse_switch


def parse_args(argv=None):
    p = OneLineParser(prog="python -m lib.straggler production",
                      description="The failure, checkpoint and straggler models against published figures.")
    p.add_argument("--data", nargs="+", required=True, metavar="FILE",
                   help="observation files (data/production/*.json)")
    p.add_argument("--model", choices=sorted(PROFILES), default="production",
                   help="page: the page's model; production: every switch the data supports (default)")
    p.add_argument("--switch", action="append", default=[], metavar="NAME=VALUE",
                   help="change one switch: " + "; ".join(f"{k} in {'|'.join(v)}" for k, v in CHOICES.items()))
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    a = p.parse_args(argv)
    switches = PROFILES[a.model]
    for text in a.switch:
        try:
            switches = parse_switch(text, switches)
        except ValueError as e:
            raise UserError(str(e) if str(e).startswith("--switch") else f"--switch {text!r}: {e}") from None
    a.switches = switches
    return a


def report(paths, switches) -> dict:
    """The JSON report: observations with their predictions and errors, and errors by kind."""
    predictions = pr.predict_all(load_many(paths), switches)
    by_file = {path: pr.by_kind([p for p in predictions if p.file == path]) for path in dict.fromkeys(paths)}
    return {"switches": switches.to_dict(), "observations": [p.to_dict() for p in predictions],
            "by_kind": pr.by_kind(predictions), "by_file": by_file}


def _fmt(kind: str, v) -> str:
    if v is None:
        return "-"
    if kind in SHARE_KINDS:
        return f"{v:.1%}"
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def _err(kind: str, e) -> str:
    if e is None:
        return "no model"
    return f"{e * 100:+.1f} pt" if kind in SHARE_KINDS else f"{e:+.0%}"


def to_text(rep: dict) -> str:
    rows = [("observation", "kind", "published", "predicted", "error")]
    for o in rep["observations"]:
        rows.append((o["name"], o["kind"], _fmt(o["kind"], o["published"]), _fmt(o["kind"], o["predicted"]),
                     _err(o["kind"], o["error"])))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    groups = list(rep["by_file"].items()) if len(rep["by_file"]) > 1 else []
    for title, by_kind in [*((f"in {path}", bk) for path, bk in groups), ("in all", rep["by_kind"])]:
        lines.append("")
        lines.append(f"error by kind {title} (shares: points; others: relative): median, largest, n")
        for kind, s in by_kind.items():
            unit = " pt" if kind in SHARE_KINDS else "%"
            lines.append(f"  {kind:<24}{s['median_abs_error'] * 100:8.1f}{unit:3}{s['max_abs_error'] * 100:8.1f}"
                         f"{unit:3}{s['n']:3d}")
    sw = ", ".join(f"{k}={v}" for k, v in rep["switches"].items())
    lines.append(f"\nModel: {sw}. Predicted = the model's expected value (lib/straggler/predict.py); "
                 f"published = quoted from each observation's source.")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    rep = report(args.data, args.switches)
    print(json.dumps(rep, indent=1) if args.json else to_text(rep))
    return 0
