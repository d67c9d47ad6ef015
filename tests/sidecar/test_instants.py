"""Whatever instant a pass returns, the loop lives on and what it records can be read back."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime, timedelta, timezone

import httpx
import pytest

import rastrillo
from rastrillo.sidecar import PassContext, SidecarLoop, read_state
from rastrillo.storage import Database
from rastrillo.testing import live_server
from tests.support import TLS

MAX_UTC = datetime.max.replace(tzinfo=UTC)
TOKEN = "platform-token"


def one_pass(db: Database, returned: object) -> int:
    """Run the loop for exactly one pass that returns ``returned``; its exit code."""

    def pass_fn(ctx: PassContext) -> object:
        return returned

    async def stop(seconds: float, wake: asyncio.Event) -> None:
        wake.set()

    return asyncio.run(SidecarLoop(pass_fn, db=db, sleeper=stop).run(handle_signals=False))


@pytest.mark.parametrize(
    "returned",
    [
        pytest.param(datetime.max.replace(tzinfo=timezone(-timedelta(hours=1))), id="max-at-utc-1"),
        pytest.param(datetime.min.replace(tzinfo=timezone(timedelta(hours=1))), id="min-at-utc+1"),
    ],
)
def test_an_instant_outside_the_utc_years_is_a_failed_pass_not_a_dead_loop(
    db_url: str, returned: datetime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "rastrillo.sidecar")
    db = Database(db_url)
    db.open()
    assert one_pass(db, returned) == 0
    state = read_state(db)
    assert state is not None
    assert (state.outcome, state.consecutive_failures) == ("error", 1)
    # The sidecar's own errors: another test's garbage (an asyncio future whose exception
    # no one read, say) may be collected, and logged, while this test runs.
    errors = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.ERROR and r.name == "rastrillo.sidecar"
    ]
    assert len(errors) == 1
    assert "outside the years 1-9999 in UTC" in errors[0]
    assert "consecutive_failures=1" in errors[0]
    db.dispose()


def test_the_latest_utc_instant_is_recorded_and_read_back_and_served(
    db_url: str, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARLOS_ADMIN_TOKEN", TOKEN)
    db = Database(db_url)
    db.open()
    assert one_pass(db, MAX_UTC) == 0
    state = read_state(db)
    assert state is not None
    assert (state.outcome, state.next_due) == ("ok", MAX_UTC)
    options = rastrillo.Options(app_dir=tmp_path, db=db_url, sidecar=lambda ctx: None)
    with live_server(options) as app, httpx.Client(verify=TLS, base_url=app.origin) as client:
        response = client.get("/api/next-due", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    assert response.json() == {"due": 253402300799}
    with contextlib.suppress(Exception):
        db.dispose()
