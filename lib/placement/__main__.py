"""``python -m lib.placement train|evaluate|figures``: see :mod:`lib.placement.cli`."""

import sys

from lib.placement.cli import main

sys.exit(main())
