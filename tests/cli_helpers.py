"""Shared helpers for the command-line tests: run a CLI's ``main`` in-process, and the one-line error rule."""

import contextlib
import io


def call_main(main, argv):
    """``main(argv)`` in-process: (exit status, stdout, stderr lines)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue().splitlines()


def assert_one_line(rc, err, *words):
    """A user's mistake: exit 2, exactly one stderr line starting ``error: ``, no traceback, naming ``words``."""
    assert rc == 2, (rc, err)
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert "Traceback" not in err[0]
    for w in words:
        assert w in err[0], (w, err)
