"""``python -m mqjoin.cli``: the ``mqjoin`` command."""

import sys

from mqjoin.cli import main

sys.exit(main())
