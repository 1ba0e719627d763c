"""`python -m specactor.hooks <event> --client <client>` is `specactor hook …`."""

from specactor.hooks.run import hook_main

raise SystemExit(hook_main())
