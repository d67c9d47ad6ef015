"""A granted MCP client's body is held to ``Options.max_body`` as a form's is (docs/app.md).

The SDK's transport reads a POST's whole body into memory before it parses it; a
client holding any token could make the server hold a gigabyte per request.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx

from rastrillo.limits import DEFAULT_MAX_BODY
from tests.redteam.conftest import HEADERS, Served
from tests.support import TLS


def padded_call(size: int) -> bytes:
    """One ``tools/list`` whose ``params._meta`` pads the JSON to ``size`` bytes."""
    head = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"pad":"'
    tail = b'"}}}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def post(served: Served, content: bytes | Iterator[bytes]) -> httpx.Response:
    headers = {**HEADERS, "Authorization": f"Bearer {served.token}"}
    with httpx.Client(verify=TLS, timeout=30) as http:
        return http.post(served.url, content=content, headers=headers)


def test_a_declared_body_over_max_body_is_413(served: Served) -> None:
    answer = post(served, padded_call(DEFAULT_MAX_BODY + 1))
    assert answer.status_code == 413, answer.text
    assert answer.text == f"Request body too large: at most {DEFAULT_MAX_BODY} bytes here."


def test_a_chunked_body_over_max_body_is_413(served: Served) -> None:
    body = padded_call(DEFAULT_MAX_BODY + 1)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    answer = post(served, chunks())
    assert answer.status_code == 413, answer.text


def test_a_body_at_max_body_is_answered(served: Served) -> None:
    answer = post(served, padded_call(DEFAULT_MAX_BODY))
    assert answer.status_code == 200, answer.text
    assert {t["name"] for t in answer.json()["result"]["tools"]} >= {"notes_get"}
