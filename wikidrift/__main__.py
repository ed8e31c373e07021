"""``python -m wikidrift``: the command line."""

import sys

from wikidrift.cli import main

sys.exit(main())
