"""The error convention of every CLI and its numeric flag checks (lib/cli_errors.py): one line and exit 2 for a user's mistake, a traceback for a bug or with --debug (issue 18, finding 5)."""

import contextlib
import io
import json
import math
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.cli_errors import OneLineParser, UserError, check_float, check_int, run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def call(main, argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = run_cli(main, argv)
    return rc, err.getvalue().splitlines()


@pytest.mark.parametrize("exc", [UserError("--k: 0 is out of range\nallowed: [1, 8]"),
                                 FileNotFoundError(2, "No such file or directory", "plan.json"),
                                 PermissionError(13, "Permission denied", "/ro/x"),
                                 json.JSONDecodeError("Expecting value", "{", 1)])
def test_user_errors_are_one_line_and_exit_2(exc):
    def main(argv):
        raise exc

    rc, err = call(main, [])
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: "), err
    if isinstance(exc, OSError):
        assert exc.filename in err[0]


def test_success_bugs_and_debug():
    assert call(lambda argv: 0, [])[0] == 0 and call(lambda argv: None, [])[0] == 0 and call(lambda a: 1, [])[0] == 1

    def bug(argv):
        raise KeyError("a bug")

    with pytest.raises(KeyError):  # a bug is not dressed up as a user error: Python prints it and exits 1
        run_cli(bug, [])

    def user(argv):
        raise UserError("yours")

    with pytest.raises(UserError):  # --debug: the traceback of a user error too
        run_cli(user, ["--debug"])


def test_argparse_mistakes_are_one_line():
    p = OneLineParser(prog="prog")
    p.add_argument("--k", type=int)
    for argv, words in ((["--k", "x"], "invalid int value"), (["--k"], "expected one argument"),
                        (["--nope"], "unrecognized arguments")):
        rc, err = call(lambda a: p.parse_args(a) and 0, argv)
        assert rc == 2 and len(err) == 1 and words in err[0] and "prog --help" in err[0], err


def test_a_real_cli_in_a_subprocess():
    p = subprocess.run([sys.executable, "-m", "lib.straggler", "--days", "nan"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.splitlines() == [p.stderr.strip()] and "--days" in p.stderr


@settings(max_examples=30, deadline=None)
@given(v=st.one_of(st.integers(-10**30, 10**30), st.booleans(), st.floats(allow_nan=True), st.text(max_size=3)),
       lo=st.integers(-5, 5), span=st.integers(0, 10))
def test_check_int(v, lo, span):
    hi = lo + span
    ok = isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi
    if ok:
        assert check_int("--n", v, lo, hi) == v
    else:
        with pytest.raises(ValueError, match=r"^--n: "):
            check_int("--n", v, lo, hi, "why")


@settings(max_examples=30, deadline=None)
@given(v=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10), st.booleans()),
       lo_open=st.booleans())
def test_check_float(v, lo_open):
    ok = not isinstance(v, bool) and math.isfinite(v) and (0 < v if lo_open else 0 <= v) and v <= 1
    if ok:
        assert check_float("--p", v, 0, 1, lo_open) == float(v)
    else:
        with pytest.raises(ValueError, match=r"^--p: (.*allowed: [\[(]0, 1\]|False is not|True is not)"):
            check_float("--p", v, 0, 1, lo_open)
