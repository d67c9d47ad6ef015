"""`Options` refuses a setting of the wrong kind where it is written, naming what it takes."""

import math
from datetime import timedelta
from pathlib import Path

import pytest

from rastrillo import Options
from rastrillo.errors import ConfigError


@pytest.mark.parametrize(
    ("setting", "value", "wanted"),
    [
        ("approval_ttl", 600, "a datetime.timedelta longer than zero"),
        ("session_idle", timedelta(0), "a datetime.timedelta longer than zero"),
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
        ("setup", "seed", "a function or None"),
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
        header_timeout=2,
        drain_timeout=0,
        max_body=0,
        setup=print,
        mcp=True,
    )
