"""python -m lib.rerun: rerun chapters in batch with a named parameter set, or build the book from a rerun.

    python -m lib.rerun --params cpu                          # every chapter, into runs/cpu-<UTC stamp>/
    python -m lib.rerun --params 4gpu --chapters book/galvatron/04_from_plan_to_run
    python -m lib.rerun --params 4gpu --resume runs/4gpu-20261201T120000Z
    python -m lib.rerun --book-from runs/4gpu-20261201T120000Z   # HTML in _build/html, nothing executed

A mistake (unknown set, bad YAML, a run folder that is not one) is one line on stderr and exit 2
(``lib.cli_errors``); ``--debug`` shows its traceback; a chapter that failed gives exit 1.
"""

from __future__ import annotations

import json
import os
import sys

from lib.cli_errors import OneLineParser, UserError, run_cli


def main(argv=None) -> int:
    """The CLI: 0 when every chapter ran, 1 when one failed, 2 for a user error (one line on stderr)."""
    return run_cli(_main, argv)


def _main(argv=None) -> int:
    try:
        return _run(argv)
    except FileExistsError as exc:  # a run folder that is already there: the user's to move
        raise UserError(f"{exc.filename or exc}: already exists; pick another --runs-root or --resume it") from exc


def _run(argv) -> int:
    from lib.rerun import execute, params, replay

    ap = OneLineParser(prog="python -m lib.rerun", description=__doc__.splitlines()[0])
    ap.add_argument("--params", help=f"a parameter set: {', '.join(params.available())}, or a .yaml path")
    ap.add_argument("--chapters", nargs="+", metavar="CHAPTER", help="book/<part>/<name> (default: every chapter)")
    ap.add_argument("--runs-root", default=os.path.join(params.ROOT, "runs"), help="where run folders go")
    ap.add_argument("--resume", metavar="RUN", help="continue this run folder: chapters already done are skipped")
    ap.add_argument("--book-from", metavar="RUN", help="build the HTML book from this run folder, executing nothing")
    ap.add_argument("--out", default=None, help="with --book-from: folder that receives _build/html (default: repo)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars (CI logs)")
    ap.add_argument("--list", action="store_true", help="list the parameter sets and chapters, then exit")
    ap.add_argument("--debug", action="store_true", help="show the traceback of an error")
    a = ap.parse_args(argv)
    if a.list:
        for name in params.available():
            print(f"{name:12s} {params.load(name).description}")
        print("\n".join(params.book_chapters()))
        return 0
    if a.book_from:
        if a.out is not None:
            from lib.atomic import check_out_dir

            check_out_dir("--out", a.out)
        print(replay.book_from(a.book_from, a.out))
        return 0
    if a.resume:
        from lib.rerun.files import read_params

        saved = read_params(a.resume)  # checked field by field; the set as the run saved it
        pset = params.ParamSet(**saved.set.model_dump())
        if a.params and params.load(a.params).name != pset.name:
            raise UserError(f"--resume: {a.resume} was run with parameter set {pset.name!r}, not "
                            f"{params.load(a.params).name!r}; drop --params to resume it")
    elif a.params:
        pset = params.load(a.params)
    else:
        ap.error("--params is required (or --resume, --book-from, --list)")
    chapters = None if a.resume and not a.chapters else params.book_chapters()
    if a.chapters:
        chapters = [params._chapter_key(c) for c in a.chapters]
        seen = {}
        for given, key in zip(a.chapters, chapters):
            if key in seen:
                raise UserError(f"--chapters: {key} is given twice ({seen[key]!r} and {given!r}); allowed: each "
                                f"chapter once")
            seen[key] = given
    if not a.resume:
        from lib.atomic import check_out_dir

        check_out_dir("--runs-root", a.runs_root)
    run_dir, results = execute.run(pset, chapters, a.runs_root, a.resume, progress=not a.no_progress)
    print()
    print(execute.summary_table(results))
    shown = os.path.relpath(run_dir) if os.path.abspath(run_dir).startswith(os.getcwd()) else run_dir
    print(f"\nrun folder: {shown}  (summary.json, params.json, logs/, book/)")
    return 1 if any(r.status != "ok" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
