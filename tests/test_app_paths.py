"""The framework's own paths (its endpoints and static files) route on the raw path, as the
app's router does: an encoded slash in a path arg never reaches them. A missing static file
is a 404, never a 500."""

from __future__ import annotations

from pathlib import Path

import pytest

from rastrillo.testing import TestApp
from tests.support import write_app

ACTIONS = {
    "[name].GET.py": """
        import rastrillo

        TOOL = rastrillo.Tool(description="Show one page by name.", args={"name": "the page"})


        def handle(ctx):
            return ctx.text("page " + ctx.params["name"])
    """,
}
FILES = {"static/style.css": "body { color: black }", "static/css/site.css": "p {}"}
ENCODED = ["api/version", "static/style.css", "_rastrillo/console"]


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    return write_app(tmp_path / "app", ACTIONS, files=FILES)


@pytest.mark.parametrize("name", ENCODED)
def test_a_path_arg_with_a_slash_reaches_the_tool_route_not_the_framework(
    app_dir: Path, tmp_path: Path, name: str
) -> None:
    app = TestApp(app_dir, tmp_path, console=True)
    result = app.agent("concierge", 1).call("name_get", {"name": name})
    assert (result.status, result.text) == (200, f"page {name}")


@pytest.mark.parametrize("name", ENCODED)
def test_a_browser_sending_an_encoded_slash_gets_the_same_route(
    app_dir: Path, tmp_path: Path, name: str
) -> None:
    client = TestApp(app_dir, tmp_path).client
    response = client.get("/" + name.replace("/", "%2F"))
    assert (response.status_code, response.text) == (200, f"page {name}")


def test_static_files_are_served_on_their_raw_path(app_dir: Path, tmp_path: Path) -> None:
    client = TestApp(app_dir, tmp_path).client
    assert client.get("/static/style.css").text == "body { color: black }"
    assert client.get("/static/css/site.css").text == "p {}"
    assert client.get("/static/css%2Fsite.css").status_code == 404


def test_a_missing_static_file_is_a_404_without_a_traceback(app_dir: Path, serve) -> None:
    server = serve(app_dir)
    with server.client() as c:
        for path in ("/static/missing.css", "/static/", "/static/css", "/static/%2E%2E/app.py"):
            assert c.get(path).status_code == 404, path
        assert c.post("/static/style.css", headers={"Origin": server.base_url}).status_code == 405
    assert server.stop() == 0
    log = server.log.read_text()
    assert "Traceback" not in log
    assert "ERROR" not in log
