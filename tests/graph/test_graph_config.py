"""Graph sync's settings as the seed names them (EMERGENT_URL, EMERGENT_API_KEY or EMERGENT_TOKEN,
EMERGENT_PROJECT_ID, a YAML or TOML file), when it is on, the exit when its key is missing, and a
server that starts and serves while Emergent cannot be reached."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from specactor.config import ConfigError, load_settings
from specactor.testing import open_memory_server
from tests.graph.support import graph_config, write_change
from tests.test_startup_errors import clean_env


def test_the_seeds_variables_set_url_key_and_project(tmp_path: Path) -> None:
    config = load_settings({"root": str(tmp_path)}, {"EMERGENT_URL": "http://graph:3002", "EMERGENT_API_KEY": "k1",
                                                     "EMERGENT_PROJECT_ID": "p1"}).config
    assert (config.emergent.url, config.emergent.api_key, config.emergent.project_id) == ("http://graph:3002", "k1",
                                                                                          "p1")
    assert load_settings({"root": str(tmp_path)}, {}).config.emergent.url == "http://localhost:3002"


@pytest.mark.parametrize("order", [("EMERGENT_TOKEN", "EMERGENT_API_KEY"), ("EMERGENT_API_KEY", "EMERGENT_TOKEN")])
def test_emergent_token_wins_over_its_legacy_alias_in_any_order(tmp_path: Path, order: tuple[str, str]) -> None:
    values = {"EMERGENT_TOKEN": "emt_token", "EMERGENT_API_KEY": "legacy"}
    environ = {name: values[name] for name in order}
    assert load_settings({"root": str(tmp_path)}, environ).config.emergent.api_key == "emt_token"


@pytest.mark.parametrize("suffix, text", [
    ("toml", '[emergent]\nurl = "http://file:1"\napi_key = "from-file"\n'
             '[graph]\nenabled = true\nworkspace_id = "a/b"\n'),
    ("yaml", "emergent:\n  url: http://file:1\n  api_key: from-file\ngraph:\n  enabled: true\n  workspace_id: a/b\n"),
])
def test_a_config_file_sets_graph_sync_and_the_environment_overrides_it(tmp_path: Path, suffix: str,
                                                                         text: str) -> None:
    settings = tmp_path / f"specactor.{suffix}"
    settings.write_text(text)
    config = load_settings({"root": str(tmp_path)}, {"EMERGENT_URL": "http://env:2"}, config_file=str(settings)).config
    assert config.graph_enabled and config.graph.workspace_id == "a/b"
    assert (config.emergent.url, config.emergent.api_key) == ("http://env:2", "from-file")


def test_graph_sync_is_on_with_the_flag_or_with_the_graph_toolset(tmp_path: Path) -> None:
    base = {"EMERGENT_API_KEY": "k"}
    assert not load_settings({"root": str(tmp_path)}, base).config.graph_enabled
    assert load_settings({"root": str(tmp_path)}, {**base, "SPECACTOR_GRAPH_SYNC": "true"}).config.graph_enabled
    assert load_settings({"root": str(tmp_path)}, {**base, "SPECACTOR_TOOLSETS": "openspec,graph"}).config.graph_enabled


def test_graph_sync_without_a_key_is_refused_naming_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"root": str(tmp_path)}, {"SPECACTOR_TOOLSETS": "graph"})
    assert info.value.setting == "toolsets" and "EMERGENT_API_KEY" in str(info.value)
    assert info.value.source == "environment variable SPECACTOR_TOOLSETS"


def test_an_emergent_url_that_is_not_http_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"root": str(tmp_path)}, {"SPECACTOR_GRAPH_SYNC": "1", "EMERGENT_API_KEY": "k",
                                                "EMERGENT_URL": "localhost:3002"})
    assert info.value.setting == "emergent.url" and info.value.source == "environment variable EMERGENT_URL"


@pytest.mark.slow
def test_serve_with_graph_sync_and_no_key_exits_2_with_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "specactor", "serve", "--root", str(tmp_path)],
                          env=clean_env(SPECACTOR_GRAPH_SYNC="true"), stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=60, check=False)
    err = done.stderr.decode()
    assert done.returncode == 2 and len(err.splitlines()) == 1, err
    assert "EMERGENT_API_KEY" in err and "graph.enabled" in err and "SPECACTOR_GRAPH_SYNC" in err


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_unreachable_emergent_is_logged_and_the_server_serves_and_keeps_the_backlog(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_change(tmp_path)
    async with open_memory_server(graph_config(tmp_path, f"http://127.0.0.1:{closed_port()}")) as client:
        await client.initialize()
        with trio.fail_after(10):
            ticked = await client.request("tools/call", {"name": "task_complete",
                                                         "arguments": {"changeId": "add-2fa", "task": "1.5"}})
        assert ticked["result"]["structuredContent"]["success"] is True
        graph = client.app.services.graph
        with trio.fail_after(10):
            while graph.health.connected is not False or (await graph.status()).outbox.pending == 0:
                await graph.wait_round()
        status = (await client.request("tools/call", {"name": "graph_status", "arguments": {}}))["result"]
        data = status["structuredContent"]["data"]
        assert data["connected"] is False and data["outbox"]["pending"] > 0 and "127.0.0.1" in data["lastError"]
    logged = capsys.readouterr()
    assert "Emergent is unreachable" in logged.out + logged.err  # stderr once a command set logging up


async def test_an_outbox_that_cannot_be_opened_fails_graph_sync_not_the_server(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    config = graph_config(tmp_path, f"http://127.0.0.1:{closed_port()}", db=str(tmp_path / "a-file" / "graph.db"))
    async with open_memory_server(config) as client:
        await client.initialize()
        with trio.fail_after(10):
            reply = await client.request("tools/call", {"name": "graph_sync", "arguments": {}})
            status = await client.request("tools/call", {"name": "graph_status", "arguments": {}})
            ping = await client.request("ping")
        error = reply["result"]["structuredContent"]["error"]
        assert error["code"] == "INTERNAL" and "a-file" in error["message"], error
        assert "cannot be opened" in status["result"]["structuredContent"]["data"]["lastError"]
        assert ping["result"] == {} and client.app.supervisor.restarts.get("graph-sync", 0) == 0
