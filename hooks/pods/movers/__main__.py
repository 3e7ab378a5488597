import sys

from hooks.pods.movers.program import main

sys.exit(main())
