"""Dispatch: a model-proposed tool call, checked, then sent through the app's own ASGI app.

The call is validated against the registry in a fixed order, each refusal a
:class:`~rastrillo.registry.errors.ToolError` raised before the app sees
anything. What passes becomes one ordinary HTTP request built straight into an
ASGI scope (no HTTP client in between): method and path from the registry,
each path parameter percent-encoded as one segment, the other args in the
query (GET) or a form body, the user's session cookie, and the in-process
marker that tells the CSRF middleware and ``ctx.actor`` who is calling. So a
tool call passes every middleware a browser request passes and reaches the
identical ``handle``. Every dispatch, refused or run, appends an audit row.
"""

from __future__ import annotations

import asyncio
import codecs
import functools
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol, overload
from urllib.parse import unquote

import anyio
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from rastrillo import threads
from rastrillo.actor import AGENT_NAME_RULE, Actor, Approval
from rastrillo.context import USER_SCOPE_KEY, ToolCallMarker
from rastrillo.errors import written
from rastrillo.registry.confirm import confirm_sentence
from rastrillo.registry.declare import Access, Arg, ArgValue, ToolDef
from rastrillo.registry.errors import (
    BadActor,
    BadArg,
    ConfirmRequired,
    MissingArg,
    ToolError,
    TooManyApprovals,
    UnknownArg,
    UnknownTool,
)
from rastrillo.registry.validate import Invalid, accept, path_problem, wire
from rastrillo.routing import fill_path, path_params
from rastrillo.sessions.store import (
    Session,
    find_session_from_loop,
    find_session_in,
    is_session_id,
)
from rastrillo.storage import Database
from rastrillo.tools import audit, consent
from rastrillo.tools.transport import form_quote, request_scope, send_request

__all__ = ["Call", "Result", "Target", "ToolCallMarker", "dispatch", "dispatch_sync"]

log = logging.getLogger("rastrillo.tools")


class Target(Protocol):
    """What dispatch needs of the app: an ASGI app with its database, origin, approval TTL
    and registry.

    ``rastrillo.handler(options)`` returns one.
    """

    db: Database
    origin: str

    @property
    def approval_ttl(self) -> timedelta: ...

    @property
    def tools(self) -> Sequence[ToolDef]:
        """The registry ``dispatch(app, call)`` checks a call against."""
        ...

    def checks_in_handle(self, defn: ToolDef) -> bool:
        """Whether the router runs a ``ToolCallMarker.check`` for this tool in the worker
        thread its ``handle`` runs in, before ``handle`` and with nothing of the app's
        before it."""
        ...

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...


@dataclass(frozen=True, kw_only=True)
class Call:
    """One tool call as a model proposed it, with who makes it and for whom.

    ``args`` holds JSON values (a string, an integer, a number or a bool, as
    each arg declares; ``None`` or absent for an optional arg left out).
    ``session`` is the session id (the session cookie's value) of the user the
    agent acts for; ``approval`` the id of the user's approval when re-calling
    a write; ``call_id`` the provider's tool-call id, kept in the audit log
    (one made up when None); ``client`` the name of the agent's client (an MCP
    client's, say), kept in the audit log too.
    """

    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)
    actor: Actor
    session: str | None = None
    approval: str | None = None
    call_id: str | None = None
    client: str | None = None


class Result(NamedTuple):
    """The app's response to a dispatched call: any status, redirects not followed.

    Immutable, and a tuple: one is made for every call, and a tuple is the cheapest to
    make."""

    status: int
    headers: Headers
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode(_charset(self.headers), errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


@overload
async def dispatch(app: Target, call: Call, /) -> Result: ...
@overload
async def dispatch(app: Target, defs: Sequence[ToolDef], call: Call) -> Result: ...
async def dispatch(
    app: Target, defs: Sequence[ToolDef] | Call | None = None, call: Call | None = None
) -> Result:
    """Check ``call`` against the registry and consent, then run it through ``app``.

    ``dispatch(app, call)`` checks it against the app's own registry
    (``app.tools``, the ``Options.tools`` it was built with);
    ``dispatch(app, defs, call)`` against the registry ``defs``.

    Raises a :class:`ToolError` for a refused call, whatever the call holds,
    the handler never reached: :class:`UnknownTool`, :class:`UnknownArg`,
    :class:`MissingArg` or :class:`BadArg`, :class:`BadActor`, and for a write
    :class:`ConfirmRequired` or :class:`ApprovalInvalid`. Anything the app
    answers, a 4xx or 5xx included, is a :class:`Result`. ``app`` is
    ``rastrillo.handler(options)``; no server or lifespan is needed. The
    database work (session, approval, an approved write's audit row) waits on
    nothing on the event loop: it runs in a worker thread, save a claimed user's
    session read where a read waits on nothing (``Database.reads_without_waiting``,
    SQLite); the audit row of an approved
    write is committed with its approval's use, before the app runs it, and its
    outcome before this returns.
    """
    if call is None and type(defs) is Call:  # dispatch(app, call): the app's own registry
        registry, call = app.tools, defs
    else:
        registry, call = _registry_and_call(app, defs, call)
    # Whatever the call holds is recorded as it is (audit makes every text storable).
    entry = audit.Entry(call, app.db.clock)
    write = None
    try:
        plan, values, texts = _check_call(registry, call)
        session = None
        if plan.defn.access is Access.WRITE:
            write = _Write(app, plan, call, values, texts, entry)
            marker = await write.marker()
        else:
            if call.session is not None and call.actor.user_id is not None:
                # A claimed user is checked before the app runs (on SQLite, with no thread
                # hop). Otherwise a read's session is looked up by the session middleware,
                # as a browser's is, in the one worker-thread hop a request has for it.
                session = await find_session_from_loop(app.db, call.session, tool_call=True)
            if session is not None or call.actor.user_id is not None:
                entry.user_id = _check_user(plan.defn, call, session)
            marker = _marker(plan, call, session, entry.user_id, None, values, texts)
        result, resolved_user = await _run(app, plan, texts, marker)
        if write is not None and write.failure is not None:
            raise write.failure  # the router checked it and ran nothing
        if write is None and session is None:
            entry.user_id = resolved_user
        entry.status = result.status
        return result
    except ToolError as exc:
        _refused(entry, exc)
        raise
    finally:
        if entry.approval is None:
            audit.append(app.db, entry)  # queued for the background writer
        elif write is not None and not write.recorded:
            # An approved write ran (an async handle, or it raised): its outcome on disk
            # before we return.
            await threads.in_thread(write.record)


def _refused(entry: audit.Entry, exc: ToolError) -> None:
    """The refusal in the call's audit row: its kind and note, and a proposed write's
    approval."""
    entry.refusal, entry.refusal_kind = exc.audit_note, type(exc).__name__
    if isinstance(exc, ConfirmRequired):
        entry.approval_id = exc.approval_id
        entry.approval_path = consent.approval_path(exc.approval_id)


def _marker(
    plan: _Plan,
    call: Call,
    session: Session | None,
    user_id: str | None,
    approval: Approval | None,
    values: Mapping[str, ArgValue],
    texts: Mapping[str, str],
    handled: Callable[[object], None] | None = None,
) -> ToolCallMarker:
    """The marker a checked call is sent with: its actor acting for ``user_id`` (under
    ``approval``, for a write), its route and path parameters, its session id, its
    canonical args and its form fields."""
    actor = call.actor
    if type(actor) is not Actor or user_id != actor.user_id or approval is not None:
        actor = Actor(
            human=False, name=actor.name, user_id=user_id, approval=approval, grant=actor.grant
        )
    # Positional (a marker is made for every call), in the fields' order.
    return ToolCallMarker(
        actor,
        session,
        plan.defn.path,  # route
        _params(plan, texts) if plan.params else _NO_PARAMS,
        call.session,  # session_id
        # args: every declared arg, in declared order, which ``values`` is when no
        # optional arg was left out.
        values if len(values) == len(plan.unset) else {**plan.unset, **values},
        handled,
        None if plan.in_query else _fields(plan, texts),  # form
    )


_NO_PARAMS: Mapping[str, str] = MappingProxyType({})


def _params(plan: _Plan, texts: Mapping[str, str]) -> Mapping[str, str]:
    """The path parameters' texts."""
    return {name: texts[name] for name in plan.params}


def _fields(plan: _Plan, texts: Mapping[str, str]) -> dict[str, str]:
    """The args that go in the query or the form (not in the path), sorted by name."""
    return {name: texts[name] for name, _ in plan.fields if name in texts}


def _registry_and_call(
    app: Target, defs: Sequence[ToolDef] | Call | None, call: Call | None
) -> tuple[Sequence[ToolDef], Call]:
    """``(app, call)`` or ``(app, defs, call)``, as :func:`dispatch` is given them."""
    if call is None and isinstance(defs, Call):
        defs, call = None, defs
    if not isinstance(call, Call) or isinstance(defs, Call):
        raise TypeError("dispatch(app, call) or dispatch(app, defs, call): call is a tools.Call")
    return (app.tools if defs is None else defs), call


@overload
def dispatch_sync(app: Target, call: Call, /) -> Result: ...
@overload
def dispatch_sync(app: Target, defs: Sequence[ToolDef], call: Call) -> Result: ...
def dispatch_sync(
    app: Target, defs: Sequence[ToolDef] | Call | None = None, call: Call | None = None
) -> Result:
    """:func:`dispatch` for sync code: a script, a sync test, a sync ``handle``.

    It runs the call on a new event loop in the calling thread. Inside a
    running event loop that would block the loop, so there it raises
    ``RuntimeError``: ``await dispatch(...)`` instead.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass  # no loop in this thread: the normal case
    else:
        raise RuntimeError("dispatch_sync() inside a running event loop: await dispatch() instead")
    defs, call = _registry_and_call(app, defs, call)
    # Handed out beside the loop, not as its main task's result: at exit, Python 3.11's
    # asyncio.run formats that task, result and all (a whole body), checking its SIGINT
    # handler.
    results: list[Result] = []

    async def run() -> None:
        results.append(await dispatch(app, defs, call))

    anyio.run(run)
    return results[0]


@dataclass(frozen=True, slots=True)
class _Plan:
    """What checking and sending a call of one tool takes, worked out once per registry."""

    defn: ToolDef
    args: dict[str, Arg]
    required: frozenset[str]
    params: frozenset[str]
    """The path parameters."""
    unset: dict[str, None]
    """Every declared arg, in declared order, with no value: what a call's values fill."""
    fields: tuple[tuple[str, str], ...]
    """The args not in the path, sorted, each with its name form-encoded."""
    in_query: bool
    """A GET or HEAD: its fields go in the query, not a form body."""


_plans_of: dict[int, tuple[tuple[ToolDef, ...], dict[str, _Plan]]] = {}


def _plan_of(defs: Sequence[ToolDef], tool: str) -> _Plan | None:
    """The plan of the tool ``tool`` names in ``defs`` (the first of a repeated id).

    A tuple registry, which cannot change, such as ``app.tools`` and ``Options.tools``,
    is planned whole once; any other sequence has only the called tool planned, on every
    call (what it holds may have changed since)."""
    if type(defs) is not tuple:
        defn = next((defn for defn in defs if defn.id == tool), None)
        return None if defn is None else _plan(defn)
    cached = _plans_of.get(id(defs))
    if cached is None or cached[0] is not defs:
        plans: dict[str, _Plan] = {}
        for defn in defs:
            if defn.id not in plans:
                plans[defn.id] = _plan(defn)
        if len(_plans_of) >= 64:
            _plans_of.clear()
        cached = _plans_of[id(defs)] = (defs, plans)
    return cached[1].get(tool)


def _plan(defn: ToolDef) -> _Plan:
    args = dict(defn.args.items())
    required = frozenset(name for name, arg in args.items() if arg.required)
    params = _path_params(defn.path)
    fields = tuple((name, form_quote(name)) for name in sorted(args) if name not in params)
    in_query = defn.method in ("GET", "HEAD")
    return _Plan(defn, args, required, params, dict.fromkeys(args), fields, in_query)


def _check_call(
    defs: Sequence[ToolDef], call: Call
) -> tuple[_Plan, dict[str, ArgValue], dict[str, str]]:
    """Steps 1-4 of the call itself: the tool exists; its args, exactly, each a safe value
    of its declared type; a named agent makes it; its session id is one.

    Returns the tool's plan, and the canonical value and wire text of every arg that
    is sent (an optional arg that is absent, ``None`` or ``""`` is not).
    """
    plan = _plan_of(defs, call.tool) if type(call.tool) is str else None
    if plan is None:
        tool = call.tool if isinstance(call.tool, str) else written(call.tool)
        raise UnknownTool(tool, {defn.id for defn in defs})
    defn = plan.defn
    if defn.access is Access.READ and defn.method != "GET":
        # Generate refuses such a tool; a hand-built registry must not run a state change unasked.
        raise ToolError(
            f"tool {defn.id!r} is a read but its route is {defn.method}: a read tool must be "
            "a GET action"
        )
    args = call.args
    if type(args) is not dict and not isinstance(args, Mapping):
        raise BadArg(defn.id, "*", "args must be a JSON object of arg name to value")
    declared = plan.args
    if not declared.keys() >= args.keys():
        extra = [str(k) for k in args if type(k) is not str or k not in declared]
        raise UnknownArg(defn.id, extra, declared)
    if not plan.required.issubset(args):
        raise MissingArg(defn.id, [name for name in declared if name in plan.required - set(args)])
    values: dict[str, ArgValue] = {}
    texts: dict[str, str] = {}
    for name, arg in declared.items():
        value = args.get(name)
        if not arg.required and value in (None, ""):
            continue
        try:
            values[name] = typed = accept(arg, value)
        except Invalid as exc:
            raise BadArg(defn.id, name, str(exc)) from None
        if isinstance(typed, str):
            if name in plan.params and (problem := path_problem(typed)) is not None:
                raise BadArg(defn.id, name, problem)
            texts[name] = typed
        else:
            texts[name] = wire(typed)
    if defn.access is Access.WRITE:
        consent.check_size(defn.id, declared, texts)
    actor = call.actor
    if not isinstance(actor, Actor) or not actor.is_named_agent:
        raise BadActor(
            "a tool call is made by a named agent: actor=rastrillo.Actor.agent('name'), "
            f"the name {AGENT_NAME_RULE}"
        )
    if actor.approval is not None:
        raise BadActor("an approval is passed as call.approval, never set on the actor")
    session = call.session
    if session is not None and not is_session_id(session):
        raise BadActor("call.session is not a session id")
    return plan, values, texts


def _check_user(defn: ToolDef, call: Call, found: Session | None) -> str | None:
    """Step 4, the user: the one whose live session the call carries; a write needs one."""
    user_id = found.user_id if found is not None else None
    if call.actor.user_id is not None and call.actor.user_id != user_id:
        raise BadActor(
            f"the actor acts for user {call.actor.user_id} but the call carries no live session "
            "of that user"
        )
    if defn.access is Access.WRITE and user_id is None:
        raise BadActor(
            f"tool {defn.id!r} changes data for a user who must approve it: "
            "call.session must be that user's live session"
        )
    return user_id


class _Write:
    """Steps 4 and 5 for a write, run in one worker thread: its user, then its approval.

    What it found stays on it when it refuses, for the audit row.
    """

    def __init__(
        self,
        app: Target,
        plan: _Plan,
        call: Call,
        values: Mapping[str, ArgValue],
        texts: Mapping[str, str],
        entry: audit.Entry,
    ) -> None:
        self.app, self.plan, self.defn, self.call = app, plan, plan.defn, call
        self.values, self.texts, self.entry = values, texts, entry
        self.recorded = False
        """The approved write's outcome is in its audit row (written in the thread that ran
        ``handle``)."""
        self.session: Session | None = None
        self.user_id: str | None = None
        self.approval: Approval | None = None
        self.failure: Exception | None = None
        """What :meth:`check` raised, kept for dispatch to raise: it may run in the router."""

    async def marker(self) -> ToolCallMarker:
        """The marker the write is sent with. With an approval, to a sync ``handle`` with
        nothing of the app's before it, the router checks it in the worker thread that then
        runs ``handle``: one hop. Otherwise it is checked here, in a hop of its own, before
        the app sees the request; a refusal is raised."""
        call, plan, texts = self.call, self.plan, self.texts
        self.entry.approval_id = call.approval
        if call.approval is not None and self.app.checks_in_handle(self.defn):
            return ToolCallMarker(
                call.actor,
                route=plan.defn.path,
                params=_params(plan, texts) if plan.params else _NO_PARAMS,
                session_id=call.session,
                form=_fields(plan, texts),
                check=self.checked,
            )
        checked = await threads.in_thread(self.checked)
        if checked is None:
            assert self.failure is not None
            raise self.failure
        return checked

    def checked(self) -> ToolCallMarker | None:
        """:meth:`check`, then the marker the app runs the write with; None when refused
        (:attr:`failure` says why). Runs in a worker thread: the router's, just before
        ``handle``, or a hop of dispatch's own."""
        entry = self.entry
        try:
            self.check()
        except Exception as exc:
            self.failure = exc
            return None
        finally:
            entry.user_id, entry.approval = self.user_id, self.approval
        return _marker(
            self.plan,
            self.call,
            self.session,
            self.user_id,
            self.approval,
            self.values,
            self.texts,
            self.handled,
        )

    def record(self) -> None:
        """The approved write's outcome, in its audit row on disk (in a worker thread)."""
        audit.append(self.app.db, self.entry, durable=True)
        self.recorded = True

    def handled(self, response: object) -> None:
        """In the worker thread that ran a sync ``handle``, with what it returned: the
        approved write's outcome, on disk before the response leaves that thread."""
        self.entry.status = response.status_code if isinstance(response, Response) else 500
        try:
            self.record()
        except Exception:
            log.exception(
                "audit row of %s not written after handle; writing it again", self.entry.call_id
            )

    def check(self) -> None:
        """In one write transaction: the session's user, then the consent (step 5).

        A write needs the user's approval of this exact call, used once. The sentence
        shows the values as they go on the wire, and the approval binds them:
        ``{"quantity": 2}`` approved is ``{"quantity": 2}`` run. Without
        ``call.approval``, the identical call's own approval counts: an approved one is
        used, a pending one is named again; else a new one is asked.
        """
        app, defn, call = self.app, self.defn, self.call
        if call.session is None:
            _check_user(defn, call, None)  # refused: a write needs a session
        sentence = confirm_sentence(defn, self.texts)
        actor = str(call.actor)
        now = app.db.clock.now()
        refused: ToolError | None = None
        outcome: Approval | consent.ApprovalRecord | None = None
        row_id = None
        with app.db.driver_write() as tx:
            self.session = find_session_in(tx, now, call.session)
            try:
                self.user_id = user_id = _check_user(defn, call, self.session)
                assert user_id is not None  # _check_user refuses a write without one
                outcome = consent.settle(
                    tx,
                    now,
                    call.approval,
                    tool=defn.id,
                    args=self.values,
                    actor=actor,
                    user_id=user_id,
                    sentence=sentence,
                    ttl=app.approval_ttl,
                    agent=call.actor.name,
                )
                if isinstance(outcome, Approval):
                    entry = self.entry
                    entry.user_id, entry.approval = user_id, outcome
                    entry.approval_path = consent.approval_path(outcome.id)
                    row_id = audit.begin(tx, entry, now)  # on disk with the approval's use
            except (BadActor, TooManyApprovals) as exc:
                refused = exc  # raised once the session's own upkeep is committed
        if refused is not None:
            raise refused
        if isinstance(outcome, Approval):
            # Committed: the row is there to take the outcome. (Had the commit failed, the
            # call would be refused, its row appended anew.)
            self.approval, self.entry.row_id = outcome, row_id
            return
        if outcome is None:
            assert self.user_id is not None
            consent.refuse(
                app.db,
                call.approval,
                now,
                tool=defn.id,
                args=self.values,
                actor=actor,
                user_id=self.user_id,
                sentence=sentence,
            )
        raise ConfirmRequired(defn.id, sentence, outcome.id, app.origin + outcome.url)


@functools.lru_cache(maxsize=1024)
def _path_params(path: str) -> frozenset[str]:
    return frozenset(path_params(path))


async def _run(
    app: Target,
    plan: _Plan,
    texts: Mapping[str, str],
    marker: ToolCallMarker,
) -> tuple[Result, str | None]:
    """Send one request through ``app``, the args as their wire texts (those not in the path
    in the query or the form body); its response, and the user its session was.

    The session travels in ``marker`` alone, never as a cookie: a handler reads the request
    a model's call made, and one that returned its headers would hand the model a session
    that approves writes from outside any browser."""
    defn = plan.defn
    if plan.params:
        raw_path = fill_path(defn.path, texts)
        path = unquote(raw_path)
    else:
        raw_path = path = defn.path
    pairs = [key + "=" + form_quote(texts[name]) for name, key in plan.fields if name in texts]
    encoded = "&".join(pairs).encode()
    query, form = (encoded, None) if plan.in_query else (b"", encoded)
    scope = request_scope(app.origin, defn.method, raw_path, path, query, form, marker)
    try:
        exchange = await send_request(app, scope, form or b"")
    except Exception:
        log.exception("tool call %s (%s %s) raised", defn.id, defn.method, defn.path)
        return _FAILED, scope.get(USER_SCOPE_KEY)
    if exchange.status is None:
        log.error("tool call %s (%s %s): the app sent no response", defn.id, defn.method, defn.path)
        return _FAILED, scope.get(USER_SCOPE_KEY)
    result = Result(exchange.status, Headers(raw=exchange.headers), b"".join(exchange.chunks))
    return result, scope.get(USER_SCOPE_KEY)


_FAILED = Result(500, Headers({"content-type": "text/plain"}), b"Internal Server Error")


def _charset(headers: Headers) -> str:
    for part in headers.get("content-type", "").split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            try:
                return codecs.lookup(value.strip('"')).name
            except LookupError:
                break
    return "utf-8"
