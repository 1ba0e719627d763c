"""Property: whatever sequence of frames a client writes to a live stdio server (`python -m
specactor serve`), the server stays up, answers every request with an id exactly once within
the deadline (notifications never), writes nothing to stdout but complete JSON-RPC messages,
logs no error, and afterwards still answers a ping (server/discover on 2026-07-28) and a
real tools/call.

One server per protocol era serves every example of its test (spawning costs ~150 ms); it is
restarted only after a failed example, so a shrinking step starts clean. `SPECACTOR_FUZZ=1`
raises the example count (tests/conftest.py); `just fuzz` runs this with the stored database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.frames import scripts
from tests.fuzz.live import LiveServer

pytestmark = pytest.mark.slow
ERAS = ["2025-11-25", "2025-03-26", "2026-07-28"]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], LiveServer]]:
    servers: dict[str, LiveServer] = {}

    def get(era: str) -> LiveServer:
        if era not in servers:
            servers[era] = LiveServer(tmp_path_factory.mktemp("live-" + era), era)
        servers[era].ensure()
        return servers[era]

    yield get
    for server in servers.values():
        server.stop()


@pytest.mark.timeout(max(300, settings.default.max_examples))  # ~30 ms an example, plus shrinking a hang
@pytest.mark.parametrize("era", ERAS)
@given(data=st.data())
def test_any_frames_are_answered_once_with_clean_json_rpc_and_leave_the_server_serving(
        era: str, live: Callable[[str], LiveServer], data: st.DataObject) -> None:
    server = live(era)
    script = data.draw(scripts(server.catalog, era), label="script")
    server.exchange(script.chunks())


def test_the_server_survives_the_whole_run(live: Callable[[str], LiveServer]) -> None:
    """A death on the last example would otherwise go unseen: ask each server once more."""
    for era in ERAS:
        server = live(era)
        server.exchange([b"\n"])
        assert server.proc is not None and server.proc.poll() is None
