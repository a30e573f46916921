"""``python -m dreamer``: the same as the ``dreamer`` command."""

from __future__ import annotations

import sys

from dreamer.cli import main

if __name__ == "__main__":
    sys.exit(main())
