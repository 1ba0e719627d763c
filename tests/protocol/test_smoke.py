from specactor.testing import MemoryClient


async def test_initialize_then_echo_answers_with_the_envelope(memory_client: MemoryClient) -> None:
    init = await memory_client.initialize()
    assert init["result"]["serverInfo"]["name"] == "specactor"
    reply = await memory_client.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    assert reply["result"]["structuredContent"] == {"success": True, "data": {"text": "hi"}}
