"""Where /mcp takes a token from: the Authorization header alone.

A token in a URL's query string ends up in access logs, proxies' logs and a
browser's history; OAuth 2.1 forbids it (RFC 6750 section 2.3 is dropped), so a
token there, or in a cookie or a form field, is as good as none: 401.
"""

from __future__ import annotations

import httpx
import pytest

from tests.redteam.conftest import HEADERS, Served
from tests.support import TLS

LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@pytest.mark.parametrize("place", ["query", "form", "cookie"])
def test_a_token_anywhere_but_the_authorization_header_is_401(served: Served, place: str) -> None:
    url, token = served.url, served.token
    with httpx.Client(verify=TLS, timeout=30) as http:
        if place == "query":
            answer = http.post(url, params={"access_token": token}, json=LIST, headers=HEADERS)
        elif place == "form":
            form = {**HEADERS, "Content-Type": "application/x-www-form-urlencoded"}
            answer = http.post(url, content=f"access_token={token}", headers=form)
        else:
            answer = http.post(
                url, json=LIST, headers={**HEADERS, "Cookie": f"access_token={token}"}
            )
    assert answer.status_code == 401, answer.text
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    with httpx.Client(verify=TLS, timeout=30) as http:
        good = http.post(url, json=LIST, headers={**HEADERS, "Authorization": f"Bearer {token}"})
    assert good.status_code == 200, good.text
