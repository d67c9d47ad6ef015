"""The official TypeScript MCP client (`@modelcontextprotocol/sdk`, run by Debian's nodejs).

`make test` installs it (`npm ci` in tests/agents/ts). The client lists the tools,
reads, proposes a write, and after the user approved in their own browser
session calls again with the same arguments: the write runs once.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from rastrillo.agents import grants
from rastrillo.storage import Database
from tests.agents.mcp_app import Person, make_app
from tests.support import missing

TS = Path(__file__).parent / "ts"


@pytest.fixture
def node_client() -> list[str]:
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None or not (TS / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        missing("the TypeScript MCP SDK: run `make test` (npm ci in tests/agents/ts)")
    return [node, str(TS / "client.mjs")]


class Node:
    """client.mjs as a child process: one JSON step in, one JSON line out."""

    def __init__(self, command: list[str], url: str, token: str) -> None:
        self.process = subprocess.Popen(
            [*command, url, token],
            cwd=TS,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.connected = self.read()

    def read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise AssertionError(f"the node client ended: {self.process.stderr.read()}")
        return json.loads(line)

    def send(self, step: dict) -> dict:
        self.process.stdin.write(json.dumps(step) + "\n")
        self.process.stdin.flush()
        return self.read()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


def test_list_read_write_approve_with_the_typescript_client(tmp_path, serve, node_client):
    app_dir = make_app(tmp_path / "app")
    server = serve(app_dir)
    db = Database(str(app_dir / "app.db"))
    alice = Person(server.base_url, db, "3")
    client = Node(node_client, server.base_url + "/mcp", alice.token("ts-agent"))
    try:
        assert client.connected["step"] == "connected", client.connected
        listed = client.send({"list": True})["result"]["tools"]
        tools = {t["name"]: t for t in listed}
        assert sorted(tools) == ["notes_get", "notes_id_get", "notes_post"]
        assert tools["notes_post"]["annotations"]["readOnlyHint"] is False
        read = client.send({"call": "notes_get", "args": {}})["result"]
        [grant] = grants.list_grants(db, "3")
        assert read["structuredContent"]["actor"] == f"agent:ts-agent (grant {grant.id})"
        write = client.send({"call": "notes_post", "args": {"body": "from node"}})["result"]
        assert write["isError"] is True
        url = write["_meta"]["rastrillo/approval"]["url"]
        assert url in write["content"][0]["text"]
        alice.decide(url)
        ran = client.send({"call": "notes_post", "args": {"body": "from node"}})["result"]
        assert not ran.get("isError") and ran["structuredContent"]["added"] == "from node"
        again = client.send({"call": "notes_post", "args": {"body": "from node"}})["result"]
        assert again["isError"] is True  # used once: a new proposal
        grants.revoke(db, grant.id)
        refused = client.send({"call": "notes_get", "args": {}})
        assert refused["step"] == "error" and "invalid_token" in refused["message"]
    finally:
        client.close()
    assert [r.body for r in db.query("SELECT body FROM notes")] == ["from node"]
    db.dispose()
