"""A hostile web page spends the OAuth endpoints' limits from the person's own browser.

On a developer's machine every page their browser opens reaches the app from 127.0.0.1,
the address the MCP client on the same machine comes from. A page on another port of
that host registers clients (a ``no-cors`` POST with a ``text/plain`` body, then CORS
requests as a browser-based client makes them) and loads the authorize endpoint as
images, many times over; the person's real client, and a browser-based client on another
origin, must still register and be sent to the consent page.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import httpx
import pytest
from sqlalchemy import func, select

from rastrillo.agents import oauth
from rastrillo.agents.tables import clients_table
from rastrillo.app import App
from rastrillo.routing import CONSENT_PATH, OAUTH_AUTHORIZE_PATH, OAUTH_REGISTER_PATH
from tests.browser.hostile import hostile_site
from tests.support import TLS

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

REDIRECT = "http://127.0.0.1:9/cb"
CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuKZWMnvkPc"
TRIES = 25
"""Past the registrations one origin may make in an hour, each of the two ways a page sends them."""
IMAGES = oauth.AUTHORIZATIONS_PER_CLIENT + 10


def authorize_query(client_id: str) -> str:
    return urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT,
            "code_challenge": CHALLENGE,
            "code_challenge_method": "S256",
        }
    )


def hostile_script(app: App) -> str:
    """Registers every way a page can, then loads authorize as images: for its own client
    (when a registration let it read the client id) and for a client that does not exist.
    Sets ``window.done`` to what it could read of the answers."""
    register = json.dumps(app.origin + OAUTH_REGISTER_PATH)
    authorize = json.dumps(app.origin + OAUTH_AUTHORIZE_PATH + "?")
    body = json.dumps(json.dumps({"redirect_uris": [REDIRECT], "client_name": "Hostile"}))
    return f"""<!doctype html><title>Cute cats</title><script>
    (async () => {{
      const cors = [];
      let own = null;
      for (let i = 0; i < {TRIES}; i++) {{
        await fetch({register}, {{method: "POST", mode: "no-cors", body: {body},
                                 headers: {{"Content-Type": "text/plain"}}}});
      }}
      for (let i = 0; i < {TRIES}; i++) {{
        const answer = await fetch({register}, {{method: "POST", body: {body},
                                              headers: {{"Content-Type": "application/json"}}}});
        cors.push(answer.status);
        if (answer.status === 201) own = (await answer.json()).client_id;
      }}
      const load = (query) => new Promise((done) => {{
        const image = new Image();
        image.onload = image.onerror = done;
        image.src = {authorize} + query;
      }});
      const queries = {json.dumps(authorize_query("CLIENT"))};
      const ids = [own, "00000000-0000-4000-8000-000000000000"].filter(Boolean);
      for (const id of ids) {{
        for (let i = 0; i < {IMAGES}; i++) await load(queries.replace("CLIENT", id));
      }}
      window.done = {{cors, own}};
    }})();
    </script>"""


def browser_registration(origin: str) -> str:
    """A browser-based MCP client (the MCP Inspector, say): a CORS registration from its
    own origin. Sets ``window.done`` to the answer's status."""
    body = json.dumps(json.dumps({"redirect_uris": [REDIRECT], "client_name": "Inspector"}))
    return f"""<!doctype html><title>Inspector</title><script>
    fetch({json.dumps(origin + OAUTH_REGISTER_PATH)}, {{method: "POST", body: {body},
          headers: {{"Content-Type": "application/json"}}}})
      .then((answer) => {{ window.done = answer.status; }});
    </script>"""


def run(page: Page, html: str) -> object:
    with hostile_site(html) as site:
        page.goto(site)
        return page.wait_for_function("window.done", timeout=60_000).json_value()


def stored_clients(app: App) -> int:
    with app.db.read() as conn:
        return conn.execute(select(func.count()).select_from(clients_table)).scalar_one()


def test_a_page_cannot_spend_the_limits_of_the_persons_own_clients(
    app: App, person: Callable[..., Page]
):
    spent = run(person(scripts=True), hostile_script(app))
    assert isinstance(spent, dict)

    # The person's MCP client, a program on the same machine, registers and is sent to the
    # consent page as if the page had never run.
    with httpx.Client(verify=TLS, base_url=app.origin) as client:
        registered = client.post(
            OAUTH_REGISTER_PATH, json={"redirect_uris": [REDIRECT], "client_name": "Claude"}
        )
        assert registered.status_code == 201, registered.text
        client_id = registered.json()["client_id"]
        asked = client.get(f"{OAUTH_AUTHORIZE_PATH}?{authorize_query(client_id)}")
        assert asked.status_code == 302, asked.text
        assert asked.headers["location"].startswith(app.origin + CONSENT_PATH)

    # The page got its own origin's allowance, and no more.
    limit = oauth.REGISTRATIONS_PER_ORIGIN
    assert spent["cors"] == [201] * limit + [429] * (TRIES - limit)
    assert stored_clients(app) == limit + 1  # the no-cors POSTs stored nothing

    with httpx.Client(verify=TLS, base_url=app.origin) as client:
        # The page's own client used up its own authorizations, and nobody else's.
        spent_own = client.get(f"{OAUTH_AUTHORIZE_PATH}?{authorize_query(spent['own'])}")
        assert spent_own.status_code == 429

    # A browser-based client on another origin registers too.
    assert run(person(scripts=True), browser_registration(app.origin)) == 201
