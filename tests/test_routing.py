"""Filesystem routing: file → route, and matching on raw path segments."""

import functools
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rastrillo.errors import RastrilloError
from rastrillo.router import Match, Router
from rastrillo.routing import (
    Route,
    RouteFileError,
    fill_path,
    param_name,
    path_params,
    route_for_file,
    route_shape,
)


@pytest.mark.parametrize(
    ("file", "method", "path"),
    [
        ("index.GET.py", "GET", "/"),
        ("orders/index.GET.py", "GET", "/orders"),
        ("orders/[id].GET.py", "GET", "/orders/{id}"),
        ("orders/[id]/cancel.POST.py", "POST", "/orders/{id}/cancel"),
        ("a/b/c.PUT.py", "PUT", "/a/b/c"),
        ("items/[item_id]/index.PATCH.py", "PATCH", "/items/{item_id}"),
        ("x.DELETE.py", "DELETE", "/x"),
        ("my-page.GET.py", "GET", "/my-page"),
    ],
)
def test_file_to_route(file, method, path):
    assert route_for_file(file) == (method, path)


@pytest.mark.parametrize(
    ("file", "message"),
    [
        ("orders.FETCH.py", "bad method"),
        ("orders.get.py", "bad method"),
        ("helpers.py", "<name>.<METHOD>.py"),
        ("[]/x.GET.py", "empty parameter"),
        ("[].GET.py", "empty parameter"),
        ("[a-b].GET.py", "bad parameter name"),
        ("[id]/[id].GET.py", "appears twice"),
        ("a[b.GET.py", "bad path segment"),
        ("[id]\n/x.GET.py", "bad path segment"),  # a name is matched whole, never up to a \n
        ("[id]\n.GET.py", "bad path segment"),
    ],
)
def test_bad_files_are_named(file, message):
    with pytest.raises(RouteFileError, match=message.replace("[", r"\[").replace(".", r"\.")):
        route_for_file(file)


def _router(*specs: tuple[str, str]) -> Router:
    return Router([Route(m, p, f"actions{p}.{m}.py", lambda ctx: None) for m, p in specs])


def test_root_matches_only_root():
    router = _router(("GET", "/"))
    assert isinstance(router.match("GET", "/"), Match)
    assert router.match("GET", "/anything") is None
    assert router.match("GET", "/a/b") is None


def test_encoded_slash_is_one_segment_and_decoded_after_matching():
    router = _router(("GET", "/orders/{id}"), ("GET", "/orders/{id}/cancel"))
    found = router.match("GET", "/orders/a%2Fb")
    assert isinstance(found, Match)
    assert found.route.path == "/orders/{id}"
    assert found.params == {"id": "a/b"}
    found = router.match("GET", "/orders/a%2Fcancel")
    assert isinstance(found, Match) and found.params == {"id": "a/cancel"}


def test_literal_segment_wins_over_parameter():
    router = _router(("GET", "/orders/{id}"), ("GET", "/orders/new"))
    assert router.match("GET", "/orders/new").route.path == "/orders/new"
    assert router.match("GET", "/orders/7").route.path == "/orders/{id}"


def test_a_tool_call_reaches_its_own_route_with_its_own_params_never_a_sibling():
    router = _router(("GET", "/notes/{id}"), ("GET", "/notes/export"), ("GET", "/notes"))
    found = router.match_route("GET", "/notes/{id}", {"id": "export"})
    assert isinstance(found, Match)
    assert found.route.path == "/notes/{id}" and found.params == {"id": "export"}
    assert router.match_route("HEAD", "/notes", {}).route.path == "/notes"
    # Fails closed: params that are not exactly the route's, an empty value, no such route.
    assert router.match_route("GET", "/notes/{id}", {}) is None
    assert router.match_route("GET", "/notes/{id}", {"id": ""}) is None
    assert router.match_route("GET", "/notes/{id}", {"other": "1"}) is None
    assert router.match_route("GET", "/notes/{id}", {"id": "1", "x": "2"}) is None
    assert router.match_route("GET", "/notes", {"id": "1"}) is None
    assert router.match_route("POST", "/notes/{id}", {"id": "1"}) is None


def test_wrong_method_lists_the_allowed_ones():
    router = _router(("GET", "/orders/{id}"), ("DELETE", "/orders/{id}"))
    assert router.match("POST", "/orders/1") is None
    assert router.allowed_methods("/orders/1") == ["DELETE", "GET"]
    assert router.allowed_methods("/nowhere") == []
    assert isinstance(router.match("HEAD", "/orders/1"), Match)


def test_empty_segments_and_relative_paths_do_not_match():
    router = _router(("GET", "/orders/{id}"), ("GET", "/orders"))
    assert router.match("GET", "/orders//") is None
    assert router.match("GET", "//orders") is None
    assert router.match("GET", "orders") is None
    assert isinstance(router.match("GET", "/orders/"), Match)


def test_same_route_twice_is_refused():
    with pytest.raises(RastrilloError, match=r"two routes for GET /a/\{y\}"):
        _router(("GET", "/a/{x}"), ("GET", "/a/{y}"))


@given(st.text(min_size=1, max_size=40))
def test_any_single_segment_value_round_trips(value):
    from urllib.parse import quote

    router = _router(("GET", "/orders/{id}"), ("GET", "/orders/{id}/cancel"))
    found = router.match("GET", "/orders/" + quote(value, safe=""))
    assert isinstance(found, Match)
    assert found.route.path == "/orders/{id}"
    assert found.params == {"id": value}


_ROUTE_TEXT = st.text(alphabet="ab{}/%\n", max_size=24)


@given(_ROUTE_TEXT.filter(lambda text: "/" not in text))
def test_a_segment_is_a_parameter_when_it_is_in_braces(segment):
    in_braces = len(segment) > 1 and segment[0] == "{" and segment[-1] == "}"
    assert param_name(segment) == (segment[1:-1] if in_braces else None)


@given(_ROUTE_TEXT)
def test_a_whole_path_reads_each_segment_as_the_segment_alone_reads(path):
    """`path_params`, `route_shape` and `fill_path` read a path in one pass; each segment is
    a parameter exactly when `param_name` reads it as one, under the same name."""
    segments = path.split("/")
    names = [param_name(segment) for segment in segments]
    assert path_params(path) == [name for name in names if name is not None]
    shape = ["{}" if name is not None else s for s, name in zip(segments, names, strict=True)]
    assert route_shape(path) == "/".join(shape)
    values = {name: f"<{name}/>" for name in names if name is not None}
    filled = [
        s if n is None else quote(values[n], safe="") for s, n in zip(segments, names, strict=True)
    ]
    assert fill_path(path, values) == "/".join(filled)


class _AsyncHandle:
    """A handle that is an object with ``async def __call__``."""

    async def __call__(self, ctx):
        return ctx.text(f"async object for {ctx.user_id}")


def test_a_handle_object_with_async_call_is_awaited_guarded_or_not(tmp_path):
    from starlette.testclient import TestClient

    import rastrillo
    from rastrillo.sessions import create_session, require

    guarded = require(_AsyncHandle())
    options = rastrillo.Options(
        app_dir=tmp_path,
        db=str(tmp_path / "app.db"),
        origin="http://testserver",
        routes=[
            Route("GET", "/open", "open", _AsyncHandle()),
            Route("GET", "/guarded", "guarded", guarded),
            Route("GET", "/partial", "partial", functools.partial(_AsyncHandle().__call__)),
        ],
    )
    app = rastrillo.handler(options)
    client = TestClient(app, base_url="http://testserver")
    assert client.get("/open").text == "async object for None"
    assert client.get("/partial").text == "async object for None"
    assert client.get("/guarded", follow_redirects=False).status_code == 303
    client.cookies.set("rastrillo_session", create_session(app.db, "5"))
    assert client.get("/guarded").text == "async object for 5"
