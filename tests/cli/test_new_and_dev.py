"""`rastrillo new` scaffolds an app that serves and passes its own tests; `dev` rebuilds."""

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from rastrillo.cli.main import main
from tests.doc_examples import doc_block
from tests.support import TLS, free_port, until

BIN = Path(sys.executable).parent
README = {
    " ".join(argv[1:]): argv
    for line in doc_block("README.md", "sh", "rastrillo new shop").splitlines()
    for argv in [shlex.split(line, comments=True)]
}
"""The command line README.md shows, for an app folder ``shop``, by its arguments."""


def test_the_readme_commands_make_an_app_that_serves_and_passes_its_tests(
    tmp_path, serve, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    out = {}
    for command, argv in README.items():
        if command != "dev shop":  # it serves until stopped: the test below runs it
            assert argv[0] == "rastrillo" and main(argv[1:]) == 0, argv
            out[command] = capsys.readouterr().out
    assert list(out) == [
        "new shop",
        "generate shop",
        "generate shop --check",
        "tools list --app shop",
        "tools schemas --app shop --format openai",
    ]
    app_dir = tmp_path / "shop"
    tests = subprocess.run(
        [BIN / "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=app_dir,
        capture_output=True,
        text=True,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    server = serve(app_dir)
    with server.client() as c:
        assert c.get("/").status_code == 200
    assert "notes_post  write  POST /notes" in out["tools list --app shop"]
    openai = json.loads(out["tools schemas --app shop --format openai"])
    assert {s["type"] for s in openai} == {"function"}
    assert "notes_post" in {s["function"]["name"] for s in openai}


def test_new_refuses_an_existing_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").mkdir()
    assert main(["new", "taken"]) == 1
    assert "already exists" in capsys.readouterr().err
    assert main(["new", "bad-name"]) == 1


@pytest.mark.parametrize("folder", ["missing", "empty"])
def test_dev_on_a_folder_that_is_no_app_is_one_line_not_a_traceback(folder, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["dev", str(tmp_path / folder)]) == 1
    err = capsys.readouterr().err
    assert err == f"error: no app.py in {tmp_path / folder}: is this an app folder?\n"


def _wait_for(url: str, predicate: Callable[[httpx.Response], bool]) -> httpx.Response:
    """The first answer from ``url`` that ``predicate`` takes, asked again while the dev
    server rebuilds and restarts."""
    last: list[object] = [None]

    def taken() -> httpx.Response | None:
        try:
            last[0] = response = httpx.get(url, timeout=2, verify=TLS)
        except httpx.TransportError as exc:
            last[0] = exc
            return None
        return response if predicate(response) else None

    return until(
        taken, f"{url} to answer as expected", 60, show=lambda: f"last: {last[0]!r}", every=0.1
    )


def test_dev_regenerates_restarts_and_keeps_last_good_build(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(README["new shop"][1:]) == 0
    app_dir = tmp_path / "shop"
    port = free_port()
    log = (tmp_path / "dev.log").open("wb")
    dev = subprocess.Popen(
        [BIN / "rastrillo", *README["dev shop"][1:], "--addr", f"127.0.0.1:{port}"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for(base + "/", lambda r: r.status_code == 200)
        # The first request to /mcp builds it, importing the MCP SDK: seconds on a loaded machine.
        mcp = httpx.post(
            base + "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            verify=TLS,
            timeout=60,
        )
        assert mcp.status_code == 401  # a new app serves MCP, for agents with a token
        assert "resource_metadata=" in mcp.headers["www-authenticate"]
        (app_dir / "actions" / "hello.GET.py").write_text(
            "def handle(ctx):\n    return ctx.text('hello v1')\n"
        )
        _wait_for(base + "/hello", lambda r: r.text == "hello v1")
        broken = app_dir / "actions" / "broken.GET.py"
        broken.write_text("def handle(ctx):\n    return (\n")
        until(lambda: "syntax error" in (tmp_path / "dev.log").read_text(), "dev to report it")
        hello = httpx.get(base + "/hello", verify=TLS)
        assert hello.text == "hello v1"  # the last good build still serves
        broken.unlink()
        (app_dir / "actions" / "hello.GET.py").write_text(
            "def handle(ctx):\n    return ctx.text('hello v2')\n"
        )
        _wait_for(base + "/hello", lambda r: r.text == "hello v2")
    finally:
        dev.terminate()
        assert dev.wait(timeout=20) == 0
    with pytest.raises(httpx.TransportError):  # the server went with it
        httpx.get(base + "/", timeout=2, verify=TLS)
