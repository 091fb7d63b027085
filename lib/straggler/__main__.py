"""``python -m lib.straggler``: see :mod:`lib.straggler.cli`."""

from lib.straggler.cli import main

raise SystemExit(main())
