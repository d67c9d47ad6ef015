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


NAMED_BY_HELPERS = {
    "index.GET.py": "import helpers\n\ndef handle(ctx):\n    return ctx.text(helpers.NAME)\n"
}
LOADS_ADMIN_FIRST = """\
from pathlib import Path

import rastrillo
from rastrillo.loader import load_options

ADMIN = load_options(Path(__file__).resolve().parent / "admin")

from gen import routes, tools

OPTIONS = rastrillo.Options(app_dir=Path(__file__).resolve().parent, routes=routes(), tools=tools())
"""


def served(options: rastrillo.Options, db: Path) -> str:
    app = rastrillo.App(dataclasses.replace(options, db=str(db)))
    with TestClient(app) as client:
        return client.get("/").text


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
    apps = {}
    for name in ("shop", "admin"):
        app_dir = write_app(
            tmp_path / name, NAMED_BY_HELPERS, files={"helpers.py": f"NAME = {name!r}\n"}
        )
        apps[name] = load_options(app_dir)
    first = sys.modules.pop("helpers")
    assert first.__file__ == str(tmp_path / "shop" / "helpers.py")
    for name, options in apps.items():
        app = rastrillo.App(dataclasses.replace(options, db=str(tmp_path / f"{name}.db")))
        with TestClient(app) as client:
            assert client.get("/").text == name


def test_an_app_that_loads_its_admin_app_first_still_imports_its_own_modules(
    tmp_path: Path,
) -> None:
    """The admin's gen and helpers, loaded from the shop's app.py before the shop imports
    its own, are not what the shop then gets."""
    write_app(
        tmp_path / "shop" / "admin",
        {**ADMIN, **NAMED_BY_HELPERS},
        files={"helpers.py": "NAME = 'admin'\n"},
    )
    shop_dir = write_app(
        tmp_path / "shop", NAMED_BY_HELPERS, files={"helpers.py": "NAME = 'shop'\n"}
    )
    (shop_dir / "app.py").write_text(LOADS_ADMIN_FIRST)
    shop = load_options(shop_dir)
    admin = load_file(shop_dir / "app.py", "app").ADMIN
    assert (paths(shop), paths(admin)) == (["/"], ["/", "/users"])
    assert served(shop, tmp_path / "s.db") == "shop"
    assert served(admin, tmp_path / "a.db") == "admin"


def test_an_apps_module_imported_before_the_app_is_loaded_is_the_one_it_uses(
    tmp_path: Path,
) -> None:
    """A test that imports the app's own module first (to look into it, or patch it) and then
    loads the app shares that module with it: no second copy."""
    app_dir = write_app(
        tmp_path / "shop",
        {
            "index.GET.py": "import mailer\n\n"
            "def handle(ctx):\n    mailer.OUTBOX.append('sent')\n    return ctx.text('ok')\n"
        },
        files={"mailer.py": "OUTBOX = []\n"},
    )
    sys.path.insert(0, str(app_dir))
    try:
        import mailer  # type: ignore[import-not-found]

        assert served(load_options(app_dir), tmp_path / "s.db") == "ok"
        assert mailer.OUTBOX == ["sent"]
    finally:
        sys.path.remove(str(app_dir))
        del sys.modules["mailer"]


def test_a_file_named_like_a_standard_module_leaves_that_module_alone(tmp_path: Path) -> None:
    """An app folder holding an ``email.py`` (a stray script) does not take the standard
    library's ``email`` away while it loads: an action importing ``smtplib`` still loads."""
    stdlib_email = sys.modules["email"]
    app_dir = write_app(
        tmp_path / "shop",
        {
            "index.GET.py": "import smtplib\n\n"
            "def handle(ctx):\n    return ctx.text(smtplib.__name__)\n"
        },
        files={"email.py": "raise RuntimeError('the stray script ran')\n"},
    )
    assert served(load_options(app_dir), tmp_path / "s.db") == "smtplib"
    assert sys.modules["email"] is stdlib_email


def test_a_file_that_fails_to_load_is_not_kept(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise ValueError('half-loaded')\n")
    for _ in range(2):  # a second attempt runs it again rather than returning a half module
        with pytest.raises(ValueError, match="half-loaded"):
            load_file(broken, "action")
