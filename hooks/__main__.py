"""``python -m hooks``: the ``hpcbridge`` command (``hooks.cli``)."""

import sys

from hooks.cli import main

sys.exit(main())
