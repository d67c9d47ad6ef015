"""``GET /api/next-due`` against a real uvicorn server on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

import rastrillo
from rastrillo.sidecar import Sidecar
from rastrillo.sidecar.lease import record_pass
from rastrillo.sidecar.nextdue import bearer_matches
from rastrillo.storage import Database
from rastrillo.testing import ManualClock, live_server
from tests.support import TLS

TOKEN = "s3cret-token-value"
DUE = datetime(2025, 12, 6, 5, 46, 40, 900_000, tzinfo=UTC)  # 1765000000.9


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., httpx.Client]]:
    """The real app (``rastrillo.handler``) with the given options, under uvicorn."""
    with contextlib.ExitStack() as stack:

        def start(**option_fields: Any) -> httpx.Client:
            options = rastrillo.Options(
                app_dir=tmp_path, db=str(tmp_path / "app.db"), **option_fields
            )
            app = stack.enter_context(live_server(options))
            client = stack.enter_context(httpx.Client(verify=TLS, base_url=app.origin))
            client.db = app.db  # type: ignore[attr-defined]
            return client

        yield start


@pytest.fixture(autouse=True)
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARLOS_ADMIN_TOKEN", TOKEN)


def get(client: httpx.Client, authorization: str | None, method: str = "GET") -> httpx.Response:
    headers = {} if authorization is None else {"Authorization": authorization}
    return client.request(method, "/api/next-due", headers=headers)


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer wrong-token",
        f"Bearer {TOKEN[:-1]}",
        f"Bearer {TOKEN}x",
        TOKEN,
        f"Basic {TOKEN}",
        f"Bearer  {TOKEN}",
        "",
        f"Bearer{TOKEN}",
        "Bearer",
    ],
    ids=[
        "none",
        "wrong",
        "prefix",
        "extra-byte",
        "no-scheme",
        "basic",
        "two-spaces",
        "empty",
        "no-space",
        "scheme-only",
    ],
)
def test_a_bad_authorization_is_refused_with_403(
    serve: Callable[..., httpx.Client], authorization: str | None
) -> None:
    response = get(serve(next_due=lambda db: DUE), authorization)
    assert response.status_code == 403
    assert '"due"' not in response.text


@pytest.mark.parametrize("value", [None, ""])
def test_an_unset_or_empty_token_refuses_everything(
    serve: Callable[..., httpx.Client], monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("CARLOS_ADMIN_TOKEN")
    else:
        monkeypatch.setenv("CARLOS_ADMIN_TOKEN", value)
    client = serve(next_due=lambda db: DUE)
    for authorization in (None, "", "Bearer", f"Bearer {TOKEN}"):
        assert get(client, authorization).status_code == 403


def test_the_header_is_matched_exactly_including_whitespace_http_would_strip() -> None:
    assert bearer_matches(f"Bearer {TOKEN}", TOKEN)
    for header in ("Bearer ", f"Bearer {TOKEN} ", f" Bearer {TOKEN}", f"Bearer\t{TOKEN}"):
        assert not bearer_matches(header, TOKEN)
    assert not bearer_matches("Bearer ", "")


def test_the_token_is_read_on_every_request(
    serve: Callable[..., httpx.Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = serve(next_due=lambda db: DUE)
    assert get(client, f"Bearer {TOKEN}").status_code == 200
    monkeypatch.setenv("CARLOS_ADMIN_TOKEN", "rotated")
    assert get(client, f"Bearer {TOKEN}").status_code == 403
    assert get(client, "Bearer rotated").status_code == 200


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "BeArEr"])
def test_the_scheme_in_any_case_with_the_right_token_answers_the_floored_due(
    serve: Callable[..., httpx.Client], scheme: str
) -> None:
    response = get(serve(next_due=lambda db: DUE), f"{scheme} {TOKEN}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"due": 1765000000}


def test_nothing_scheduled_is_0_and_a_past_instant_is_reported_as_it_is(
    serve: Callable[..., httpx.Client],
) -> None:
    assert get(serve(next_due=lambda db: None), f"Bearer {TOKEN}").json() == {"due": 0}
    past = datetime(2001, 9, 9, 1, 46, 40, tzinfo=UTC)
    assert get(serve(next_due=lambda db: past), f"Bearer {TOKEN}").json() == {"due": 1000000000}


def test_an_async_next_due_and_another_zone_are_accepted(
    serve: Callable[..., httpx.Client],
) -> None:
    async def next_due(db: Database) -> datetime:
        await asyncio.sleep(0)
        return DUE.astimezone(ZoneInfo("Europe/Madrid"))

    assert get(serve(next_due=next_due), f"Bearer {TOKEN}").json() == {"due": 1765000000}


@pytest.mark.parametrize(
    "next_due",
    [
        pytest.param(lambda db: 1 / 0, id="raises"),
        pytest.param(lambda db: datetime(2030, 1, 1), id="naive"),
        pytest.param(lambda db: 1765000000, id="wrong-type"),
    ],
)
def test_a_failing_next_due_is_a_5xx_never_0(
    serve: Callable[..., httpx.Client],
    next_due: Callable[[Database], Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, "rastrillo.sidecar")
    response = get(serve(next_due=next_due), f"Bearer {TOKEN}")
    assert response.status_code >= 500
    assert '"due"' not in response.text
    assert any("next-due" in r.getMessage() for r in caplog.records)
    assert TOKEN not in caplog.text


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_only_get_and_head(serve: Callable[..., httpx.Client], method: str) -> None:
    client = serve(next_due=lambda db: DUE)
    assert get(client, f"Bearer {TOKEN}", method).status_code == 405
    head = get(client, f"Bearer {TOKEN}", "HEAD")
    assert head.status_code == 200
    assert head.content == b""


def test_with_only_a_sidecar_it_reports_the_recorded_next_due(
    serve: Callable[..., httpx.Client],
) -> None:
    client = serve(sidecar=Sidecar(pass_fn=lambda ctx: None, name="tickets"))
    record_pass(
        client.db,  # type: ignore[attr-defined]
        "tickets",
        started_at=datetime.now(UTC),
        ok=True,
        consecutive_failures=0,
        next_due=DUE,
    )
    assert get(client, f"Bearer {TOKEN}").json() == {"due": 1765000000}
    assert get(client, "Bearer nope").status_code == 403


def test_a_sidecar_that_has_not_recorded_a_pass_is_due_now_never_0(
    serve: Callable[..., httpx.Client],
) -> None:
    """Its first pass (the catch-up at its start) has not run, or not ended: ``{"due": 0}``
    would let the platform sleep the app before that pass ever ran. The pass is due now,
    and the answer says so until one is recorded."""
    clock = ManualClock(DUE)
    client = serve(sidecar=Sidecar(pass_fn=lambda ctx: None, name="tickets"), clock=clock)
    assert get(client, f"Bearer {TOKEN}").json() == {"due": 1765000000}
    clock.advance(60)
    assert get(client, f"Bearer {TOKEN}").json() == {"due": 1765000060}
    record_pass(
        client.db,  # type: ignore[attr-defined]
        "tickets",
        started_at=DUE,
        ok=True,
        consecutive_failures=0,
        next_due=None,
    )
    assert get(client, f"Bearer {TOKEN}").json() == {"due": 0}  # its pass said: nothing


def test_next_due_wins_over_the_sidecar_record(serve: Callable[..., httpx.Client]) -> None:
    later = DUE + timedelta(days=1)
    client = serve(sidecar=lambda ctx: None, next_due=lambda db: later)
    assert get(client, f"Bearer {TOKEN}").json() == {"due": 1765086400}


def test_without_next_due_or_a_sidecar_it_is_404(serve: Callable[..., httpx.Client]) -> None:
    assert get(serve(), f"Bearer {TOKEN}").status_code == 404


def _two_args(db: Any, now: Any) -> None:
    return None


async def _no_args() -> None:
    return None


def _keyword_only(*, db: Any) -> None:
    return None


@pytest.mark.parametrize(
    "provider",
    [_two_args, _no_args, _keyword_only, "tomorrow", lambda: None],
    ids=["two args", "no args", "keyword only", "a string", "a lambda without args"],
)
def test_a_next_due_that_cannot_take_the_database_is_refused_when_the_app_is_built(
    tmp_path: Path, provider: Any
) -> None:
    options = rastrillo.Options(app_dir=tmp_path, db=str(tmp_path / "app.db"), next_due=provider)
    with pytest.raises(rastrillo.ConfigError) as refused:
        rastrillo.handler(options)
    message = str(refused.value)
    assert "Options.next_due takes one argument, the database" in message
    assert "def next_due(db)" in message


def test_a_next_due_with_extra_defaults_or_a_callable_object_is_accepted(
    serve: Callable[..., httpx.Client],
) -> None:
    class Provider:
        def __call__(self, db: Database, *, zone: str = "UTC") -> datetime:
            return DUE

    def with_default(db: Database, later: bool = False) -> datetime:
        return DUE

    for provider in (Provider(), with_default):
        assert get(serve(next_due=provider), f"Bearer {TOKEN}").json() == {"due": 1765000000}
