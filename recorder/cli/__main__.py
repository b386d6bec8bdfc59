"""``python -m recorder.cli``: the ``recorder`` command."""

from recorder.cli.main import main

raise SystemExit(main())
