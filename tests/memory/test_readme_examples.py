"""The README shows what users will see: its error example is a real reply, and its JSON snippets parse."""

from __future__ import annotations

import json
import re
from pathlib import Path

from specactor.testing import MemoryClient
from tests.memory.conftest import call

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


async def test_the_readme_error_example_is_what_memory_search_answers_to_limit_500(client: MemoryClient) -> None:
    line = next(line for line in README.splitlines() if line.startswith('{"success": false'))
    assert await call(client, "memory_search", {"query": "x", "limit": 500}) == json.loads(line)


def test_every_json_snippet_in_the_readme_parses() -> None:
    blocks = re.findall(r"```json\n(.*?)```", README, re.DOTALL)
    assert blocks
    for block in blocks:
        if '"..."' in block:  # the envelope's shape, one object a line
            for line in block.strip().splitlines():
                json.loads(line)
        else:
            json.loads(block)
