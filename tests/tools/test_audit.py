"""The audit log: one row per dispatch, refused or run; `rastrillo audit` and `tools call`."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import json
import logging
import re
import shutil
import sqlite3
import threading
import tracemalloc
import weakref
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

import rastrillo
from rastrillo import storage, threads
from rastrillo.cli.main import main
from rastrillo.context import TOOL_CALL_SCOPE_KEY
from rastrillo.errors import written
from rastrillo.loader import load_options
from rastrillo.registry.declare import ToolDef, tool_id
from rastrillo.routing import Route
from rastrillo.storage import hooks
from rastrillo.testing import ManualClock, TestApp
from rastrillo.tools import (
    ApprovalInvalid,
    Call,
    ConfirmRequired,
    ToolError,
    audit,
    audit_writer,
    consent,
)
from rastrillo.tools import dispatch_sync as run
from tests.support import LogSeen, until
from tests.test_visible import read_back
from tests.tools._tools_app import Fixture, build

AGENT = rastrillo.Actor.agent("concierge")
TICKETS = Path(__file__).resolve().parents[2] / "examples" / "tickets"


@pytest.fixture
def f(tmp_path) -> Fixture:
    return build(tmp_path)


def test_every_dispatch_refused_or_run_appends_one_row(f):
    session = f.session("3")
    attempts = [
        Call(tool="nope", args={}, actor=AGENT),
        Call(tool="orders_id_get", args={"id": "1", "x": "2"}, actor=AGENT),
        Call(tool="orders_id_get", args={}, actor=AGENT),
        Call(tool="orders_id_get", args={"id": ".."}, actor=AGENT),
        Call(tool="orders_id_get", args={"id": "1"}, actor=rastrillo.Actor()),
        Call(
            tool="orders_id_cancel_post",
            args={"id": "1", "reason": "r"},
            actor=AGENT,
            session=session,
        ),
        Call(
            tool="orders_id_cancel_post",
            args={"id": "1", "reason": "r"},
            actor=AGENT,
            session=session,
            approval="forged",
        ),
        Call(tool="orders_id_get", args={"id": "1"}, actor=AGENT, session=session),
        Call(tool="boom_get", args={}, actor=AGENT),
    ]
    for attempt in attempts:
        with contextlib.suppress(ToolError):
            run(f.app, f.defs, attempt)
    rows = list(reversed(audit.latest(f.app.db, limit=100)))
    assert len(rows) == len(attempts)
    assert [r.refusal_kind or r.status for r in rows] == [
        "UnknownTool",
        "UnknownArg",
        "MissingArg",
        "BadArg",
        "BadActor",
        "ConfirmRequired",
        "ApprovalInvalid",
        200,
        500,
    ]
    assert rows[0].tool == "nope" and rows[4].actor == "human"
    assert [r.agent for r in rows] == ["concierge"] * 4 + [None] + ["concierge"] * 4
    assert rows[5].approval_id is not None  # the pending approval it created
    assert rows[5].approval_path == f"/_rastrillo/approvals/{rows[5].approval_id}"
    assert [r.approval_path for r in rows[:5] + rows[6:]] == [None] * 8
    assert rows[6].approval_id == "forged"
    assert rows[5].refusal == (
        "ConfirmRequired: waiting for the user to approve "
        "'Cancel order 1? Its tickets go back on sale.'"
    )
    assert "(unknown)" in rows[6].refusal
    assert rows[7].user_id == "3" and rows[7].args == {"id": "1"}
    assert len({r.call_id for r in rows}) == len(rows)
    assert rows[7].outcome == "200" and rows[0].outcome.startswith("refused: UnknownTool")


def test_a_flood_of_unknown_args_is_recorded_with_the_refusal_the_model_got(f):
    flood = {f"x{i:05}": "1" for i in range(50_000)}
    with pytest.raises(ToolError) as info:
        run(f.app, f.defs, Call(tool="orders_id_get", args={"id": "1"} | flood, actor=AGENT))
    [row] = audit.latest(f.app.db, limit=1)
    assert row.refusal == f"UnknownArg: {info.value}"
    assert row.refusal.endswith("'x00004' and 49995 more; its args are: id")
    assert len(row.refusal) < 200


def test_an_approved_write_records_who_approved_and_when(f):
    session = f.session("3")
    call = Call(
        tool="orders_id_cancel_post",
        args={"id": "7", "reason": "dup"},
        actor=AGENT,
        session=session,
        call_id="toolu_42",
    )
    with pytest.raises(ConfirmRequired) as info:
        run(f.app, f.defs, call)
    decided = consent.decide(f.app.db, "3", info.value.approval_id, True)
    approved = Call(**{**call.__dict__, "approval": info.value.approval_id})
    run(f.app, f.defs, approved)
    with pytest.raises(ApprovalInvalid):
        run(f.app, f.defs, approved)
    used_twice, ran, asked = audit.latest(f.app.db, limit=3)
    assert (ran.status, ran.approved_by, ran.approved_at) == (303, "3", decided.decided_at)
    assert ran.call_id == "toolu_42" and ran.args == {"id": "7", "reason": "dup"}
    assert used_twice.refusal.startswith("ApprovalInvalid: approval invalid (used)")
    assert asked.approval_id == ran.approval_id == info.value.approval_id
    assert asked.approval_path == ran.approval_path == decided.url
    assert (asked.refusal_kind, ran.refusal_kind, used_twice.refusal_kind) == (
        "ConfirmRequired",
        None,
        "ApprovalInvalid",
    )
    line = str(ran)
    assert 'orders_id_cancel_post(id="7" reason="dup")' in line
    assert "agent:concierge for user 3, approved by user 3 at " in line
    assert "→ 303" in line


def test_an_approved_write_is_on_disk_before_dispatch_returns(f):
    session = f.session("3")
    call = Call(
        tool="orders_id_cancel_post",
        args={"id": "8", "reason": "r"},
        actor=AGENT,
        session=session,
        call_id="durable-1",
    )
    with pytest.raises(ConfirmRequired) as info:
        run(f.app, f.defs, call)
    consent.decide(f.app.db, "3", info.value.approval_id, True)
    run(f.app, f.defs, Call(**{**call.__dict__, "approval": info.value.approval_id}))
    # Read through a second connection, without audit.flush(): nothing queued counts.
    with sqlite3.connect(f.app.db.engine.url.database) as other:
        rows = other.execute(
            "SELECT status, approved_by FROM rastrillo_audit WHERE call_id = 'durable-1'"
            " AND status IS NOT NULL"
        ).fetchall()
    assert rows == [(303, "3")]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_approved_writes_row_is_on_disk_before_its_handle_runs(tmp_path, kind):
    """The row, with who approved it, is written in the transaction that uses the
    approval: a process that ends inside ``handle`` (killed, out of memory) leaves the
    write recorded, its outcome not. A sync handle's approval is used in its own thread,
    an async one's in a hop of dispatch's before the request is sent."""
    seen_in_handle: list[tuple] = []

    def look() -> None:
        with contextlib.closing(sqlite3.connect(tmp_path / "app.db")) as other:
            seen_in_handle.extend(
                other.execute(
                    "SELECT tool, user_id, approved_by, status FROM rastrillo_audit"
                    " WHERE call_id = 'early-1' ORDER BY id"
                )
            )

    @rastrillo.sessions.require
    def sync_cancel(ctx: rastrillo.Context):
        look()
        return ctx.text(f"cancelled {ctx.params['id']}")

    @rastrillo.sessions.require
    async def async_cancel(ctx: rastrillo.Context):
        look()
        return ctx.text(f"cancelled {ctx.params['id']}")

    cancel = sync_cancel if kind == "sync" else async_cancel
    app = _write_app(tmp_path, "/orders/{id}/cancel", cancel, "id")
    session = rastrillo.sessions.create_session(app.db, "3")
    call = Call(
        tool="orders_id_cancel_post",
        args={"id": "7"},
        actor=AGENT,
        session=session,
        call_id="early-1",
    )
    approved = _approved(app, call)
    audit.flush(app.db)  # the proposal's row, queued, is on disk before the handle looks
    assert run(app, approved).text == "cancelled 7"
    assert seen_in_handle == [
        ("orders_id_cancel_post", "3", None, None),  # the proposal, refused for confirmation
        ("orders_id_cancel_post", "3", "3", None),
    ]
    [row, _] = audit.latest(app.db, limit=2)
    assert (row.call_id, row.status, row.approved_by) == ("early-1", 200, "3")
    app.db.dispose()


def test_a_redemption_that_fails_to_commit_costs_no_other_calls_row(tmp_path, monkeypatch):
    """The row an approved write inserts is rolled back with its approval's use when the
    transaction fails: the failed call's own row is appended anew, and its outcome is never
    written to the rolled-back row's id, which SQLite gives the next row (here the same
    write, run again under its still-unused approval, answering 200)."""
    ran: list[str] = []

    def cancel(ctx: rastrillo.Context):
        ran.append(ctx.params["id"])
        return ctx.text("cancelled")

    app = _write_app(tmp_path, "/orders/{id}/cancel", cancel, "id")
    session = rastrillo.sessions.create_session(app.db, "3")
    call = Call(tool="orders_id_cancel_post", args={"id": "7"}, actor=AGENT, session=session)
    approved = _approved(app, call)
    real_begin = audit.begin

    def begin_then_fail(tx, entry, now):
        real_begin(tx, entry, now)
        raise sqlite3.OperationalError("disk I/O error")  # so the commit never happens

    monkeypatch.setattr(audit, "begin", begin_then_fail)
    with pytest.raises(OperationalError, match="disk I/O error"):  # the driver's, as SQLAlchemy's
        run(app, dataclasses.replace(approved, call_id="failed"))
    monkeypatch.undo()
    assert ran == []
    audit.flush(app.db)  # the failed call's row, a row of its own
    assert run(app, dataclasses.replace(approved, call_id="ran")).text == "cancelled"
    audit.flush(app.db)
    rows = {row.call_id: row for row in audit.latest(app.db, limit=10)}
    assert (rows["ran"].status, rows["ran"].approved_by) == (200, "3")
    assert (rows["failed"].status, rows["failed"].approved_by) == (None, None)
    assert ran == ["7"]
    app.db.dispose()


def test_an_approved_write_with_no_outcome_reads_so():
    """A row whose process ended inside ``handle``: ``rastrillo audit`` says it ran with no
    outcome recorded, never that it was refused or what it answered."""
    record = audit.AuditRecord(
        at=datetime.now(UTC),
        call_id="c-1",
        tool="orders_id_cancel_post",
        actor="agent:concierge",
        user_id="3",
        args={"id": "7"},
        approved_by="3",
        approved_at=datetime.now(UTC),
    )
    assert record.outcome == "no outcome recorded"
    assert str(record).split("  → ")[1].startswith("no outcome recorded  [")


def _approved_cancel(f: Fixture, session: str, call_id: str) -> Call:
    call = Call(
        tool="orders_id_cancel_post",
        args={"id": "8", "reason": "r"},
        actor=AGENT,
        session=session,
        call_id=call_id,
    )
    with pytest.raises(ConfirmRequired) as info:
        run(f.app, f.defs, call)
    consent.decide(f.app.db, "3", info.value.approval_id, True)
    return dataclasses.replace(call, approval=info.value.approval_id)


def _on_disk(f: Fixture, call_id: str) -> list[tuple]:
    """The row as another connection sees it, without audit.flush()."""
    with sqlite3.connect(f.app.db.engine.url.database) as other:
        return other.execute(
            "SELECT status, approved_by FROM rastrillo_audit WHERE call_id = ? AND status > 0",
            (call_id,),
        ).fetchall()


def test_an_approved_write_makes_one_thread_hop_its_row_written_in_the_handles(f, monkeypatch):
    """The session, the approval's use, handle and the audit row share one hop."""
    approved = _approved_cancel(f, f.session("3"), "hops-1")
    hops = _count_hops(monkeypatch)
    assert run(f.app, f.defs, approved).status == 303
    assert hops == ["_checked_handle"]
    assert _on_disk(f, "hops-1") == [(303, "3")]


def test_behind_app_middleware_an_approved_write_is_checked_before_it(tmp_path, monkeypatch):
    """With ``Options.wrap`` the app's own code sees the request before the router: the
    session and the approval are checked in a hop of their own before it is sent."""
    seen: list[str] = []

    def wrap(inner):
        async def watching(scope, receive, send):
            seen.append(str(scope[TOOL_CALL_SCOPE_KEY].actor.approval is not None))
            await inner(scope, receive, send)

        return watching

    f = build(tmp_path, wrap=wrap)
    approved = _approved_cancel(f, f.session("3"), "hops-2")
    hops = _count_hops(monkeypatch)
    assert run(f.app, f.defs, approved).status == 303
    assert hops == ["checked", "_checked_handle", "record"]  # the row after the wrap
    assert seen == ["True"]
    assert _on_disk(f, "hops-2") == [(303, "3")]


def test_an_approved_write_to_an_async_handle_is_checked_before_it(tmp_path, monkeypatch):
    """An async ``handle`` runs on the event loop: the session and the approval are checked
    in a hop of their own before the request is sent, and the write runs once."""
    ran: list[tuple[str | None, str | None]] = []

    @rastrillo.sessions.require
    async def refund(ctx: rastrillo.Context):
        ran.append((ctx.user_id, ctx.actor.approval.approved_by if ctx.actor.approval else None))
        return ctx.text("refunded", status=201)

    app = _write_app(tmp_path, "/refunds", refund, "order")
    session = rastrillo.sessions.create_session(app.db, "3")
    call = Call(tool="refunds_post", args={"order": "8"}, actor=AGENT, session=session)
    approved = _approved(app, call)
    hops = _count_hops(monkeypatch)
    assert run(app, approved).status == 201
    assert hops == ["checked", "record"]
    assert ran == [("3", "3")]
    with pytest.raises(ApprovalInvalid):
        run(app, approved)
    assert ran == [("3", "3")]


def _write_app(tmp_path: Path, path: str, handle: Callable[..., Any], arg: str) -> rastrillo.App:
    """An app on ``tmp_path``'s app.db whose one route, ``POST path``, is a write tool
    taking the one arg ``arg``."""
    defn = ToolDef(
        id=tool_id("POST", path),
        method="POST",
        path=path,
        description=f"POST {path}",
        access=rastrillo.ToolWrite,
        args={arg: "string"},
        confirm=f"Write {{{arg}}}?",
    )
    options = rastrillo.Options(
        app_dir=tmp_path,
        db=str(tmp_path / "app.db"),
        routes=[Route("POST", path, "write", handle)],
        tools=[defn],
    )
    return rastrillo.handler(options)


def _approved(app: rastrillo.App, call: Call, user_id: str = "3") -> Call:
    """``call`` proposed, approved by ``user_id``, and given its approval."""
    with pytest.raises(ConfirmRequired) as info:
        run(app, call)
    consent.decide(app.db, user_id, info.value.approval_id, True)
    return dataclasses.replace(call, approval=info.value.approval_id)


def _count_hops(monkeypatch) -> list[str]:
    import anyio.to_thread

    hops: list[str] = []

    def counting(real):
        async def counted(func, *args, **kwargs):
            named = func.func if isinstance(func, functools.partial) else func
            hops.append(named.__name__)
            return await real(func, *args, **kwargs)

        return counted

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting(anyio.to_thread.run_sync))
    monkeypatch.setattr(threads, "in_thread", counting(threads.in_thread))
    return hops


def test_an_approved_write_behind_app_middleware_records_the_status_it_answered(tmp_path):
    """With ``Options.wrap`` the response may differ from what handle returned: the row
    then records what dispatch returns, still on disk before it returns."""

    def wrap(inner):
        async def teapot(scope, receive, send):
            async def send_418(message):
                if message["type"] == "http.response.start":
                    message = {**message, "status": 418}
                await send(message)

            await inner(scope, receive, send_418)

        return teapot

    f = build(tmp_path, wrap=wrap)
    assert run(f.app, f.defs, _approved_cancel(f, f.session("3"), "wrapped-1")).status == 418
    assert _on_disk(f, "wrapped-1") == [(418, "3")]


def test_latest_filters_by_user_and_limits(f):
    for user in ("3", "4", "3"):
        run(f.app, f.defs, Call(tool="me_get", args={}, actor=AGENT, session=f.session(user)))
    assert [r.user_id for r in audit.latest(f.app.db, user_id="3")] == ["3", "3"]
    assert len(audit.latest(f.app.db, limit=1)) == 1


def test_odd_values_are_kept_as_text(f):
    odd = {"id": "\ud800", 7: b"x"}
    with pytest.raises(ToolError):
        run(f.app, f.defs, Call(tool="orders_id_get", args=odd, actor=AGENT))  # type: ignore[arg-type]
    [row] = audit.latest(f.app.db)
    assert row.args == {"id": "\\ud800", "7": "b'x'"}


@pytest.fixture
def tickets(tmp_path) -> Path:
    app_dir = tmp_path / "tickets"
    shutil.copytree(TICKETS, app_dir, ignore=shutil.ignore_patterns("*.db*", "__pycache__"))
    return app_dir


def test_tools_call_and_audit_from_the_command_line(tickets, capsys):
    app = ["--app", str(tickets)]
    assert main(["tools", "call", "orders_id_get", "id=1", "--as", "cli", "--user", "1", *app]) == 0
    out = capsys.readouterr().out
    assert out.startswith("200\n") and '"status":"paid"' in out.replace(" ", "")

    assert (
        main(["tools", "call", "orders_id_cancel_post", "id=1", "--as", "cli", "--user", "1", *app])
        == 3
    )
    out = capsys.readouterr().out
    assert "Cancel order 1? Its tickets go back on sale." in out
    approval_id = re.search(r"/_rastrillo/approvals/([\w-]+)", out)[1]
    assert f"--approval {approval_id}" in out

    db = rastrillo.handler(rastrillo.Options(app_dir=tickets, db=str(tickets / "tickets.db"))).db
    consent.decide(db, "1", approval_id, True)
    argv = [
        "tools",
        "call",
        "orders_id_cancel_post",
        "id=1",
        "--as",
        "cli",
        "--user",
        "1",
        "--approval",
        approval_id,
        *app,
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("200")
    assert main(argv) == 1
    assert "approval invalid (used)" in capsys.readouterr().err

    assert main(["audit", "--limit", "3", *app]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert 'refused: "ApprovalInvalid: ' in lines[0]
    assert "agent:cli for user 1, approved by user 1 at" in lines[1] and "→ 200" in lines[1]


def test_tools_call_types_each_value_by_its_declaration(tickets, capsys):
    app = ["--app", str(tickets)]
    buy = ["tools", "call", "events_id_buy_post", "id=2", "--as", "cli", "--user", "1", *app]
    assert main([*buy[:4], "quantity=2", *buy[4:]]) == 3
    assert "Buy 2 ticket(s) for event 2?" in capsys.readouterr().out
    for text in ("2.0", " 2", "2_0", "11"):
        assert main([*buy[:4], f"quantity={text}", *buy[4:]]) == 1
        assert "arg 'quantity': must be an integer from 1 to 10" in capsys.readouterr().err
    orders = ["tools", "call", "orders_get", "--as", "cli", "--user", "1", *app]
    assert main([*orders[:3], "status=held", *orders[3:]]) == 0
    assert capsys.readouterr().out == '200\n{"orders": []}\n'
    assert main([*orders[:3], "status=", *orders[3:]]) == 0  # empty: left out, every order
    assert '"status": "paid"' in capsys.readouterr().out


def test_audit_prints_model_chosen_text_escaped_one_line_per_row(tickets, capsys):
    app = rastrillo.handler(load_options(tickets))
    forged = 'x\n2026-01-01 00:00:00  orders_id_cancel_post(id="1")  agent:cli  → 200'
    hostile = [
        Call(tool=forged, args={}, actor=AGENT),
        Call(tool="orders_id_get", args={"id": "1\x1b]0;pwned\x07\u2028"}, actor=AGENT),
        Call(tool="\x1b[2J\u202e", args={"\x9b": "\x85"}, actor=AGENT, call_id="\x1b[1m"),
    ]
    for call in hostile:
        with contextlib.suppress(ToolError):
            run(app, app.options.tools, call)
    audit.flush(app.db)
    assert main(["audit", "--app", str(tickets)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == len(hostile)
    assert not {"\x1b", "\x07", "\x9b", "\x85", "\u2028", "\u202e"} & set(out)
    assert "x\\n2026-01-01 00:00:00" in out
    assert '(id="1\\x1b]0;pwned\\x07\\u2028")' in out
    assert '"\\x1b[2J\\u202e"("\\x9b"="\\x85")' in out


QUOTED = r'"(?:[^"\\]|\\.)*"'
ARG = rf"(?:[A-Za-z_][A-Za-z0-9_]*|{QUOTED})=(?:{QUOTED}|[^ ()]+)"


def test_an_arg_name_cannot_end_its_field_and_forge_the_next(tickets, capsys):
    """A model names the args of a call to a tool that is not there as it likes, and the
    row keeps them as sent: a name holding ``")  …  → 200`` and a made-up row after it
    would read as the fields that follow. A name that is not an identifier is quoted, as a
    text value is, so the args end where their parenthesis does."""
    app = rastrillo.handler(load_options(tickets))
    forged = 'id="1")  agent:concierge for user 3  \u2192 200  [1.0 ms, call x]\nz'
    with contextlib.suppress(ToolError):
        run(app, app.options.tools, Call(tool="orders_id_gone", args={forged: "1"}, actor=AGENT))
    audit.flush(app.db)
    assert main(["audit", "--app", str(tickets)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    fields = re.fullmatch(
        rf"\S+ \S+  orders_id_gone\(({ARG})\)  agent:concierge  \u2192 refused: .*", line
    )
    assert fields is not None, line
    key = fields[1].rpartition("=")[0]
    assert key.startswith('"')


def test_a_tool_name_or_a_user_id_cannot_forge_the_fields_of_a_row(f):
    """The tool a model names is kept as sent when there is no such tool, and the user id is
    the app's to choose: neither, made of a run row's first fields, reads as them. One that
    is not a plain word is quoted (``str(row)`` is the line ``rastrillo audit`` prints)."""
    tool = 'orders_id_cancel_post(id="7")  agent:concierge for user 3  \u2192 200'
    user = "3  \u2192 200  [1.0 ms, call x]"
    for name in (tool, "me_get"):
        with contextlib.suppress(ToolError):
            run(f.app, f.defs, Call(tool=name, args={}, actor=AGENT, session=f.session(user)))
    audit.flush(f.app.db)
    rows = audit.latest(f.app.db)
    assert {r.tool for r in rows} == {tool, "me_get"}
    for row in rows:
        line = str(row)
        fields = re.fullmatch(
            rf"\S+ \S+  (\w+|{QUOTED})\(\)  agent:concierge( for user ({QUOTED}))?  "
            r"\u2192 .*\[\d+\.\d ms, call \S+\]",
            line,
        )
        assert fields is not None, line
        assert fields[1] == "me_get" or re.sub(r"\\(.)", r"\1", fields[1][1:-1]) == tool
        if row.user_id is not None:
            assert re.sub(r"\\(.)", r"\1", fields[3][1:-1]) == user


def test_a_refusals_text_cannot_end_the_row_and_forge_its_tail(tickets, capsys):
    """A refusal quotes what the model sent (an unknown tool's name, cut to 40 characters):
    printed bare at the end of the row, a name holding ``  [1.0 ms, call x]`` forged the
    row's tail, and a second call id. The refusal is quoted, as a text arg is, so the row
    ends where its quotes do and the quoted text reads back as the refusal kept."""
    app = rastrillo.handler(load_options(tickets))
    forged = 'x"  [1.0 ms, call forged]'
    with contextlib.suppress(ToolError):
        run(app, app.options.tools, Call(tool=forged, args={}, actor=AGENT, call_id="real"))
    audit.flush(app.db)
    [row] = audit.latest(app.db)
    assert main(["audit", "--app", str(tickets)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    fields = re.fullmatch(
        rf"\S+ \S+  {QUOTED}\(\)  agent:concierge  \u2192 refused: ({QUOTED})"
        r"  \[\d+\.\d ms, call real\]",
        line,
    )
    assert fields is not None, line
    assert read_back(fields[1][1:-1].replace('\\"', '"')) == row.refusal


def test_tools_call_usage_errors(tickets, capsys):
    app = ["--app", str(tickets)]
    assert main(["tools", "call", "orders_id_get", "id", "--as", "a", "--user", "1", *app]) == 1
    assert "key=value" in capsys.readouterr().err
    assert main(["tools", "call", "nope", "--as", "a", "--user", "1", *app]) == 1
    assert "unknown tool 'nope'" in capsys.readouterr().err
    assert main(["audit", *app, "--user", "99"]) == 0
    assert capsys.readouterr().out == "no tool calls yet\n"


@pytest.mark.parametrize("limit", ["-5", "0", "1_0", " 3", "٣"])
def test_audit_limit_is_a_number_of_rows_from_one_in_ascii_digits(limit, tickets, capsys):
    # SQLite reads a negative LIMIT as no limit at all; int() takes "1_0", " 3" and "٣".
    with pytest.raises(SystemExit) as exit_:
        main(["audit", "--app", str(tickets), "--limit", limit])
    assert exit_.value.code == 2
    assert f"--limit: wants a number of rows from 1, got {limit!r}" in capsys.readouterr().err


def test_tickets_records_who_cancelled_an_order(tmp_path):
    app = TestApp(TICKETS, tmp_path)
    agent = app.agent("concierge", user_id=1)
    pending = agent.needs_confirmation(
        "orders_id_cancel_post",
        {"id": "1"},
        sentence="Cancel order 1? Its tickets go back on sale.",
    )
    agent.approve(pending)
    assert agent.call("orders_id_cancel_post", {"id": "1"}, approval=pending).status == 200
    order = app.db.query_one("SELECT status, cancelled_by FROM orders WHERE id = 1")
    assert order.status == "cancelled"
    assert re.fullmatch(
        r"agent:concierge for user 1, approved by user 1 at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC",
        order.cancelled_by,
    )
    other = app.agent("concierge", user_id=2)
    with pytest.raises(ApprovalInvalid) as info:
        other.call("orders_id_cancel_post", {"id": "1"}, approval=pending)
    # Another user's approval is no approval at all to this call: not even its existence
    # is told.
    assert info.value.reason == "unknown"
    assert str(info.value) == str(ApprovalInvalid(pending, "unknown"))


HUGE = 10**5000
"""More digits than Python turns into text (4,300): ``str`` and ``repr`` raise ValueError."""


class Unwritable:
    """A value (only in-process code can hand one over) whose ``repr`` raises."""

    def __repr__(self) -> str:
        raise RuntimeError("no text for this")


HOSTILE = [
    "\ud800",
    "me_get\x00",
    "\x00" * 3,
    "x" * 300,
    "é" * 100,
    7,
    None,
    ["a"],
    "\udfff\ud800",
    HUGE,
    [HUGE],
    Unwritable(),
    [Unwritable()],
]


@pytest.mark.parametrize("hostile", HOSTILE, ids=written)
def test_a_hostile_field_costs_no_row_and_is_refused_as_a_tool_error(db_url, tmp_path, hostile):
    f = build(tmp_path, db=db_url)
    session = f.session("3")
    good = Call(tool="me_get", args={}, actor=AGENT, session=session)
    write = Call(
        tool="orders_id_cancel_post", args={"id": "1", "reason": "r"}, actor=AGENT, session=session
    )
    calls = [
        dataclasses.replace(good, call_id="before"),
        dataclasses.replace(good, call_id=hostile),
        dataclasses.replace(good, tool=hostile),
        dataclasses.replace(write, approval=hostile, call_id="approval"),
        dataclasses.replace(good, args={"q": hostile}),
        dataclasses.replace(good, session=hostile),
        dataclasses.replace(good, actor=rastrillo.Actor.agent(hostile)),
        dataclasses.replace(good, actor=rastrillo.Actor.agent("bench", grant=hostile)),
        dataclasses.replace(good, call_id="after"),
    ]
    for one in calls:
        # Anything but a ToolError fails the test: a refusal is always a ToolError.
        with contextlib.suppress(ToolError):
            run(f.app, f.defs, one)
    audit.flush(f.app.db)
    rows = audit.latest(f.app.db, limit=100)
    assert len(rows) == len(calls)
    ids = {r.call_id for r in rows}
    assert {"before", "approval", "after"} <= ids
    refused = "ConfirmRequired" if hostile is None else "ApprovalInvalid"
    assert next(r for r in rows if r.call_id == "approval").refusal.startswith(refused)
    f.app.db.dispose()


class Unspeakable(rastrillo.Actor):
    """An actor handed over in-process whose text raises."""

    def __str__(self) -> str:
        raise RuntimeError("no text for this actor")


def test_a_row_that_cannot_be_made_costs_no_other_row(f):
    """However a row fails to be made, the writer lives on: the calls after it are audited,
    and a flush says a row was lost rather than waiting for it."""
    session = f.session("3")
    good = Call(tool="me_get", args={}, actor=AGENT, session=session)
    odd = dataclasses.replace(good, actor=Unspeakable(human=False, name="odd"), call_id="odd")
    with contextlib.suppress(ToolError):
        run(f.app, f.defs, odd)
    with pytest.raises(audit.AuditNotWritten) as info:
        audit.flush(f.app.db)
    assert (info.value.pending, info.value.lost) == (0, 1)
    run(f.app, f.defs, dataclasses.replace(good, call_id="after"))
    audit.flush(f.app.db)
    assert [r.call_id for r in audit.latest(f.app.db)] == ["after"]


def test_a_row_that_cannot_be_made_behind_many_costs_the_call_nothing(
    tmp_path, monkeypatch, caplog
):
    """While the writer lags, a row waiting behind many is made as it is stored in the
    caller's thread: one that cannot be made is lost and said, never raised at the caller,
    whose call runs (or is refused) as it would with the writer keeping up."""
    monkeypatch.setattr(hooks, "_BUSY_TIMEOUT_MS", 50)
    monkeypatch.setattr(audit_writer, "KEPT_AS_GIVEN", 1)
    f = build(tmp_path)
    good = Call(tool="orders_id_get", args={"id": "1"}, actor=AGENT, call_id="first")
    odd = dataclasses.replace(good, actor=Unspeakable(human=False, name="odd"), call_id="odd")
    with _audit_locked(f.app.db) as writer_stuck:
        run(f.app, f.defs, good)
        until(writer_stuck, "the writer to wait with the first row as its batch")
        run(f.app, f.defs, dataclasses.replace(good, call_id="second"))  # one waits: the bound
        assert run(f.app, f.defs, odd).status == 200
    with pytest.raises(audit.AuditNotWritten) as info:
        audit.flush(f.app.db)
    assert (info.value.pending, info.value.lost, info.value.dropped) == (0, 1, 0)
    assert sorted(r.call_id for r in audit.latest(f.app.db)) == ["first", "second"]
    assert any("call 'odd'" in r.getMessage() for r in caplog.records)
    f.app.db.dispose()


def test_an_app_no_one_uses_any_more_is_collected_with_its_database_and_audit_writer(tmp_path):
    """A process that builds app after app (a test session, an app and its admin app)
    keeps none of them alive: not through its audit writer, nor through the statements
    every database shares, which the first one to run compiles."""

    def used_once(folder: Path) -> tuple[weakref.ref[object], weakref.ref[object]]:
        f = build(folder)
        run(f.app, f.defs, Call(tool="orders_id_get", args={"id": "1"}, actor=AGENT))
        run(f.app, f.defs, Call(tool="me_get", args={}, actor=AGENT, session=f.session("3")))
        audit.flush(f.app.db)
        assert audit.latest(f.app.db, limit=5)  # its writer wrote, and the rows are there
        return weakref.ref(f.app), weakref.ref(f.app.db)

    gone = [used_once(tmp_path / str(n)) for n in range(3)]
    gc.collect()
    assert [(app(), db()) for app, db in gone] == [(None, None)] * 3


def test_a_row_the_database_refuses_costs_no_other_row_and_flush_says_so(tmp_path, caplog):
    f = build(tmp_path)
    with f.app.db.write() as conn:  # a database rule refusing one tool's rows
        conn.exec_driver_sql(
            "CREATE TRIGGER refuse_poison BEFORE INSERT ON rastrillo_audit "
            "WHEN NEW.tool = 'poison' BEGIN SELECT RAISE(ABORT, 'poison refused'); END"
        )
    for tool in ("me_get", "poison", "boom_get", "poison", "me_get"):
        with contextlib.suppress(ToolError):
            run(f.app, f.defs, Call(tool=tool, args={}, actor=AGENT))
    with pytest.raises(audit.AuditNotWritten) as report:
        audit.flush(f.app.db)
    assert (report.value.pending, report.value.lost) == (0, 2)
    assert [r.tool for r in audit.latest(f.app.db)] == ["me_get", "boom_get", "me_get"]
    refused = [r for r in caplog.records if "the database refused a row" in r.getMessage()]
    assert len(refused) == 2 and all('"tool": "poison"' in r.getMessage() for r in refused)
    audit.flush(f.app.db)  # reported once


def test_rows_wait_out_a_write_lock_held_past_the_busy_timeout(tmp_path, monkeypatch, caplog):
    """Another process holds SQLite's write lock longer than the busy timeout: the rows
    wait and are written once it lets go; flush and shutdown say what is not written yet."""
    monkeypatch.setattr(hooks, "_BUSY_TIMEOUT_MS", 50)  # give up on a lock wait sooner
    f = build(tmp_path)
    session = f.session("3")
    holder = sqlite3.connect(f.app.db.engine.url.database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's long write transaction
    waiting = LogSeen("rows wait for the database")
    logging.getLogger("rastrillo.tools.audit").addHandler(waiting)
    try:
        for n in range(3):
            run(
                f.app,
                f.defs,
                Call(tool="me_get", args={}, actor=AGENT, session=session, call_id=f"held-{n}"),
            )
        assert waiting.event.wait(30), "the writer never tried to write"
        with pytest.raises(audit.AuditNotWritten) as report:
            audit.flush(f.app.db, timeout=0)
        assert (report.value.pending, report.value.lost) == (3, 0)
        # The exit does not wait for a writer waiting out the database, however long it may.
        stopping = threading.Thread(target=audit.shutdown, kwargs={"timeout": 3600}, daemon=True)
        stopping.start()
        stopping.join(60)
        assert not stopping.is_alive(), "the exit waited for a writer waiting out the database"
        not_written = [  # this database's rows (an earlier test's writer may log its own)
            r.getMessage()
            for r in caplog.records
            if "row not written before exit" in r.getMessage() and '"held-' in r.getMessage()
        ]
        assert sorted(m.split('"call_id": ')[1][:8] for m in not_written) == [
            '"held-0"',
            '"held-1"',
            '"held-2"',
        ]
    finally:
        holder.rollback()
        holder.close()
        logging.getLogger("rastrillo.tools.audit").removeHandler(waiting)
    audit.flush(f.app.db)
    rows = audit.latest(f.app.db, limit=10)
    assert sorted(r.call_id for r in rows) == ["held-0", "held-1", "held-2"]


@pytest.mark.postgres
def test_the_exit_waits_again_for_no_row_an_earlier_shutdown_logged(tmp_path, pg_url, caplog):
    """A server's end logs the rows still queued (``shutdown(timeout=0)``), then the
    interpreter's exit handler runs ``shutdown`` again. A writer stuck behind PostgreSQL's
    table lock is no outage, so that second run waited its whole 30 s for rows already
    logged, and a server stopped with the audit table locked exited 40 s after SIGTERM, past
    the 30 s docs/app.md gives ("Stopping"). Each row is now logged once, and the exit
    waits only for rows no earlier shutdown logged."""
    f = build(tmp_path, db=pg_url)

    def read(call_id: str) -> None:
        call = Call(tool="search_get", args={"q": "x", "page": "1"}, actor=AGENT, call_id=call_id)
        run(f.app, f.defs, call)

    with _audit_locked(f.app.db) as writer_stuck:
        read("at-the-end")
        until(writer_stuck, "the writer to wait for the lock")
        audit.shutdown(timeout=0)  # the server's end
        read("after")
        audit.shutdown(timeout=0)  # logs the row queued since, not the first again
        exiting = threading.Thread(target=audit.shutdown, kwargs={"timeout": 3600}, daemon=True)
        exiting.start()
        exiting.join(60)
        assert not exiting.is_alive(), "the exit waited for rows an earlier shutdown logged"
        logged = [
            json.loads(r.getMessage().split("row not written before exit: ", 1)[1])["call_id"]
            for r in caplog.records
            if "row not written before exit" in r.getMessage()
        ]
        assert logged == ["at-the-end", "after"]
    audit.flush(f.app.db)  # the lock gone, both are written too (docs/app.md allows it)
    assert sorted(r.call_id for r in audit.latest(f.app.db)) == ["after", "at-the-end"]
    f.app.db.dispose()


def test_rows_an_interrupted_stop_did_not_log_are_logged_by_the_next(tmp_path, monkeypatch):
    """A stop logging the rows it could not write is interrupted (a second Ctrl-C) after
    the first: the rows it did not log are not counted as logged, and the next stop (the
    interpreter's exit handler) logs them, rather than losing them unsaid."""
    monkeypatch.setattr(hooks, "_BUSY_TIMEOUT_MS", 50)  # the writer stuck sooner
    f = build(tmp_path)
    with _audit_locked(f.app.db) as writer_stuck:
        for call_id in ("a", "b", "c"):
            call = Call(
                tool="search_get", args={"q": "x", "page": "1"}, actor=AGENT, call_id=call_id
            )
            run(f.app, f.defs, call)
        until(writer_stuck, "the writer to wait for the lock")
        writer = audit_writer.writers[id(f.app.db)]
        said: list[str] = []

        def interrupted(entry: audit.Entry) -> None:
            if said:
                raise KeyboardInterrupt  # as the second row is being logged
            said.append(entry.call_id)

        with pytest.raises(KeyboardInterrupt):
            writer.abandon(interrupted)
        rest: list[str] = []
        writer.abandon(lambda entry: rest.append(entry.call_id))
        assert (said, rest) == (["a"], ["b", "c"])
    audit.flush(f.app.db)
    f.app.db.dispose()


class _HeldLogger(logging.Handler):
    """Records which thread logged which row not written before exit. The first row the
    ``held`` thread logs holds it inside the log call, ``holding`` set, until ``go_on``: a
    hook the test controls, in place of a timed wait. ``moved`` is set at each row logged."""

    def __init__(self, held: str, moved: threading.Event) -> None:
        super().__init__()
        self.held = held
        self.moved = moved
        self.logged: list[tuple[str, str]] = []
        self.holding = threading.Event()
        self.go_on = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "row not written before exit: " not in message:
            return
        call_id = json.loads(message.split("row not written before exit: ", 1)[1])["call_id"]
        name = threading.current_thread().name
        self.logged.append((name, call_id))
        self.moved.set()
        if name == self.held and not self.holding.is_set():
            self.holding.set()
            assert self.go_on.wait(SAFETY), "the test never let the held thread go on"


class _Turnstile:
    """A lock that sets ``moved`` as a thread arrives at it, before it waits there."""

    def __init__(self, moved: threading.Event) -> None:
        self._lock = threading.Lock()
        self._moved = moved

    def __enter__(self) -> None:
        self._moved.set()
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


SAFETY = 60.0
"""Real seconds a wait on another thread gives up after: only so that a failing run ends."""


def test_two_stops_at_once_take_turns_and_each_logs_only_the_rows_left(tmp_path, monkeypatch):
    """The lifespan's stop logs the rows the writer could not write while an embedder calls
    ``audit.shutdown`` from another thread. The second waits for the first to finish, then
    logs only the rows left: the one queued since. Before, each logged every row."""
    monkeypatch.setattr(hooks, "_BUSY_TIMEOUT_MS", 50)  # the writer stuck sooner
    f = build(tmp_path)

    def read(call_id: str) -> None:
        call = Call(tool="search_get", args={"q": "x", "page": "1"}, actor=AGENT, call_id=call_id)
        run(f.app, f.defs, call)

    moved = threading.Event()
    logger = logging.getLogger("rastrillo.tools.audit")
    seen = _HeldLogger("lifespan", moved)
    logger.addHandler(seen)
    stops = [
        threading.Thread(target=audit.shutdown, kwargs={"timeout": 0}, name=name, daemon=True)
        for name in ("lifespan", "embedder")
    ]
    for other in list(audit_writer.writers.values()):  # the stops log no earlier test's rows
        other.wait(SAFETY)
    try:
        with _audit_locked(f.app.db) as writer_stuck:
            for call_id in ("a", "b", "c"):
                read(call_id)
            until(writer_stuck, "the writer to wait for the lock")
            writer = audit_writer.writers[id(f.app.db)]
            monkeypatch.setattr(writer, "_abandoning", _Turnstile(moved))
            stops[0].start()
            assert seen.holding.wait(SAFETY), "the lifespan's stop logged no row"
            read("d")  # a call made while it logs
            moved.clear()
            stops[1].start()
            # The embedder's stop arrives at its turn, or (the bug) logs beside the held one.
            assert moved.wait(SAFETY), "the embedder's stop neither waited its turn nor logged"
            seen.go_on.set()
            for stop in stops:
                stop.join(SAFETY)
            assert not any(stop.is_alive() for stop in stops)
            assert seen.logged == [
                ("lifespan", "a"),
                ("lifespan", "b"),
                ("lifespan", "c"),
                ("embedder", "d"),
            ]
    finally:
        seen.go_on.set()
        logger.removeHandler(seen)
    audit.flush(f.app.db)
    f.app.db.dispose()


@contextlib.contextmanager
def _audit_locked(db: storage.Database) -> Iterator[Callable[[], bool]]:
    """Another connection holds the audit table's write lock until the block ends: SQLite's
    BEGIN EXCLUSIVE, PostgreSQL's LOCK TABLE. Yields whether the writer is stuck on it:
    SQLite's writer said so, or PostgreSQL shows its INSERT waiting for the lock."""
    if db.is_sqlite:
        holder = sqlite3.connect(db.engine.url.database, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        waiting = LogSeen("rows wait for the database")
        logging.getLogger("rastrillo.tools.audit").addHandler(waiting)
        try:
            yield waiting.event.is_set
        finally:
            holder.rollback()
            holder.close()
            logging.getLogger("rastrillo.tools.audit").removeHandler(waiting)
        return
    admin = storage.Database(db.url)
    with admin.engine.connect() as holder, holder.begin():
        holder.exec_driver_sql("LOCK TABLE rastrillo_audit IN EXCLUSIVE MODE")
        yield lambda: bool(
            admin.query(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO rastrillo_audit%'"
            )
        )
    admin.dispose()


def test_an_outage_holds_at_most_queued_max_rows_and_logs_the_rest_in_full(
    db_url, tmp_path, monkeypatch, caplog
):
    """A model calling on through a locked database costs bounded memory: the writer keeps
    the first QUEUED_MAX rows waiting (written once the lock goes), and every row past
    them is logged in full, escaped, and counted by flush; none is lost unsaid."""
    monkeypatch.setattr(hooks, "_BUSY_TIMEOUT_MS", 50)
    monkeypatch.setattr(audit_writer, "QUEUED_MAX", 20)
    monkeypatch.setattr(audit_writer, "KEPT_AS_GIVEN", 5)
    f = build(tmp_path, db=db_url)

    def read(call_id: str, q: str = "x") -> None:
        call = Call(tool="search_get", args={"q": q, "page": "1"}, actor=AGENT, call_id=call_id)
        with contextlib.suppress(ToolError):  # run or refused, each call has its row
            run(f.app, f.defs, call)

    with _audit_locked(f.app.db) as writer_stuck:
        read("first")
        until(writer_stuck, "the writer to wait with the first row as its batch")
        for n in range(40):
            read(f"flood-{n}", q=f"\x00\ud800 {n} " + "é" * 10_000)
        with pytest.raises(audit.AuditNotWritten) as report:
            audit.flush(f.app.db, timeout=0)
        assert (report.value.pending, report.value.lost, report.value.dropped) == (21, 0, 20)
        assert "20 not queued, the queue being full (logged in full)" in str(report.value)
    audit.flush(f.app.db)  # the dropped rows were reported once; the kept ones are written
    rows = audit.latest(f.app.db, limit=100)
    assert sorted(r.call_id for r in rows) == sorted(["first", *(f"flood-{n}" for n in range(20))])
    assert {r.args["q"] for r in rows if r.call_id == "flood-19"} == {
        "\\x00\\ud800 19 " + "é" * (audit.ARG_TEXT_KEPT - 15) + "…"
    }
    logged = [
        json.loads(r.getMessage().split("row not queued: ", 1)[1])
        for r in caplog.records
        if "row not queued" in r.getMessage()
    ]
    assert [row["call_id"] for row in logged] == [f"flood-{n}" for n in range(20, 40)]
    assert all(r.isascii() for r in caplog.messages)  # escaped: one line, nothing hidden
    assert json.loads(logged[-1]["args"])["q"] == (
        "\\x00\\ud800 39 " + "é" * (audit.ARG_TEXT_KEPT - 15) + "…"
    )
    f.app.db.dispose()


@pytest.mark.parametrize("kept_as_given", [2, None], ids=["behind-many", "default-bound"])
def test_an_outage_keeps_no_models_megabytes_in_memory(tmp_path, monkeypatch, kept_as_given):
    """Rows waiting behind many, or queued while the writer waits for the database, are
    kept as the table stores them (args cut to ARG_TEXT_KEPT), not with the megabyte each
    call sent: the memory a locked database costs is bounded by QUEUED_MAX rows of bounded
    size, below the count of rows a healthy writer may find waiting too."""
    monkeypatch.setattr(hooks, "_BUSY_TIMEOUT_MS", 50)
    monkeypatch.setattr(audit_writer, "QUEUED_MAX", 20)
    if kept_as_given is not None:
        monkeypatch.setattr(audit_writer, "KEPT_AS_GIVEN", kept_as_given)
    f = build(tmp_path)
    with _audit_locked(f.app.db) as writer_stuck:
        run(f.app, f.defs, Call(tool="orders_id_get", args={"id": "1"}, actor=AGENT))
        until(writer_stuck, "the writer to wait with the first row as its batch")
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for n in range(30):  # 20 queued, 10 past the queue (each logged in full)
                call = Call(
                    tool="search_get", args={"q": f"{n}" * 1_000_000, "page": "1"}, actor=AGENT
                )
                run(f.app, f.defs, call)
                f.seen.clear()  # the test app's own record of what it saw
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        # A row or two as sent, the rest as stored: the 20 queued rows kept as sent would
        # hold 30 MB (1 MB each for n < 10, 2 MB after), all 30 kept 50 MB.
        assert held < 20_000_000
    with pytest.raises(audit.AuditNotWritten) as report:
        audit.flush(f.app.db)
    assert (report.value.pending, report.value.dropped) == (0, 10)
    assert len(audit.latest(f.app.db, limit=100)) == 21
    f.app.db.dispose()


def test_rastrillo_audit_only_reads_it_neither_migrates_nor_seeds(tmp_path, capsys):
    (tmp_path / "migrations").mkdir()
    (tmp_path / "migrations" / "0001_notes.sql").write_text("CREATE TABLE notes (id INTEGER);")
    (tmp_path / "app.py").write_text(
        "from pathlib import Path\n"
        "import rastrillo\n"
        "HERE = Path(__file__).parent\n"
        "OPTIONS = rastrillo.Options(\n"
        "    app_dir=HERE, db='data/app.db', setup=lambda db: (HERE / 'seeded').touch()\n"
        ")\n"
    )
    app = ["--app", str(tmp_path)]
    assert main(["audit", *app]) == 0
    assert capsys.readouterr().out == "no tool calls yet\n"
    assert not (tmp_path / "data").exists()

    (tmp_path / "data").mkdir()
    sqlite3.connect(tmp_path / "data" / "app.db").close()  # a database the app never opened
    assert main(["audit", *app]) == 0
    assert capsys.readouterr().out == "no tool calls yet\n"
    assert not (tmp_path / "seeded").exists()
    tables = sqlite3.connect(tmp_path / "data" / "app.db").execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'"
    )
    assert tables.fetchall() == []


def test_a_row_stays_small_whatever_args_a_model_sends(tmp_path):
    """A read takes no size limit on its args, and a refused call records them as sent: a
    model's megabyte, or ten thousand arg names, must not make a megabyte row each time."""
    f = build(tmp_path)
    session = f.session("3")
    huge = "x" * 1_000_000
    many = {f"a{n}": n for n in range(10_000)}
    for args in ({"id": huge}, many, {huge: 1}):
        with contextlib.suppress(ToolError):
            run(f.app, f.defs, Call(tool="orders_id_get", args=args, actor=AGENT, session=session))
    audit.flush(f.app.db)
    long_value, many_names, long_name = reversed(audit.latest(f.app.db, limit=3))
    assert long_value.args == {"id": "x" * (audit.ARG_TEXT_KEPT - 1) + "…"}
    assert len(many_names.args) == audit.ARGS_KEPT + 1
    assert many_names.args["a0"] == 0 and many_names.args["…"] == "9936 more args"
    assert list(long_name.args) == ["x" * (audit.ARG_TEXT_KEPT - 1) + "…"]
    stored = f.app.db.query("SELECT length(args) AS n FROM rastrillo_audit")
    assert max(row.n for row in stored) < 10 * audit.ARG_TEXT_KEPT
    f.app.db.dispose()


def test_the_end_of_an_apps_lifespan_writes_its_queued_rows(tmp_path, monkeypatch):
    """An app can stop with its process going on (a test's TestApp, an app mounted in
    another): its lifespan's end writes the reads' rows still queued, rather than leave
    them to a writer whose database is then let go."""
    monkeypatch.setattr(audit_writer.Writer, "_LINGER_SECONDS", 0.5)  # a batch gathers a while
    with TestApp(TICKETS, tmp_path) as app:
        assert app.agent("concierge", user_id=1).call("orders_get").status == 200
    with sqlite3.connect(tmp_path / "test.db") as db:
        assert db.execute("SELECT tool FROM rastrillo_audit").fetchall() == [("orders_get",)]


@pytest.mark.parametrize("exiting", [False, True], ids=["flush", "exit"])
def test_a_flush_or_the_exits_wait_does_not_wait_out_the_writers_linger(
    tmp_path, monkeypatch, exiting
):
    """The writer lingers before taking a batch, so that rows arriving together share a
    commit. A flush (a command's call, a lifespan's end) or the exit wants the rows now: it
    ends the linger. With a linger far past the wait's timeout, a wait that sat it out ends
    with the row still pending, whatever the machine's speed."""
    monkeypatch.setattr(audit_writer.Writer, "_LINGER_SECONDS", 60)
    f = build(tmp_path)
    call = Call(tool="orders_id_get", args={"id": "1"}, actor=AGENT, call_id="waited-for")
    assert run(f.app, f.defs, call).status == 200
    writer = audit_writer.writers[id(f.app.db)]
    assert writer.wait(10, until_outage=exiting) == 0
    assert [r.call_id for r in audit.latest(f.app.db)] == ["waited-for"]
    f.app.db.dispose()


def test_a_calls_duration_is_measured_on_the_apps_clock(tmp_path):
    """The row's duration is read from the clock the app was given, as every time the
    framework keeps is: a fake clock moved by 2.5 s while the call runs makes it 2500 ms."""
    clock = ManualClock()

    def taking_two_and_a_half_seconds(app):
        async def timed(scope, receive, send):
            clock.advance(2.5)
            await app(scope, receive, send)

        return timed

    f = build(tmp_path, clock=clock, wrap=taking_two_and_a_half_seconds)
    call = Call(tool="orders_id_get", args={"id": "1"}, actor=AGENT, call_id="timed")
    assert run(f.app, f.defs, call).status == 200
    audit.flush(f.app.db)
    assert f.app.db.query("SELECT duration_ms FROM rastrillo_audit WHERE call_id = 'timed'") == [
        (2500.0,)
    ]
    f.app.db.dispose()
