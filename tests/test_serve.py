"""`rastrillo.run`: serving on an address or a unix socket, usage errors, draining on SIGTERM."""

import gc
import signal
import sqlite3
import threading

import httpx
import pytest

from rastrillo import Options, run
from rastrillo.app import App
from rastrillo.loader import load_options
from rastrillo.serve import DrainingServer, server_config
from tests.support import TLS, Server, free_port, until, write_app

ACTIONS = {
    "index.GET.py": """
        def handle(ctx):
            return ctx.text("home")
    """,
    "slow.GET.py": """
        import threading
        from pathlib import Path

        def handle(ctx):
            # Say the request is in flight, then hold it until the test releases it.
            here = Path(__file__).resolve().parent.parent
            (here / "started").touch()
            release = here / "release"
            while not release.exists():
                threading.Event().wait(0.01)
            return ctx.text("finished")
    """,
    "notes/index.POST.py": """
        def handle(ctx):
            ctx.db.execute("INSERT INTO notes (body) VALUES (:b)", b=ctx.form["body"])
            return ctx.text("saved", status=201)
    """,
}
MIGRATION = {"migrations/0001_notes.sql": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);"}
WRAP_PRELUDE = """
from starlette.responses import PlainTextResponse


def refuse_all(app):
    async def middleware(scope, receive, send):
        await PlainTextResponse("blocked by app middleware", status_code=418)(scope, receive, send)

    return middleware
"""


@pytest.fixture
def app_dir(tmp_path):
    return write_app(tmp_path / "app", ACTIONS, files=MIGRATION)


def test_serves_on_addr_with_health_and_version(app_dir, serve):
    server = serve(app_dir)
    with server.client() as c:
        assert c.get("/").text == "home"
        health = c.get("/healthz")
        assert (health.status_code, health.text) == (200, "ok")
        assert c.get("/api/version").json() == {"version": "1.2.3"}
        assert c.post("/healthz").status_code == 405
        assert c.delete("/api/version").status_code == 405
        assert c.get("/missing").status_code == 404
        assert c.post("/", headers={"Origin": server.base_url}).status_code == 405
    assert server.stop() == 0


def test_serves_on_a_unix_socket(app_dir, tmp_path):
    sock = str(tmp_path / "app.sock")
    server = Server(app_dir, ["--socket", sock], "http://app", uds=sock)
    try:
        with server.client() as c:
            assert c.get("/").text == "home"
    finally:
        assert server.stop() == 0


def test_db_flag_picks_the_sqlite_file(app_dir, serve, tmp_path):
    db = tmp_path / "elsewhere.db"
    server = serve(app_dir, "--db", str(db))
    with server.client(headers={"Origin": server.base_url}) as c:
        assert c.post("/notes", data={"body": "hi"}).status_code == 201
    server.stop()
    assert sqlite3.connect(db).execute("SELECT body FROM notes").fetchall() == [("hi",)]


def test_a_relative_db_path_is_relative_to_where_the_command_runs(app_dir, tmp_path):
    port = free_port()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    server = Server(
        app_dir,
        ["--addr", f"127.0.0.1:{port}", "--db", "data/here.db"],
        f"http://127.0.0.1:{port}",
        cwd=elsewhere,
    )
    server.stop()
    assert (elsewhere / "data" / "here.db").exists()
    assert not (app_dir / "data").exists()


def test_serve_word_is_accepted(app_dir, tmp_path):
    port = free_port()
    server = Server(app_dir, ["serve", "--addr", f"127.0.0.1:{port}"], f"http://127.0.0.1:{port}")
    assert server.stop() == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["bogus"],
        ["sidecar"],
        ["sidecar", "run", "now"],
        ["--addr"],
        ["--addr", "nope"],
        ["--addr", "127.0.0.1:1", "--socket", "x"],
        ["--port", "1"],
        ["serve", "serve"],
    ],
)
def test_other_argv_is_a_usage_error(argv, capsys):
    assert run(Options(), argv) == 2
    err = capsys.readouterr().err
    assert "usage:" in err
    assert "Traceback" not in err


def test_framework_endpoints_sit_outside_the_app_middleware(tmp_path, serve):
    app_dir = write_app(
        tmp_path / "app", ACTIONS, extra="wrap=refuse_all,", files=MIGRATION, prelude=WRAP_PRELUDE
    )
    server = serve(app_dir)
    with server.client() as c:
        assert c.get("/").status_code == 418
        assert c.get("/healthz").text == "ok"
        assert c.get("/api/version").json() == {"version": "1.2.3"}


def test_sigterm_lets_a_request_in_flight_finish(app_dir, serve):
    server = serve(app_dir)
    result: dict[str, object] = {}

    def slow_request():
        with server.client(timeout=10) as c:
            response = c.get("/slow")
            result["status"], result["text"] = response.status_code, response.text

    thread = threading.Thread(target=slow_request)
    thread.start()
    until(lambda: (app_dir / "started").exists(), "the slow request to start")
    server.process.send_signal(signal.SIGTERM)
    until(lambda: "Shutting down" in server.log.read_text(), "the drain to begin")
    (app_dir / "release").touch()
    assert server.stop(signal.SIGTERM) == 0
    thread.join()
    assert result == {"status": 200, "text": "finished"}
    with pytest.raises(httpx.TransportError), server.client() as c:
        c.get("/")


@pytest.mark.parametrize(
    "addr", ["127.0.0.1:\u00b2", "127.0.0.1:\uff18\uff10", "127.0.0.1:-1", "127.0.0.1: 80", "h:8_0"]
)
def test_a_port_is_ascii_digits_only(addr: str) -> None:
    from rastrillo.serve import UsageError, split_addr

    with pytest.raises(UsageError, match="--addr wants HOST:PORT"):
        split_addr(addr)
    assert split_addr("127.0.0.1:8080") == ("127.0.0.1", 8080)


def test_serving_freezes_what_start_up_loaded_out_of_the_collectors_way(app_dir):
    app = App(load_options(app_dir))
    server = DrainingServer(server_config(app, host="127.0.0.1", port=free_port()))
    gc.unfreeze()
    serving = threading.Thread(target=server.run)
    serving.start()
    try:
        until(lambda: server.started, "the server to start")
        assert gc.get_freeze_count() > 10_000  # the app and its libraries, not a handful
        assert httpx.get(f"http://127.0.0.1:{server.config.port}/", verify=TLS).text == "home"
    finally:
        server.should_exit = True
        serving.join(timeout=30)
        gc.unfreeze()


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["bogus\x1b]0;owned\x07"], 2),  # a usage error: argparse quotes the argument raw
        (["sidecar", "run", "--db", "oracle://x\x1b[2J/db"], 1),  # an error of the app's set-up
    ],
)
def test_an_error_reaches_the_terminal_escaped(argv, code, capsys):
    """``python app.py`` prints its errors as the command line does: a control character in
    what the user or the environment gave cannot drive the terminal or forge a line."""
    assert run(Options(), argv) == code
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "\\x1b" in err


def test_a_test_server_that_cannot_start_says_so(tmp_path):
    """`rastrillo.testing.live_server` raises at once when uvicorn ends without starting (here
    its TLS files are missing), rather than handing a test an address nobody serves."""
    from rastrillo.testing import live_server
    from tests.tools._tools_app import app_options

    missing = {"ssl_certfile": str(tmp_path / "cert.pem"), "ssl_keyfile": str(tmp_path / "key.pem")}
    with (
        pytest.raises(RuntimeError, match="the test server did not start") as raised,
        live_server(app_options(tmp_path), **missing),
    ):
        pass
    assert isinstance(raised.value.__cause__, FileNotFoundError)
