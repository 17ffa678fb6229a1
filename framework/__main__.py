"""``python -m tclose`` runs the command-line interface."""

from tclose.cli import main

raise SystemExit(main())
