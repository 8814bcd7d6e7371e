"""`python -m stateous`: the same as the `stateous` command."""

from stateous.cli.main import main

raise SystemExit(main())
