"""`python -m specactor.context` is `specactor context`."""

from specactor.context.command import main

raise SystemExit(main())
