"""The cycle collector paused in a `with` block: blocks in several threads overlapping in
any order, nested ones and ones that raise leave it as it was, whether the app left it on
or turned it off; `schemas` and `generate` render with it paused."""

from __future__ import annotations

import gc
import itertools
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rastrillo.collector import collector_paused
from rastrillo.generate import render_gen, write
from rastrillo.registry.declare import ToolDef
from rastrillo.tools import FORMATS, schemas


@pytest.fixture(params=[True, False], ids=["app leaves it on", "app turned it off"])
def collecting(request: pytest.FixtureRequest) -> Iterator[bool]:
    """The collector on or off as the app left it, and on again after the test."""
    (gc.enable if request.param else gc.disable)()
    yield request.param
    gc.enable()


class Block(threading.Thread):
    """A thread that enters a `collector_paused` block and leaves it, each when told."""

    def __init__(self, *, raises: bool = False) -> None:
        super().__init__(daemon=True)
        self.raises = raises
        self.go = [threading.Event(), threading.Event()]
        self.done = [threading.Event(), threading.Event()]
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.go[0].wait()
            with collector_paused():
                self.done[0].set()
                self.go[1].wait()
                if self.raises:
                    raise LookupError("inside the block")
        except LookupError as exc:
            self.error = exc
        self.done[1].set()

    def step(self, leaving: int) -> None:
        self.go[leaving].set()
        assert self.done[leaving].wait(timeout=30)


def _orders(threads: int) -> list[tuple[tuple[int, int], ...]]:
    """Every order of each thread entering (0) and then leaving (1) its block."""
    steps = [(t, leaving) for t in range(threads) for leaving in (0, 1)]
    return [
        order
        for order in itertools.permutations(steps)
        if all(order.index((t, 0)) < order.index((t, 1)) for t in range(threads))
    ]


@pytest.mark.parametrize(
    "order", _orders(2), ids=lambda o: " ".join("AB"[t] + "+-"[s] for t, s in o)
)
def test_blocks_in_threads_overlapping_in_any_order_leave_the_collector_as_it_was(
    collecting: bool, order: tuple[tuple[int, int], ...]
) -> None:
    """The order that broke saving and restoring around each block: A in, B in (sees it
    paused), A out (restores on), B out (restores off), and off it stays; so every order."""
    blocks = [Block(raises=t == 1) for t in range(2)]
    for block in blocks:
        block.start()
    inside: set[int] = set()
    for t, leaving in order:
        blocks[t].step(leaving)
        (inside.discard if leaving else inside.add)(t)
        assert gc.isenabled() is (collecting and not inside)
    for block in blocks:
        block.join(timeout=30)
    assert isinstance(blocks[1].error, LookupError)
    assert gc.isenabled() is collecting


def test_nested_blocks_and_one_that_raises_leave_the_collector_as_it_was(
    collecting: bool,
) -> None:
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        with pytest.raises(KeyError), collector_paused():
            raise KeyError("inside")
        assert not gc.isenabled()
    assert gc.isenabled() is collecting
    with pytest.raises(KeyError), collector_paused():
        raise KeyError("inside")
    assert gc.isenabled() is collecting


@pytest.mark.parametrize("format", FORMATS)
def test_schemas_renders_with_the_collector_paused(collecting: bool, format: str) -> None:
    seen: list[bool] = []

    def defs() -> Iterator[ToolDef]:
        for i in range(3):
            seen.append(gc.isenabled())
            yield ToolDef(id=f"t{i}_get", method="GET", path=f"/t{i}", description="Show.")

    assert len(schemas(defs(), format)) == 3
    assert seen == [False] * 3
    assert gc.isenabled() is collecting


def test_generate_renders_with_the_collector_paused(
    collecting: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    render_init = write.render_init_module

    def render_init_seeing() -> str:
        seen.append(gc.isenabled())
        return render_init()

    monkeypatch.setattr(write, "render_init_module", render_init_seeing)
    (tmp_path / "actions").mkdir()
    (tmp_path / "actions" / "index.GET.py").write_text("def handle(ctx):\n    return None\n")
    assert set(render_gen(str(tmp_path))) == {"__init__.py", "routes.py", "tools.py"}
    assert seen == [False]
    assert gc.isenabled() is collecting
