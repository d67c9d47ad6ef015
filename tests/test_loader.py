"""Loading apps by path: several apps, each with its own `gen`, in one process."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from types import ModuleType

import pytest
from starlette.testclient import TestClient

import rastrillo
from rastrillo.loader import load_file, load_options
from tests.support import write_app

SHOP = {"index.GET.py": "def handle(ctx):\n    return ctx.text('shop')\n"}
ADMIN = {
    "index.GET.py": "def handle(ctx):\n    return ctx.text('admin')\n",
    "users.GET.py": "def handle(ctx):\n    return ctx.text('users')\n",
}
LOADS_ADMIN = """
from rastrillo.loader import load_options

ADMIN = load_options(Path(__file__).resolve().parent / "admin")
"""


def paths(options: rastrillo.Options) -> list[str]:
    return [route.path for route in options.routes]


def test_an_app_and_its_admin_app_each_get_their_own_gen(tmp_path: Path) -> None:
    write_app(tmp_path / "shop" / "admin", ADMIN)
    shop_dir = write_app(tmp_path / "shop", SHOP, prelude=LOADS_ADMIN)
    before = sys.modules.get("gen")
    shop = load_options(shop_dir)
    admin = load_file(shop_dir / "app.py", "app").ADMIN
    assert paths(shop) == ["/"]
    assert paths(admin) == ["/", "/users"]
    assert sys.modules.get("gen") is before
    for options, body, db in ((shop, "shop", "s.db"), (admin, "admin", "a.db")):
        app = rastrillo.App(dataclasses.replace(options, db=str(tmp_path / db)))
        with TestClient(app) as client:
            assert client.get("/").text == body


def test_two_apps_in_one_test_session_leave_the_running_gen_alone(tmp_path: Path) -> None:
    running = ModuleType("gen")
    sys.modules["gen"] = running
    try:
        first = load_options(write_app(tmp_path / "one", SHOP))
        second = load_options(write_app(tmp_path / "two", ADMIN))
        assert sys.modules["gen"] is running
    finally:
        del sys.modules["gen"]
    assert (paths(first), paths(second)) == (["/"], ["/", "/users"])
    assert first.routes[0].handle is not second.routes[0].handle


def test_a_file_that_fails_to_load_is_not_kept(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise ValueError('half-loaded')\n")
    for _ in range(2):  # a second attempt runs it again rather than returning a half module
        with pytest.raises(ValueError, match="half-loaded"):
            load_file(broken, "action")
