"""A small app with MCP on, served for real, and what a test needs around it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import httpx

from rastrillo.agents import grants
from rastrillo.sessions import cookie_name, create_session
from rastrillo.storage import Database
from tests.support import TLS, write_app


def tools_call(name: object, arguments: object, request_id: int = 1) -> dict[str, object]:
    """The JSON-RPC body of an MCP ``tools/call`` request, as a client posts it to /mcp
    (a hostile one's name and arguments of any JSON type included)."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


ACTIONS = {
    "notes/index.GET.py": """
        import rastrillo

        TOOL = rastrillo.Tool(description="List my notes.")


        def handle(ctx):
            rows = ctx.db.query("SELECT id, body FROM notes WHERE owner = :u ORDER BY id",
                                u=ctx.user_id or "")
            return ctx.json({"notes": [dict(r._mapping) for r in rows],
                             "user": ctx.user_id, "actor": str(ctx.actor)})
    """,
    "notes/index.POST.py": """
        import rastrillo
        from rastrillo.sessions import require

        TOOL = rastrillo.Tool(
            description="Add a note.",
            access=rastrillo.ToolWrite,
            args={"body": "the text of the note"},
            confirm="Add the note {body}?",
        )


        @require
        def handle(ctx):
            ctx.db.execute("INSERT INTO notes (owner, body) VALUES (:u, :b)",
                           u=ctx.user_id, b=ctx.form["body"])
            return ctx.json({"added": ctx.form["body"], "by": ctx.actor.describe()}, status=201)
    """,
    "notes/[id].GET.py": """
        import rastrillo

        TOOL = rastrillo.Tool(description="One note.", args={"id": "the note id"})


        def handle(ctx):
            row = ctx.db.query_one("SELECT body FROM notes WHERE id = :i AND owner = :u",
                                   i=ctx.params["id"], u=ctx.user_id or "")
            if row is None:
                return ctx.text("no such note", status=404)
            return ctx.text(row.body)
    """,
    # Routes that are not tools: no MCP call may ever reach them.
    "admin/wipe.POST.py": """
        def handle(ctx):
            ctx.db.execute("DELETE FROM notes")
            return ctx.text("wiped")
    """,
    "secret.GET.py": """
        def handle(ctx):
            return ctx.text("TOPSECRET")
    """,
}
FILES = {
    "migrations/0001_notes.sql": (
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, body TEXT NOT NULL);\n"
    ),
}


def make_app(root: Path, extra: str = "mcp=True,") -> Path:
    return write_app(root, ACTIONS, extra=extra, files=FILES)


@dataclass
class Person:
    """A user of the served app: their own browser session, and their agents' tokens."""

    base_url: str
    db: Database
    user_id: str

    def token(self, agent: str = "claude") -> str:
        _, token, _ = grants.personal_token(self.db, user_id=self.user_id, agent=agent)
        return token

    def browser(self) -> httpx.Client:
        client = httpx.Client(verify=TLS, base_url=self.base_url, headers={"Origin": self.base_url})
        client.cookies.set(cookie_name(self.base_url), create_session(self.db, self.user_id))
        return client

    def decide(self, url: str, decision: str = "approve") -> None:
        """Approve (or decline) on the approval page, from this person's browser session."""
        with self.browser() as browser:
            page = browser.get(url)
            assert page.status_code == 200, page.text
            assert re.search(r"<form", page.text)
            done = browser.post(url, data={"decision": decision})
            assert done.status_code == 303, done.text
