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
    # What was loaded as gen before is put back; where nothing was, the shop's stays.
    kept = sys.modules.get("gen")
    assert (
        kept is before
        if before is not None
        else kept.__file__ == str(shop_dir / "gen" / "__init__.py")
    )
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


def test_two_apps_with_a_module_of_the_same_name_each_import_their_own(tmp_path: Path) -> None:
    """An app's own modules are imported afresh for it, as its gen is: the second app's
    ``import helpers`` is its own file, not the first app's module of that name, which is
    put back for code that imports it later."""
    uses_helpers = {
        "index.GET.py": "import helpers\n\ndef handle(ctx):\n    return ctx.text(helpers.NAME)\n"
    }
    apps = {}
    for name in ("shop", "admin"):
        app_dir = write_app(
            tmp_path / name, uses_helpers, files={"helpers.py": f"NAME = {name!r}\n"}
        )
        apps[name] = load_options(app_dir)
    first = sys.modules.pop("helpers")
    assert first.__file__ == str(tmp_path / "shop" / "helpers.py")
    for name, options in apps.items():
        app = rastrillo.App(dataclasses.replace(options, db=str(tmp_path / f"{name}.db")))
        with TestClient(app) as client:
            assert client.get("/").text == name


def test_a_file_that_fails_to_load_is_not_kept(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise ValueError('half-loaded')\n")
    for _ in range(2):  # a second attempt runs it again rather than returning a half module
        with pytest.raises(ValueError, match="half-loaded"):
            load_file(broken, "action")
