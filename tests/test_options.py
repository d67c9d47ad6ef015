"""`Options` refuses a setting of the wrong kind where it is written, naming what it takes,
and a misspelt setting (or `Tool` field) in one line naming the one meant."""

import math
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

import rastrillo
from rastrillo import Options
from rastrillo.errors import ConfigError
from tests.support import write_app

RASTRILLO = str(Path(sys.executable).parent / "rastrillo")


async def _seed_async(db: object) -> None: ...


async def _wrap_async(app: object) -> object: ...


_HOOK = "a function (def, not async def: it is called, never awaited) or None"


@pytest.mark.parametrize(
    ("setting", "value", "wanted"),
    [
        ("approval_ttl", 600, "a datetime.timedelta longer than zero"),
        ("session_idle", timedelta(0), "a datetime.timedelta longer than zero"),
        ("recent_sign_in", 900, "a datetime.timedelta longer than zero"),
        ("mcp", "yes", "True or False"),
        ("mcp_call_limit", 120, "a rastrillo.limits.CallLimit(calls=..., window=...), or None"),
        ("security_headers", 1, "True or False"),
        ("max_body", -1, "a number of bytes of at least 0"),
        ("max_connections", True, "a number of connections of at least 1"),
        ("db_pool_size", 2.5, "a number of connections of at least 1"),
        ("header_timeout", math.nan, "a number of seconds above 0"),
        ("body_timeout", 0, "a number of seconds above 0"),
        ("db", 123, "a SQLite file name or a SQLAlchemy URL"),
        ("routes", None, "a list of routes, usually gen.routes()"),
        ("tools", "orders_get", "a list of tools, usually gen.tools()"),
        ("app_dir", ".", "a pathlib.Path"),
        ("sign_in_path", "signin", "a path on this site, starting with /"),
        ("setup", "seed", _HOOK),
        ("setup", _seed_async, _HOOK),  # never awaited: nothing would be seeded
        ("wrap", _wrap_async, _HOOK),  # called with the app, never awaited
    ],
)
def test_a_setting_of_the_wrong_kind_is_refused_naming_what_it_takes(setting, value, wanted):
    with pytest.raises(ConfigError) as refused:
        Options(**{setting: value})
    assert str(refused.value) == f"Options.{setting} is {wanted}, not {value!r}"


def test_the_defaults_and_every_kind_of_good_value_are_taken():
    Options()
    Options(
        app_dir=Path("/srv/app"),
        routes=[],
        tools=(),
        db="postgresql+psycopg://app@db/app",
        origin="https://tickets.example",
        approval_ttl=timedelta(minutes=5),
        recent_sign_in=timedelta(hours=1),
        header_timeout=2,
        drain_timeout=0,
        max_body=0,
        setup=print,
        mcp=True,
    )


def test_a_misspelt_setting_names_this_line_and_the_setting_meant():
    with pytest.raises(TypeError) as refused:  # a TypeError still, as Python's own was
        Options(aproval_ttl=timedelta(minutes=5))
    line = refused.tb.tb_lineno
    assert str(refused.value) == (
        f"tests/test_options.py:{line}: rastrillo.Options has no field 'aproval_ttl'; "
        "did you mean 'approval_ttl'?"
    )
    with pytest.raises(TypeError, match="has no field 'xyzzy'; it takes routes, tools, wrap"):
        Options(xyzzy=1)
    with pytest.raises(TypeError, match=r"Tool has no field 'acess'; did you mean 'access'\?"):
        rastrillo.Tool(description="x", acess=rastrillo.ToolWrite)
    with pytest.raises(TypeError, match=r"Arg has no field 'typ'; did you mean 'type'\?"):
        rastrillo.Arg("how many", typ=int)


MISSPELT_TOOL = """\
import rastrillo

TOOL = rastrillo.Tool(
    descripton="One of my orders.",
    args={"id": "the order id"},
)


def handle(ctx):
    return ctx.text("order")
"""


@pytest.mark.parametrize("mistake", ["setting", "tool field", "wrong kind", "sidecar grace"])
def test_python_app_py_says_a_misspelling_in_one_line(mistake, tmp_path):
    """Not a traceback through the framework, and not the same mistake twice."""
    if mistake == "wrong kind":
        app_dir = write_app(
            tmp_path / "app", {"ok.GET.py": "def handle(ctx): ..."}, extra="approval_ttl=5,"
        )
        said = "Options.approval_ttl is a datetime.timedelta longer than zero, not 5"
    elif mistake == "sidecar grace":
        app_dir = write_app(
            tmp_path / "app",
            {"ok.GET.py": "def handle(ctx): ..."},
            extra="sidecar=Sidecar(pass_fn=print, lease_ttl=30),",
            prelude="from rastrillo.sidecar import Sidecar",
        )
        said = (
            "the sidecar's shutdown_grace (15 s) must be at most a quarter of its lease_ttl "
            "(30 s), or a standby may start a pass beside one still finishing: lower "
            "shutdown_grace to 7.5 s, or raise lease_ttl to 60 s"
        )
    elif mistake == "setting":
        app_dir = write_app(
            tmp_path / "app", {"ok.GET.py": "def handle(ctx): ..."}, extra="aproval_ttl=5,"
        )
        said = (
            "app.py:7: rastrillo.Options has no field 'aproval_ttl'; did you mean 'approval_ttl'?"
        )
    else:
        app_dir = write_app(tmp_path / "app", {"ok.GET.py": "def handle(ctx): ..."})
        (app_dir / "actions" / "orders" / "[id].GET.py").parent.mkdir(parents=True)
        (app_dir / "actions" / "orders" / "[id].GET.py").write_text(MISSPELT_TOOL)
        generate_said = subprocess.run(
            [RASTRILLO, "generate"], cwd=app_dir, capture_output=True, text=True, timeout=60
        )
        assert generate_said.returncode == 1
        assert generate_said.stderr == (
            "actions/orders/[id].GET.py:4: rastrillo.Tool has no field 'descripton'; "
            "did you mean 'description'?\n1 problem; gen/ left as it was\n"
        )
        # A checkout whose gen/ was written before the typo: app.py imports the action.
        (app_dir / "gen" / "routes.py").write_text(
            (app_dir / "gen" / "routes.py").read_text().replace("ok.GET.py", "orders/[id].GET.py")
        )
        said = (
            "actions/orders/[id].GET.py:3: rastrillo.Tool has no field 'descripton'; "
            "did you mean 'description'?"
        )
    started = subprocess.run(
        [sys.executable, "app.py", "--addr", "127.0.0.1:0"],
        cwd=app_dir,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (started.returncode, started.stdout, started.stderr) == (1, "", f"error: {said}\n")


def test_rastrillo_traceback_shows_where_a_mistake_in_app_py_came_from(tmp_path):
    app_dir = write_app(
        tmp_path / "app", {"ok.GET.py": "def handle(ctx): ..."}, extra="aproval_ttl=5,"
    )
    started = subprocess.run(
        [sys.executable, "app.py"],
        cwd=app_dir,
        env={**os.environ, "RASTRILLO_TRACEBACK": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 1
    assert started.stderr.startswith("Traceback (most recent call last):\n")
    assert 'app.py", line 7, in <module>' in started.stderr


def test_the_command_line_says_a_misspelling_in_app_py_in_one_line(tmp_path):
    app_dir = write_app(
        tmp_path / "app", {"ok.GET.py": "def handle(ctx): ..."}, extra="aproval_ttl=5,"
    )
    said = subprocess.run(
        [RASTRILLO, "tools", "list"], cwd=app_dir, capture_output=True, text=True, timeout=60
    )
    assert (said.returncode, said.stdout, said.stderr) == (
        1,
        "",
        "error: app.py:7: rastrillo.Options has no field 'aproval_ttl'; "
        "did you mean 'approval_ttl'?\n",
    )


PROGRAM = """\
import sys

import rastrillo

print(sys.excepthook is sys.__excepthook__)


def options():
    return rastrillo.Options(aproval_ttl=5)


try:
    options()
except TypeError:
    print(sys.excepthook is sys.__excepthook__)
options()
"""


def test_a_program_that_imports_rastrillo_keeps_pythons_own_excepthook(tmp_path):
    """Importing a library changes no process-wide hook: a program (its tests, its other
    libraries) that uses Rastrillo from its functions gets Python's own traceback for an
    uncaught mistake, the one line still its last."""
    (tmp_path / "program.py").write_text(PROGRAM)
    ran = subprocess.run(
        [sys.executable, "program.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert (ran.returncode, ran.stdout) == (1, "True\nTrue\n")
    assert ran.stderr.startswith("Traceback (most recent call last):\n")
    assert ran.stderr.endswith(
        "rastrillo.errors.UnknownField: program.py:9: rastrillo.Options has no field "
        "'aproval_ttl'; did you mean 'approval_ttl'?\n"
    )


def test_a_hook_that_returns_an_awaitable_is_refused_as_it_is_called(tmp_path):
    """A plain function around an ``async def`` passes the check where `Options` is made
    (it sees only the function); what it returns is refused where it is called, not left
    never awaited, its seeding or wrapping silently not done."""
    with pytest.raises(ConfigError) as refused:
        rastrillo.handler(Options(db=str(tmp_path / "a.db"), setup=lambda db: _seed_async(db)))
    assert str(refused.value) == (
        "Options.setup returned coroutine, which is never awaited:"
        " make it a plain function (def, not async def)"
    )
    with pytest.raises(ConfigError, match=r"^Options\.wrap returned coroutine, which is never"):
        rastrillo.App(Options(db=str(tmp_path / "b.db"), wrap=lambda app: _wrap_async(app)))
