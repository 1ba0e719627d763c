"""The OpenCode adapter: the seed's interface with the tools as OpenCode names them and the plugin's context.

That OpenCode itself shows these names and this context is checked in tests/e2e/test_opencode.py.
"""

from __future__ import annotations

import jsonschema
import pytest

from specactor.adapters import EcosystemAdapter
from specactor.adapters.opencode import OpenCodeAdapter
from specactor.context.reader import get_session_context
from tests.context.workspace import MINE, THEIRS, Workspace


def test_the_adapter_offers_the_seeds_groups_as_opencode_names_them(ws: Workspace) -> None:
    adapter = OpenCodeAdapter(ws.root)
    assert isinstance(adapter, EcosystemAdapter)
    assert [t.name for t in adapter.get_memory_tools()] == [
        "specactor_memory_add", "specactor_memory_search", "specactor_memory_delete"]
    assert [t.tool for t in adapter.get_knowledge_tools()] == ["knowledge_query", "knowledge_show", "knowledge_check"]
    assert [t.name for t in adapter.get_sync_tools()] == ["specactor_sync_now", "specactor_sync_status"]
    every = adapter.get_tools()
    assert len({t.name for t in every}) == len(every) and all(t.name == f"specactor_{t.tool}" for t in every)


def test_each_tools_parameters_are_a_closed_draft_07_schema(ws: Workspace) -> None:
    for tool in OpenCodeAdapter(ws.root).get_tools():
        jsonschema.Draft7Validator.check_schema(tool.parameters)
        assert tool.parameters["type"] == "object" and tool.parameters["additionalProperties"] is False
        assert tool.description


def test_the_session_context_is_the_plugins_and_keeps_to_the_budget(ws: Workspace) -> None:
    said = OpenCodeAdapter(ws.root).get_session_context()
    assert said == get_session_context(ws.root) and MINE[0] in said and THEIRS not in said
    assert 0 < len(OpenCodeAdapter(ws.root, budget=600).get_session_context()) <= 600


def test_tool_switches_name_a_group_or_all_under_the_server_key(ws: Workspace) -> None:
    adapter = OpenCodeAdapter(ws.root, server="specs")
    assert adapter.tool_switches() == {"specs_*": True}
    assert adapter.tool_switches("memory", enabled=False) == {"specs_memory_*": False}
    with pytest.raises(KeyError):
        adapter.tool_switches("nope")
