"""``python -m dsident ...``: the ``dsident`` command where its console script is not on PATH
(a notebook's kernel, a cluster job's bare interpreter)."""
import sys

from .cli import main

sys.exit(main())
