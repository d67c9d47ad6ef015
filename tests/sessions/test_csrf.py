"""CSRF over a real server: every combination of the three headers, Host spoofing, markers."""

from __future__ import annotations

import itertools
import logging

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from starlette.datastructures import Headers

from rastrillo import Actor, visible
from rastrillo.app import App
from rastrillo.context import TOOL_CALL_SCOPE_KEY, ToolCallMarker
from rastrillo.csrf import canonical_origin, refusal
from rastrillo.errors import ConfigError
from tests.support import TLS

FOREIGN = "https://evil.example"
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")
FETCH_SITES = [None, "same-origin", "none", "same-site", "cross-site"]
ORIGINS = [None, "same", "foreign", "null"]
REFERERS = [None, "same", "foreign"]


def headers_for(app: App, fetch: str | None, origin: str | None, referer: str | None) -> dict:
    values = {"same": app.origin, "foreign": FOREIGN, "null": "null"}
    headers = {}
    if fetch is not None:
        headers["Sec-Fetch-Site"] = fetch
    if origin is not None:
        headers["Origin"] = values[origin]
    if referer is not None:
        headers["Referer"] = values[referer] + "/events/1"
    return headers


def allowed(fetch: str | None, origin: str | None, referer: str | None) -> bool:
    """The rule CSRFMiddleware keeps: the first header present decides; none refuses."""
    if fetch is not None:
        return fetch in ("same-origin", "none")
    if origin is not None:
        return origin == "same"
    return referer == "same"


def test_every_combination_of_the_three_headers(app: App) -> None:
    with httpx.Client(verify=TLS, base_url=app.origin) as client:
        for fetch, origin, referer in itertools.product(FETCH_SITES, ORIGINS, REFERERS):
            headers = headers_for(app, fetch, origin, referer)
            for method in UNSAFE:
                response = client.request(method, "/change", headers=headers)
                expected = 200 if allowed(fetch, origin, referer) else 403
                assert response.status_code == expected, (method, headers, response.text)


def test_safe_methods_pass_whatever_the_headers(app: App) -> None:
    hostile = {"Sec-Fetch-Site": "cross-site", "Origin": FOREIGN, "Referer": FOREIGN + "/"}
    with httpx.Client(verify=TLS, base_url=app.origin, headers=hostile) as client:
        assert client.get("/").status_code == 200
        assert client.head("/").status_code == 200


def test_refusal_is_a_short_plain_403_and_logged(app: App, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="rastrillo.csrf"):
        response = httpx.post(app.origin + "/change", headers={"Origin": FOREIGN}, verify=TLS)
    assert response.status_code == 403
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "Cross-site request refused."
    assert any("CSRF refused POST '/change'" in r.getMessage() for r in caplog.records)


def test_a_refusals_log_line_shows_a_hostile_client_address_escaped_on_one_line(
    app: App, caplog
) -> None:
    """The client address is what a proxy on this host says (X-Forwarded-For), so any
    byte HTTP allows in a header: C1 controls (CSI drives a terminal, NEL breaks a line)
    must reach the log escaped, as the path and the reason do."""
    forged = b"\x9b2J\x85CSRF allowed POST '/change' from 10.0.0.1"
    with caplog.at_level(logging.WARNING, logger="rastrillo.csrf"):
        response = httpx.post(
            app.origin + "/change",
            headers={"Origin": FOREIGN, "X-Forwarded-For": forged},
            verify=TLS,
        )
    assert response.status_code == 403
    [line] = [r.getMessage() for r in caplog.records if r.name == "rastrillo.csrf"]
    # %r: escaped and quoted by repr in any logging (caplog has none of the framework's)
    assert line.startswith("CSRF refused POST '/change' from \"\\x9b2J\\x85CSRF allowed")
    assert len(line.splitlines()) == 1
    assert not any(visible.is_hidden(c) for c in line)


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:80", "127.0.0.1", "localhost:1", "EVIL"]
)
def test_a_spoofed_host_cannot_make_a_foreign_origin_look_same_origin(app: App, host) -> None:
    with httpx.Client(verify=TLS, base_url=app.origin) as client:
        for origin in (f"http://{host}", f"https://{host}"):
            headers = {"Host": host, "Origin": origin, "Referer": origin + "/"}
            assert client.post("/change", headers=headers).status_code == 403
        # The app's own origin passes whatever Host says: Host is never consulted.
        assert (
            client.post("/change", headers={"Host": host, "Origin": app.origin}).status_code == 200
        )


@pytest.mark.parametrize(
    "spoof",
    [
        {"headers": {"rastrillo.tool_call": "1"}},
        {"headers": {"X-Rastrillo-Tool-Call": "1", "rastrillo-tool-call": "yes"}},
        {"headers": {"Cookie": "rastrillo.tool_call=1; rastrillo_tool_call=1"}},
        {"data": {"rastrillo.tool_call": "1", "tool_call": "1"}},
        {"params": {"rastrillo.tool_call": "1"}},
    ],
)
def test_nothing_a_client_sends_imitates_the_tool_call_marker(app: App, spoof) -> None:
    with httpx.Client(verify=TLS, base_url=app.origin) as client:
        assert client.post("/change", **spoof).status_code == 403


def test_the_in_process_marker_and_only_it_passes(app: App) -> None:
    foreign = [(b"origin", FOREIGN.encode())]
    marker = ToolCallMarker(Actor.agent("concierge"))
    assert anyio.run(_asgi_post, app, foreign, marker) == 200
    assert anyio.run(_asgi_post, app, foreign, None) == 403


NEAR_ORIGINS = ["{o}/", "{O}", "{o}:80", "{o}.evil.example", "{o}@evil.example", "{o}0", "{s}"]
NEAR_REFERERS = ["{o}", "{o}.evil.example/", "{o}@evil.example/", "{o}0/", "{s}/", "{O}/"]


def _near(template: str, origin: str) -> str:
    return template.format(o=origin, O=origin.upper(), s=origin.replace("http:", "https:"))


def test_near_misses_of_the_origin_are_foreign(app: App) -> None:
    with httpx.Client(verify=TLS, base_url=app.origin) as client:
        for template in NEAR_ORIGINS:
            origin = _near(template, app.origin)
            assert client.post("/change", headers={"Origin": origin}).status_code == 403, origin
        for template in NEAR_REFERERS:
            referer = _near(template, app.origin)
            assert client.post("/change", headers={"Referer": referer}).status_code == 403, referer


@pytest.mark.parametrize("value", [" {o}", "{o} ", "{o}, https://evil.example", "{o}\t"])
def test_padded_or_listed_origins_are_foreign(value: str) -> None:
    origin = value.format(o=APP_ORIGIN)
    assert refusal("POST", Headers({"origin": origin}), APP_ORIGIN) is not None


def test_a_repeated_header_is_refused(app: App) -> None:
    with httpx.Client(verify=TLS, base_url=app.origin) as client:
        twice = [("Origin", app.origin), ("Origin", FOREIGN)]
        assert client.post("/change", headers=twice).status_code == 403
        twice = [("Sec-Fetch-Site", "same-origin"), ("Sec-Fetch-Site", "cross-site")]
        assert client.post("/change", headers=twice).status_code == 403


@pytest.mark.parametrize(
    ("given_origin", "canonical"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("HTTPS://Tickets.Example:443/", "https://tickets.example"),
        ("http://example.com:80", "http://example.com"),
        ("http://[::1]:8000", "http://[::1]:8000"),
    ],
)
def test_canonical_origin(given_origin: str, canonical: str) -> None:
    assert canonical_origin(given_origin) == canonical


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "null",
        "ftp://x",
        "http://",
        "http://a/b",
        "http://u@a",
        "http://a:99999",
        "a.b",
        # Hosts no browser sends: it would send xn--tckets-3va.example, and nothing invisible.
        "https://tíckets.example",
        "https://tickets\u200b.example",
        "http://[zz::1]:80",
        "http://a b.example",
    ],
)
def test_a_bad_configured_origin_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError):
        canonical_origin(bad)


# Hypothesis: no foreign origin is ever let through.

APP_ORIGIN = "http://127.0.0.1:8000"
_look_alikes = st.sampled_from(
    [APP_ORIGIN, "http://127.0.0.1", "https://127.0.0.1:8000", "http://localhost:8000", "null"]
)
header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40)
origin_like = st.one_of(
    header_text,
    st.builds(lambda a, b, c: a + b + c, header_text, _look_alikes, header_text),
    st.builds(
        lambda a, b: a + b, _look_alikes, st.sampled_from(["/", ".evil", "@evil", ":1", "0", ""])
    ),
)
fetch_site = st.one_of(
    st.sampled_from(["same-origin", "none", "same-site", "cross-site", "SAME-ORIGIN"]), header_text
)


def _is_app_referer(value: str) -> bool:
    return value.startswith(APP_ORIGIN + "/")


# Built once: a strategy made inside a draw is made again for every example, and hypothesis
# works out anew whether each such filtered strategy can produce anything at all.
_deciders = st.sampled_from(["sec-fetch-site", "origin", "referer", "nothing"])
_foreign = {
    "sec-fetch-site": fetch_site.filter(lambda v: v not in ("same-origin", "none")),
    "origin": origin_like.filter(lambda v: v != APP_ORIGIN),
    "referer": origin_like.filter(lambda v: not _is_app_referer(v)),
}


@st.composite
def foreign_requests(draw: st.DrawFn) -> dict[str, str]:
    """Headers whose deciding header (the first present) does not vouch for the app's origin."""
    headers: dict[str, str] = {}
    decider = draw(_deciders)
    if decider != "nothing":
        headers[decider] = draw(_foreign[decider])
    # Later headers never rescue a foreign decider, whatever they say.
    order = ["sec-fetch-site", "origin", "referer"]
    later = order[order.index(decider) + 1 :] if decider != "nothing" else []
    for name in later:
        if draw(st.booleans()):
            headers[name] = APP_ORIGIN if name == "origin" else APP_ORIGIN + "/ok"
    return headers


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(UNSAFE), foreign_requests(), header_text)
def test_property_no_foreign_origin_passes_the_check(method, headers, host) -> None:
    headers = {**headers, "host": host}
    assert refusal(method, Headers(headers), APP_ORIGIN) is not None


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(UNSAFE),
    st.one_of(st.none(), fetch_site),
    st.one_of(st.none(), origin_like),
    st.one_of(st.none(), origin_like),
)
def test_property_a_pass_always_has_a_same_origin_decider(method, fetch, origin, referer) -> None:
    raw = {"sec-fetch-site": fetch, "origin": origin, "referer": referer}
    headers = Headers({k: v for k, v in raw.items() if v is not None})
    if refusal(method, headers, APP_ORIGIN) is None:
        decider = next((k for k, v in raw.items() if v is not None), None)
        assert decider is not None
        value = raw[decider]
        assert (
            value in ("same-origin", "none")
            if decider == "sec-fetch-site"
            else value == APP_ORIGIN
            if decider == "origin"
            else _is_app_referer(value)
        )


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.sampled_from(UNSAFE), foreign_requests())
def test_property_in_process_app_refuses_foreign_requests(app: App, method, headers) -> None:
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    raw = [(k, v.replace(b"127.0.0.1:8000", app.origin.split("//")[1].encode())) for k, v in raw]
    assert anyio.run(_asgi_post, app, raw, None, method) == 403


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.sampled_from(UNSAFE), foreign_requests())
def test_property_real_server_refuses_foreign_requests(app: App, method, headers) -> None:
    sent = {k: v.replace(APP_ORIGIN, app.origin) for k, v in headers.items()}
    assume(all(v and v == v.strip() for v in sent.values()))  # what HTTP can carry
    response = httpx.request(method, app.origin + "/change", headers=sent, verify=TLS)
    assert response.status_code == 403


async def _asgi_post(app: App, headers: list, marker: object | None, method: str = "POST") -> int:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": "/change",
        "raw_path": b"/change",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    if marker is not None:
        scope[TOOL_CALL_SCOPE_KEY] = marker
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"]
