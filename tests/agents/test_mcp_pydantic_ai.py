"""pydantic-ai's MCP client against /mcp, the model played by a `FunctionModel` (no network).

The model reads, then proposes a write: the write comes back waiting for the
user's approval with its URL; the user approves in their browser session; the
model makes the same call again and it runs, once.
"""

from __future__ import annotations

import re

import anyio

from rastrillo.storage import Database
from tests.agents.mcp_app import Person, make_app

WRITE = {"body": "from pydantic-ai"}


def test_a_model_reads_then_writes_after_the_users_approval(tmp_path, serve):
    # pydantic-ai and FastMCP are imported here: they take seconds to import, and every
    # pytest worker imports this module to collect it.
    from fastmcp import Client as FastMCPClient
    from fastmcp.client.transports import StreamableHttpTransport
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    app_dir = make_app(tmp_path / "app")
    server = serve(app_dir)
    db = Database(str(app_dir / "app.db"))
    alice = Person(server.base_url, db, "3")
    transport = StreamableHttpTransport(
        server.base_url + "/mcp", headers={"Authorization": f"Bearer {alice.token('pyai')}"}
    )
    toolset = MCPToolset(FastMCPClient(transport))
    seen: list[str] = []
    approved: list[str] = []

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert {t.name for t in info.function_tools} == {"notes_get", "notes_post", "notes_id_get"}
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        part = last.parts[-1]
        if isinstance(part, (ToolReturnPart, RetryPromptPart)):
            said = part.model_response() if isinstance(part, RetryPromptPart) else str(part.content)
            seen.append(f"{part.tool_name}: {said}")
            if part.tool_name == "notes_get":
                return ModelResponse(parts=[ToolCallPart("notes_post", dict(WRITE))])
            urls = re.findall(r"http://\S+/_rastrillo/approvals/[A-Za-z0-9_-]+", said)
            if urls:  # the write waits: the user approves in their browser, the model retries
                await anyio.to_thread.run_sync(alice.decide, urls[0])
                approved.append(urls[0])
                return ModelResponse(parts=[ToolCallPart("notes_post", dict(WRITE))])
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("notes_get", {})])

    agent = Agent(FunctionModel(model), toolsets=[toolset])

    async def run() -> str:
        async with agent:
            result = await agent.run("Add a note for me")
        return result.output

    assert anyio.run(run) == "done"
    assert len(seen) == 3 and len(approved) == 1
    assert seen[0].startswith("notes_get: ") and "agent:pyai" in seen[0]
    assert seen[1].startswith("notes_post: Not run yet") and approved[0] in seen[1]
    assert "Add the note from pydantic-ai?" in seen[1] and "same arguments" in seen[1]
    assert seen[2].startswith("notes_post: ") and "'added': 'from pydantic-ai'" in seen[2]
    assert [r.body for r in db.query("SELECT body FROM notes")] == ["from pydantic-ai"]
    db.dispose()
