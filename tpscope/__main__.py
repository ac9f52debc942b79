"""`python -m tpscope ...`: the same as the `tpscope` command (handy from a source tree)."""

import sys

from tpscope.cli import main

sys.exit(main())
