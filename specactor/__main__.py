"""`python -m specactor` runs the command line, exactly as the `specactor` script does."""

from specactor.entry import main

if __name__ == "__main__":
    raise SystemExit(main())
