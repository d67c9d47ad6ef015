"""Buying as an agent: the approved sentence says exactly what is held."""

from pathlib import Path

import pytest

from rastrillo.testing import TestApp
from rastrillo.tools import BadArg

APP_DIR = Path(__file__).resolve().parent.parent
BUY = "events_id_buy_post"


def test_an_approved_purchase_holds_the_quantity_the_sentence_says(tmp_path):
    app = TestApp(APP_DIR, tmp_path)
    agent = app.agent("concierge", user_id=1)
    pending = agent.needs_confirmation(
        BUY, {"id": "2", "quantity": 3}, sentence="Buy 3 ticket(s) for event 2?"
    )
    agent.approve(pending)
    result = agent.call(BUY, {"id": "2", "quantity": 3}, approval=pending)
    assert result.status == 201 and result.json()["order"]["quantity"] == 3


# Each reads as something else than what int() makes of it: 10, 10, 10, 10, 1, 1. The
# quantity is declared an integer: text is refused before anything is asked or held.
@pytest.mark.parametrize("quantity", ["1\u0660", "1_0", "\uff11\uff10", "1\u06f0", " 1", "+1", "3"])
def test_a_quantity_that_is_not_an_integer_is_refused(tmp_path, quantity):
    app = TestApp(APP_DIR, tmp_path)
    agent = app.agent("concierge", user_id=1)
    with pytest.raises(BadArg, match="'quantity': must be an integer from 1 to 10, not the string"):
        agent.call(BUY, {"id": "2", "quantity": quantity})
    assert app.db.query_one("SELECT COUNT(*) AS n FROM rastrillo_approvals").n == 0
    app.sign_in(app.client, 1)
    page = app.client.post("/events/2/buy", data={"quantity": quantity}, follow_redirects=False)
    assert page.status_code == (303 if quantity == "3" else 400)
    assert app.db.query_one(
        "SELECT COUNT(*) AS n FROM orders WHERE user_id = 1 AND event_id = 2 AND status = 'held'"
    ).n == (1 if quantity == "3" else 0)


@pytest.mark.parametrize("event", ["2\u0660", "1_0", "\uff12"])
def test_an_event_id_that_is_not_plain_ascii_digits_is_no_event(tmp_path, event):
    app = TestApp(APP_DIR, tmp_path)
    assert app.client.get(f"/events/{event}").status_code == 404
