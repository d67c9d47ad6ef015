"""docs/deploy.md's nginx blocks, run as written: Debian's nginx terminating TLS on loopback
in front of ``python app.py --socket`` (uvicorn), and in front of ``--workers 2`` on TCP with
upstream keep-alive, each block's text as the page has it with only the socket's path or the
app's port (and, for the second, the site's listen and TLS lines) put in (conventions:
tests/doc_examples.py).

What the page promises of them: the app sees the scheme people use (https), the host they
typed, and the client nginx saw, never an address or a scheme the client wrote; the
``Origin`` header reaches the app unchanged, so a form from the public origin passes CSRF
and one from elsewhere does not; and behind the second, nginx keeps its connections to the
workers open rather than opening one per request.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.doc_examples import doc_block
from tests.support import Server, free_port, self_signed, until, write_app

NGINX = Path("/usr/sbin/nginx")
HOST = "tickets.example"
ORIGIN = f"https://{HOST}"
DOC_SOCKET = "/run/tickets.sock"
DOC_ADDR = "127.0.0.1:8000"
DOC_SITE = "# listen, server_name and TLS as your site has them"
ACTIONS = {
    "whoami.GET.py": """
        def handle(ctx):
            request = ctx.request
            return ctx.json(
                {
                    "scheme": request.url.scheme,
                    "host": request.headers["host"],
                    "client": request.client.host,
                    "url": str(request.url),
                    "origin": request.headers.get("origin"),
                }
            )
    """,
    "note.POST.py": """
        def handle(ctx):
            return ctx.text(f"noted {ctx.form['text']}")
    """,
}


def nginx_conf(http: str, folder: Path) -> str:
    """A whole nginx.conf around the page's ``http`` blocks: every file nginx writes kept in
    ``folder``, one process in the foreground."""
    temp = "\n".join(
        f"    {kind}_temp_path {folder / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""\
daemon off;
master_process off;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} info;
events {{ worker_connections 64; }}
http {{
    access_log {folder / "access.log"};
{temp}
{textwrap.indent(http, " " * 4)}
}}
"""


def site(port: int, key: Path, cert: Path) -> str:
    """The lines of one TLS server on loopback for the app's name."""
    return textwrap.dedent(f"""\
        listen 127.0.0.1:{port} ssl;
        server_name {HOST};
        ssl_certificate {cert};
        ssl_certificate_key {key};""")


def wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    def listening() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"nginx exited early:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return False
        return True

    until(listening, "nginx to listen", timeout=30)


@contextlib.contextmanager
def nginx(conf: Callable[[int, Path, Path], str], folder: Path) -> Iterator[httpx.Client]:
    """nginx serving ``conf(port, key, cert)``'s http blocks on a free port; a client of it."""
    if not NGINX.exists():
        pytest.fail("no nginx: run `make test` (scripts/ensure-debian installs Debian's)")
    key, cert = self_signed(folder, HOST, "127.0.0.1")
    port = free_port()
    path = folder / "nginx.conf"
    path.write_text(nginx_conf(conf(port, key, cert), folder))
    log = folder / "nginx.out"
    process = subprocess.Popen(
        [str(NGINX), "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(path)],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_listening(port, process, folder / "error.log")
        trust = ssl.create_default_context(cafile=str(cert))
        with httpx.Client(
            base_url=f"https://127.0.0.1:{port}", headers={"Host": HOST}, verify=trust, timeout=30
        ) as client:
            yield client
    finally:
        process.terminate()
        assert process.wait(timeout=15) == 0, (folder / "error.log").read_text()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A client of nginx, serving the page's first block in front of the app on its socket."""
    folder = tmp_path_factory.mktemp("deploy")
    app_dir = write_app(folder / "app", ACTIONS)
    sock = str(folder / "tickets.sock")
    location = doc_block("docs/deploy.md", "nginx", "http://unix:")
    assert DOC_SOCKET in location

    def conf(port: int, key: Path, cert: Path) -> str:
        body = site(port, key, cert) + "\n" + location.replace(DOC_SOCKET, sock)
        return "server {\n" + textwrap.indent(body, "    ") + "}"

    env = {"RASTRILLO_ORIGIN": ORIGIN}
    server = Server(app_dir, ["--socket", sock], "http://localhost", uds=sock, env=env)
    try:
        with nginx(conf, folder) as client:
            yield client
    finally:
        assert server.stop() == 0


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, int]]:
    """A client of nginx serving the page's keep-alive block in front of ``--workers 2`` on
    TCP, and the port the app listens on."""
    folder = tmp_path_factory.mktemp("deploy-tcp")
    app_dir = write_app(folder / "app", ACTIONS)
    block = doc_block("docs/deploy.md", "nginx", "keepalive")
    assert DOC_ADDR in block and DOC_SITE in block
    app_port = free_port()

    def conf(port: int, key: Path, cert: Path) -> str:
        lines = textwrap.indent(site(port, key, cert), "    ").strip()
        return block.replace(DOC_ADDR, f"127.0.0.1:{app_port}").replace(DOC_SITE, lines)

    addr = f"127.0.0.1:{app_port}"
    env = {"RASTRILLO_ORIGIN": ORIGIN}
    server = Server(app_dir, ["--workers", "2", "--addr", addr], f"http://{addr}", env=env)
    try:
        with nginx(conf, folder) as client:
            yield client, app_port
    finally:
        assert server.stop() == 0


def connections_to(port: int) -> set[int]:
    """The local ports of this host's TCP connections to ``port`` on 127.0.0.1, in any
    state but LISTEN (one that ended waits a minute in TIME_WAIT, so it is still counted)."""
    ports = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, remote, state = line.split()[1:4]
        if state != "0A" and remote == f"0100007F:{port:04X}":
            ports.add(int(local.split(":")[1], 16))
    return ports


def test_the_app_sees_the_scheme_host_and_client_nginx_saw(proxy: httpx.Client) -> None:
    seen = proxy.get(
        "/whoami",
        headers={"X-Forwarded-For": "198.51.100.7", "X-Forwarded-Proto": "http"},
    ).json()
    assert seen == {
        "scheme": "https",
        "host": HOST,
        "client": "127.0.0.1",  # where nginx saw it come from, not the address it wrote
        "url": f"{ORIGIN}/whoami",
        "origin": None,
    }


def test_a_form_from_the_public_origin_passes_csrf_and_one_from_elsewhere_does_not(
    proxy: httpx.Client,
) -> None:
    seen = proxy.get("/whoami", headers={"Origin": ORIGIN}).json()
    assert seen["origin"] == ORIGIN  # passed through unchanged
    posted = proxy.post("/note", data={"text": "hi"}, headers={"Origin": ORIGIN})
    assert (posted.status_code, posted.text) == (200, "noted hi")
    forged = proxy.post("/note", data={"text": "hi"}, headers={"Origin": "https://evil.example"})
    assert forged.status_code == 403


def test_behind_the_keepalive_block_the_app_sees_what_it_sees_behind_the_first(
    pooled: tuple[httpx.Client, int],
) -> None:
    client, _ = pooled
    seen = client.get("/whoami", headers={"Origin": ORIGIN, "X-Forwarded-Proto": "http"}).json()
    assert seen == {
        "scheme": "https",
        "host": HOST,
        "client": "127.0.0.1",
        "url": f"{ORIGIN}/whoami",
        "origin": ORIGIN,
    }
    posted = client.post("/note", data={"text": "hi"}, headers={"Origin": ORIGIN})
    assert (posted.status_code, posted.text) == (200, "noted hi")
    forged = client.post("/note", data={"text": "hi"}, headers={"Origin": "https://evil.example"})
    assert forged.status_code == 403


def test_behind_the_keepalive_block_nginx_reuses_its_connections_to_the_workers(
    pooled: tuple[httpx.Client, int],
) -> None:
    client, app_port = pooled
    before = connections_to(app_port)
    for _ in range(20):
        assert client.get("/whoami").status_code == 200
    opened = connections_to(app_port) - before
    # One connection a request (nginx's HTTP/1.0 default) would be 20; the block keeps a
    # few open and sends one request after another on them.
    assert len(opened) <= 2, sorted(opened)
