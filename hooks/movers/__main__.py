import sys

from hooks.movers.program import main

sys.exit(main())
