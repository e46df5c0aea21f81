"""``python -m reportfed`` = the ``reportfed`` command."""

from reportfed.cli import main

raise SystemExit(main())
