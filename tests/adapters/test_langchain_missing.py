"""Without the extra, importing the LangChain adapter says what to install."""

from __future__ import annotations

import importlib
import sys

import pytest


@pytest.mark.parametrize("missing", ["langchain", "langchain_core", "mcp"])
def test_importing_the_adapter_without_the_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch,
                                                                        missing: str) -> None:
    for name in [n for n in sys.modules if n == missing or n.startswith(f"{missing}.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)  # an import of it now fails as if it were not installed
    monkeypatch.delitem(sys.modules, "specactor.adapters.langchain", raising=False)
    monkeypatch.delitem(sys.modules, "specactor.adapters.mcp_link", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'specactor\[langchain\]'") as caught:
        importlib.import_module("specactor.adapters.langchain")
    assert missing in str(caught.value)


def test_the_adapter_package_and_the_tools_command_need_no_langchain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain", None)
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    for name in ("specactor.adapters", "specactor.adapters.definitions", "specactor.adapters.tools_command"):
        monkeypatch.delitem(sys.modules, name, raising=False)
        importlib.import_module(name)
