# specactor's recipes. Every one runs from a fresh `pip install -e '.[dev]'`.

set shell := ["bash", "-euo", "pipefail", "-c"]

python := env_var_or_default("PYTHON", "python3")

# list the recipes
default:
    @just --list

# start the server on a temporary workspace and drive it with the official MCP client
demo:
    {{python}} -m specactor demo

# the test suite (pytest's "no tests collected" counts as a failure)
test *args:
    {{python}} -m pytest {{args}}

# the edit-test loop, under a minute: the suite without the tests marked slow, 12 examples a property
test-fast *args:
    SPECACTOR_FAST=1 {{python}} -m pytest -m "not slow" -q {{args}}

# the suite against the newest versions the ranges allow, in a throwaway venv: finds the next upstream break first
test-latest *args:
    #!/usr/bin/env bash
    set -euo pipefail
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    {{python}} -m venv "$tmp/venv"
    "$tmp/venv/bin/python" -m pip install -q --upgrade pip
    "$tmp/venv/bin/python" -m pip install -q -e '.[dev-unpinned]'
    "$tmp/venv/bin/python" -m tests.lock --compare
    PATH="$tmp/venv/bin:$PATH" "$tmp/venv/bin/python" -m pytest {{args}}

# pin the dev extra again from the dev-unpinned ranges (uv pip compile --universal)
lock *args:
    {{python}} -m tests.lock {{args}}

# ruff and mypy (strict)
lint:
    {{python}} -m ruff check specactor tests bench
    {{python}} -m mypy

# performance gates, side by side with the SDK peer and the floor (see bench/README.md)
bench *args:
    {{python}} -m bench {{args}}

# the official MCP conformance suite, three configurations, against the fixture server over HTTP
conformance *args:
    {{python}} -m tests.conformance.run {{args}}

# hypothesis fuzzing, 2000 examples a test: tool inputs, and frames sent to a live stdio server (database: .hypothesis/)
fuzz *args:
    SPECACTOR_FUZZ=1 {{python}} -m pytest -p no:cacheprovider tests/properties tests/fuzz -q {{args}}
