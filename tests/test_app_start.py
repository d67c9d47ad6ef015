"""Building an app only wires it; `start()` (or the lifespan) does its I/O, once."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

import rastrillo


def options(tmp_path: Path, seeded: list[str], fail: bool = False) -> rastrillo.Options:
    def setup(db: object) -> None:
        if fail:
            raise RuntimeError("seed data broken")
        seeded.append("seed")

    return rastrillo.Options(app_dir=tmp_path, db="data/app.db", setup=setup, origin="http://t")


def test_building_an_app_opens_nothing_and_start_runs_once(tmp_path: Path) -> None:
    seeded: list[str] = []
    app = rastrillo.App(options(tmp_path, seeded))
    assert not (tmp_path / "data" / "app.db").exists()
    assert seeded == []
    assert app.start() is app
    assert app.start() is app
    assert seeded == ["seed"]
    assert app.db.query("SELECT name FROM rastrillo_migrations") == []


def test_handler_returns_a_started_app_as_documented(tmp_path: Path) -> None:
    seeded: list[str] = []
    app = rastrillo.handler(options(tmp_path, seeded))
    assert seeded == ["seed"]
    app.db.query("SELECT name FROM rastrillo_migrations")


def test_the_lifespan_starts_the_app(tmp_path: Path) -> None:
    seeded: list[str] = []
    with TestClient(rastrillo.App(options(tmp_path, seeded))) as client:
        assert seeded == ["seed"]
        assert client.get("/healthz").text == "ok"


def test_a_failed_start_fails_the_lifespan_startup(tmp_path: Path) -> None:
    with (
        pytest.raises(RuntimeError, match="seed data broken"),
        TestClient(rastrillo.App(options(tmp_path, [], fail=True))),
    ):
        pass
