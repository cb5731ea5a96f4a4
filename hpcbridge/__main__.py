"""``python -m hpcbridge``: the hpcbridge command line."""

import sys

from .cli.main import main

sys.exit(main())
