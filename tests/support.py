"""Test support: throwaway app folders and real servers on loopback."""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import random
import resource
import signal
import socket
import ssl
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import httpx
import pytest
from argon2 import PasswordHasher

from rastrillo.generate import generate

T = TypeVar("T")

APP_PY = """\
from collections.abc import Callable
from pathlib import Path

import rastrillo
from gen import routes, tools
{prelude}
OPTIONS = rastrillo.Options(
    app_dir=Path(__file__).resolve().parent,
    routes=routes(),
    tools=tools(),
    version="1.2.3",
    {extra}
)

if __name__ == "__main__":
    raise SystemExit(rastrillo.run(OPTIONS))
"""


LIGHT = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
"""argon2id at a thousandth of the default cost: about 0.5 ms a check, not 0.2 s. A hash is
checked with the parameters it holds, so an app whose stored hashes are made with these
signs in through the framework's check unchanged; the tests of sign-in flows and limits
store them (``tests/sessions/test_passwords.py`` checks the framework's own parameters)."""


# Building an httpx client loads a CA bundle, 20-40 ms of CPU; the suite builds thousands
# of clients of loopback servers, which speak plain HTTP, so they share one TLS context:
# every httpx (and httpx2) client or one-off request of the tests passes ``verify=TLS``.
TLS = ssl.create_default_context()


def write_app(
    root: Path,
    actions: dict[str, str],
    extra: str = "",
    files: dict[str, str] | None = None,
    prelude: str = "",
) -> Path:
    """An app folder with the given actions (path under actions/ → source), generated.

    ``extra`` adds keyword lines to ``Options(...)``; ``prelude`` adds code before it.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "app.py").write_text(APP_PY.format(extra=extra, prelude=textwrap.dedent(prelude)))
    for rel, source in {**{f"actions/{k}": v for k, v in actions.items()}, **(files or {})}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    generate(root)
    return root


def _port_block() -> range:
    """The loopback ports this pytest process hands out: its xdist worker's own slice of
    the ports below the kernel's ephemeral range."""
    try:
        ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    low = 10000
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    size = (ephemeral - low) // workers
    return range(low + index * size, low + (index + 1) * size)


_PORTS = _port_block()
_next_port = itertools.count(random.randrange(len(_PORTS)))


def free_port() -> int:
    """A loopback port for a server the test starts, which no other test of the run is
    handed. A port the kernel picks (bind to port 0) is free only until the socket closes:
    another worker's test, or any connection's source port, could take it before the
    server binds it, and a test then talks to someone else's server. So each xdist worker
    walks its own slice of the ports below the ephemeral range, handing a port out again
    only once it has handed out every other, and skips any that something else holds."""
    for _ in range(len(_PORTS)):
        port = _PORTS[next(_next_port) % len(_PORTS)]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in {_PORTS}")


class Server:
    """``python app.py ARGS`` in a child process, waited for until it answers.

    It runs in the app folder, or from ``cwd`` as ``python <app folder>/app.py``.
    """

    def __init__(
        self,
        app_dir: Path,
        args: list[str],
        base_url: str,
        uds: str | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        log: Path | None = None,
        open_files: int | None = None,
    ):
        """``open_files`` sets the server's open-file limit, soft and hard."""
        self.base_url = base_url
        self.uds = uds
        self.log = log or app_dir / "server.log"
        self.process = subprocess.Popen(
            [sys.executable, str(app_dir / "app.py"), *args],
            cwd=cwd or app_dir,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            preexec_fn=None if open_files is None else lambda: _limit_open_files(open_files),
        )
        self._wait_ready()

    def client(self, **kwargs: object) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=self.uds, verify=TLS) if self.uds else None
        kwargs.setdefault("verify", TLS)
        kwargs.setdefault("timeout", 30)  # not httpx's 5 s: a loaded CI machine answers slowly
        return httpx.Client(base_url=self.base_url, transport=transport, **kwargs)  # type: ignore[arg-type]

    def _wait_ready(self) -> None:
        with self.client() as c:

            def ready() -> bool:
                if self.process.poll() is not None:
                    raise RuntimeError(f"server exited early:\n{self.log.read_text()}")
                try:
                    return c.get("/healthz").status_code == 200
                except httpx.TransportError:
                    return False

            # 60 s: a loaded CI machine starts slowly.
            until(ready, "the server to start", 60, show=self.log.read_text, every=0.05)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=timeout)


def until(
    condition: Callable[[], T],
    what: str,
    timeout: float = 20,
    show: Callable[[], object] | None = None,
    every: float = 0.01,
) -> T:
    """Poll ``condition`` until it is truthy and return what it gave; fail the test, naming
    ``what`` it waited for, after ``timeout`` seconds (a bound on a hang, not a claim on
    speed: a loaded machine is slow). ``show`` gives what the failure should also print,
    read at the timeout: a server's log, say, or the last answer seen. ``every`` spaces
    the polls, for a condition that costs a request."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}" + (f":\n{show()}" if show else ""))


def missing(what: str) -> NoReturn:
    """Skip the test for want of ``what`` on a developer's machine; under CI (``CI`` set),
    where ``make test`` provides every part, fail it: a skip there would pass unseen."""
    if os.environ.get("CI"):
        pytest.fail(what)
    pytest.skip(what)


def _limit_open_files(count: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))


def self_signed(folder: Path, host: str, address: str | None = None) -> tuple[Path, Path]:
    """A self-signed certificate for ``host`` (and the IP ``address``, if given), written to
    ``folder``: its key file and its certificate file."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    names: list[x509.GeneralName] = [x509.DNSName(host)]
    if address is not None:
        names.append(x509.IPAddress(ipaddress.ip_address(address)))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_file, cert_file = folder / "key.pem", folder / "cert.pem"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key_file, cert_file


class LogSeen(logging.Handler):
    """A log handler whose ``event`` is set once a record's message holds ``text``: a test
    waits on it rather than sleeping until the log says something happened."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


class Relay:
    """Forwards connections from a unix socket in ``folder`` to PostgreSQL's own socket;
    ``cut`` drops every connection and refuses new ones until ``mend``."""

    def __init__(self, folder: Path, target: str) -> None:
        self.path = str(folder / ".s.PGSQL.5432")
        self.target = target
        self.live: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.listener: socket.socket | None = None
        self.mend()

    def mend(self) -> None:
        listener = socket.socket(socket.AF_UNIX)
        with contextlib.suppress(FileNotFoundError):
            Path(self.path).unlink()
        listener.bind(self.path)
        listener.listen()
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        assert self.listener is not None
        self.listener.close()
        Path(self.path).unlink()
        with self.lock:
            for s in self.live:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self.live.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX)
            server.connect(self.target)
            with self.lock:
                self.live.update((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
