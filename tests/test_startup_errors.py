"""Configuration errors stop `specactor serve` at once: one line on stderr naming the setting and
where it came from, exit status 2, nothing restarted, nothing created. A person at a terminal
is told what the silence means; `serve --help` explains itself."""

from __future__ import annotations

import argparse
import os
import pty
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from specactor import cli
from specactor.config import ConfigError, load_settings

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECACTOR_")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


async def serve(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(60):
        return await trio.run_process([sys.executable, "-m", "specactor", "serve", *args], cwd=cwd,
                                      env=clean_env(**env), stdin=subprocess.DEVNULL, capture_stdout=True,
                                      capture_stderr=True, check=False)


def one_line(done: subprocess.CompletedProcess[bytes], setting: str, source: str) -> str:
    """The single stderr line of a configuration error, checked."""
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert done.stdout == b""
    assert "Traceback" not in err and "SupervisorGaveUp" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"specactor: invalid setting '{setting}': "), err
    assert lines[0].endswith(f"(from {source})"), err
    return lines[0]


async def test_a_root_that_is_a_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a folder")
    done = await serve(tmp_path, "--root", "notes.txt")
    assert "is not a folder" in one_line(done, "root", "flag --root")


async def test_a_missing_root_is_one_line_and_exit_2_and_is_not_created(tmp_path: Path) -> None:
    done = await serve(tmp_path, SPECACTOR_ROOT=str(tmp_path / "nowhere"))
    assert "does not exist" in one_line(done, "root", "environment variable SPECACTOR_ROOT")
    assert os.listdir(tmp_path) == []


async def test_an_unexpanded_workspace_folder_variable_is_named_and_no_folder_of_that_name_appears(
        tmp_path: Path) -> None:
    # Cursor's snippet pasted into Claude Code's .mcp.json: the client passes the text as it is.
    done = await serve(tmp_path, "--root", "${workspaceFolder}")
    assert "'${workspaceFolder}'" in one_line(done, "root", "flag --root")
    assert os.listdir(tmp_path) == []


async def test_an_unexpanded_variable_in_a_settings_file_path_names_the_file(tmp_path: Path) -> None:
    settings = tmp_path / "specactor.toml"
    settings.write_text('[knowledge]\nrepo = "${HOME}/knowledge"\n')
    done = await serve(tmp_path, "--root", str(tmp_path), "--config", str(settings))
    one_line(done, "knowledge.repo", f"config file {settings}")


async def test_an_http_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = await serve(tmp_path, "--root", str(tmp_path), "--http", "--port", str(port), "--no-session-log")
    assert f"127.0.0.1:{port} is already in use" in one_line(done, "http.port", "flag --port")


async def test_a_session_log_folder_that_cannot_be_created_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where a folder should be")
    done = await serve(tmp_path, "--root", str(tmp_path),
                       SPECACTOR_SESSION_LOG_DIR=str(tmp_path / "blocker" / "logs"))
    line = one_line(done, "session_log.dir", "environment variable SPECACTOR_SESSION_LOG_DIR")
    assert "--no-session-log" in line


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes to any folder")
async def test_a_session_log_folder_without_write_permission_is_one_line_and_exit_2(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir(mode=0o500)
    try:
        done = await serve(tmp_path, "--root", str(tmp_path), "--session-log-dir", str(logs))
    finally:
        logs.chmod(0o700)
    assert "Permission denied" in one_line(done, "session_log.dir", "flag --session-log-dir")


async def test_an_empty_toolsets_variable_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = await serve(tmp_path, "--root", str(tmp_path), SPECACTOR_TOOLSETS="")
    assert "no toolset is enabled" in one_line(done, "toolsets", "environment variable SPECACTOR_TOOLSETS")


async def test_serve_at_a_terminal_says_it_waits_for_a_client_on_stderr_only(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    try:
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "specactor", "serve", "--root", str(tmp_path), "--no-session-log"],
            stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=clean_env())
        assert proc.stderr is not None and proc.stdout is not None
        err = b""
        with trio.fail_after(30):
            while b"\n" not in err:
                chunk = await proc.stderr.receive_some(4096)
                assert chunk, err
                err += chunk
            first = err.split(b"\n")[0].decode()
            assert first.startswith("specactor: waiting for an MCP client on stdin/stdout"), first
            assert "Ctrl-D" in first and "specactor demo" in first
            os.write(controller, b"\x04")  # Ctrl-D, as the line says: end of input
            assert await proc.wait() == 0
            assert await proc.stdout.receive_some(4096) == b""  # nothing but frames there, and no frame came
    finally:
        os.close(controller)
        os.close(terminal)


async def test_serve_without_a_terminal_prints_no_waiting_line(tmp_path: Path) -> None:
    with trio.fail_after(60):
        done = await trio.run_process([sys.executable, "-m", "specactor", "serve", "--root", str(tmp_path),
                                       "--no-session-log"], cwd=tmp_path, env=clean_env(SPECACTOR_LOG_LEVEL="error"),
                                      stdin=subprocess.DEVNULL, capture_stdout=True, capture_stderr=True)
    assert done.returncode == 0 and done.stdout == b"" and done.stderr == b""


def test_serve_help_describes_the_command_and_every_flag() -> None:
    parser = cli._parser()
    serve = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    for name, sub in serve.choices.items():
        assert sub.description, name
        for action in sub._actions:
            assert action.help, (name, action.dest)
    assert "Streamable HTTP" in serve.choices["serve"].format_help()


def test_every_path_setting_with_an_unexpanded_variable_is_refused_naming_it(tmp_path: Path) -> None:
    for variable, key in [("SPECACTOR_ROOT", "root"), ("SPECACTOR_SESSION_LOG_DIR", "session_log.dir"),
                          ("SPECACTOR_MEMORY_DB", "memory.db"), ("SPECACTOR_KNOWLEDGE_REPO", "knowledge.repo")]:
        environ = {"SPECACTOR_ROOT": str(tmp_path), variable: "${workspaceFolder}/x"}
        with pytest.raises(ConfigError) as info:
            load_settings({}, environ)
        assert info.value.setting == key
        assert info.value.source == f"environment variable {variable}"


def test_the_source_of_a_setting_is_the_flag_the_variable_the_file_or_the_default(tmp_path: Path) -> None:
    settings = tmp_path / "s.toml"
    settings.write_text("[http]\nhost = \"localhost\"\n")
    loaded = load_settings({"root": str(tmp_path)}, {"SPECACTOR_HTTP_PORT": "9000"}, config_file=str(settings))
    assert loaded.config.http.port == 9000
    assert [loaded.sources.of(key) for key in ("root", "http.port", "http.host", "session_log.dir")] == [
        "flag --root", "environment variable SPECACTOR_HTTP_PORT", f"config file {settings}", "the default"]
