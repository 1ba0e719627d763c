"""`python -m specactor.install install|uninstall <client> …`: the two commands without the CLI."""

import sys

from specactor.install import install_main, uninstall_main


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("install", "uninstall"):
        print("usage: python -m specactor.install install|uninstall <client> [options]", file=sys.stderr)
        return 2
    return (install_main if argv[0] == "install" else uninstall_main)(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
