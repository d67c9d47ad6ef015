"""Request bodies against a real uvicorn server on loopback: the size limit is enforced
before a byte is read, CSRF and the session are checked before a body is parsed, and the
form parser's own limits are the client's 4xx, never a 500."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rastrillo.sessions import cookie_name, create_session
from rastrillo.storage import Database
from tests.support import Server, write_app

ACTIONS = {
    "echo.POST.py": """
        def handle(ctx):
            return ctx.text(f"{len(ctx.form)} fields, {sum(map(len, ctx.form.values()))} bytes")
    """,
    "raw.POST.py": """
        async def handle(ctx):
            return ctx.text(f"{len(await ctx.request.body())} bytes")
    """,
    "upload.POST.py": """
        import rastrillo

        @rastrillo.body_limit(8 * 1024 * 1024)
        def handle(ctx):
            return ctx.text(f"{sum(map(len, ctx.form.values()))} bytes")
    """,
    "mine.POST.py": """
        from rastrillo import sessions

        @sessions.require
        def handle(ctx):
            return ctx.text(f"{len(ctx.form)} fields for {ctx.user_id}")
    """,
}
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    from tests.support import free_port

    app_dir = write_app(tmp_path_factory.mktemp("limits") / "app", ACTIONS)
    port = free_port()
    served = Server(app_dir, ["--addr", f"127.0.0.1:{port}"], f"http://127.0.0.1:{port}")
    yield served
    assert served.stop() == 0
    log = served.log.read_text()
    assert "Traceback" not in log, log


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client(headers={"Origin": server.base_url}, timeout=10) as c:
        yield c


def raw_request(server: Server, head: str) -> bytes:
    """Send only a request's head (no body) and return the answer the server gives anyway."""
    port = int(server.base_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.replace("\n", "\r\n").encode() + b"\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
        return answer


def form(fields: int, size: int) -> str:
    value = "x" * (size // fields)
    return "&".join(f"f{i}={value}" for i in range(fields))


def test_a_form_under_the_limit_is_read(client: httpx.Client) -> None:
    body = form(64, MIB // 2)
    response = client.post("/echo", content=body, headers=FORM)
    assert response.text == f"64 fields, {MIB // 2} bytes"


FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def test_a_declared_body_over_the_limit_is_refused_before_it_is_sent(server: Server) -> None:
    answer = raw_request(
        server,
        f"POST /echo HTTP/1.1\nHost: x\nOrigin: {server.base_url}\n"
        f"Content-Type: application/x-www-form-urlencoded\nContent-Length: {100 * MIB}\n",
    )
    assert answer.startswith(b"HTTP/1.1 413 ")


@pytest.mark.parametrize("path", ["/echo", "/raw"])
def test_a_chunked_body_over_the_limit_is_refused(client: httpx.Client, path: str) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(3):
            yield b"f=" + b"x" * (MIB // 2)

    response = client.post(path, content=chunks(), headers=FORM)
    assert response.status_code == 413


def test_an_action_opts_in_to_a_bigger_body(client: httpx.Client) -> None:
    response = client.post("/upload", content=form(4, 6 * MIB), headers=FORM)
    assert response.text == f"{6 * MIB} bytes"
    assert client.post("/upload", content=form(4, 9 * MIB), headers=FORM).status_code == 413
    assert client.post("/echo", content=form(4, 2 * MIB), headers=FORM).status_code == 413


def test_csrf_is_checked_before_the_body_is_read(server: Server) -> None:
    answer = raw_request(
        server,
        "POST /upload HTTP/1.1\nHost: x\nOrigin: http://evil.example\n"
        f"Content-Type: application/x-www-form-urlencoded\nContent-Length: {4 * MIB}\n",
    )
    assert answer.startswith(b"HTTP/1.1 403 ")


def test_the_session_is_checked_before_the_body_is_read(server: Server) -> None:
    answer = raw_request(
        server,
        f"POST /mine HTTP/1.1\nHost: x\nOrigin: {server.base_url}\n"
        f"Content-Type: application/x-www-form-urlencoded\nContent-Length: {MIB // 2}\n",
    )
    assert answer.startswith(b"HTTP/1.1 403 ")


def test_a_signed_in_user_s_form_is_read(server: Server, client: httpx.Client) -> None:
    db = Database(str(Path(server.log).parent / "app.db"))
    try:
        session = create_session(db, "7")
    finally:
        db.dispose()
    client.cookies.set(cookie_name(server.base_url), session)
    assert client.post("/mine", data={"a": "1", "b": "2"}).text == "2 fields for 7"


@pytest.mark.parametrize(
    ("body", "boundary"),
    [
        (
            "".join(
                f'--b\r\nContent-Disposition: form-data; name="f{i}"\r\n\r\nx\r\n'
                for i in range(1001)
            )
            + "--b--\r\n",
            "b",
        ),
        (
            "".join(
                f'--b\r\nContent-Disposition: form-data; name="f{i}"; filename="f{i}.txt"'
                "\r\n\r\nx\r\n"
                for i in range(1001)
            )
            + "--b--\r\n",
            "b",
        ),
        ("--b\r\nno headers at all", "b"),
    ],
    ids=["too many fields", "too many files", "malformed"],
)
def test_the_multipart_parser_s_own_limits_are_400(
    client: httpx.Client, body: str, boundary: str
) -> None:
    response = client.post(
        "/echo", content=body, headers={"Content-Type": f"multipart/form-data; boundary={boundary}"}
    )
    assert response.status_code == 400, response.text
