"""Time `rastrillo.tools.schemas` for 1,000 synthetic tools with mixed typed args, five formats.

Goal: all five formats for 1,000 tools in at most 50 ms in total, in one
process after import, so an app can render its tool list on every model turn
without caching it. "cold" is the very first call of each format in this
process; "warm" is the median of repeated calls. `schemas_json` (the same plus
JSON encoding, as `rastrillo tools schemas` prints it) is shown for reference.

"cpu" is the warm median in this process's CPU time (`time.process_time`, 1 ms
resolution on some kernels), which a machine shared with other work slows
far less than the wall clock.

`--frozen` first freezes what import and the registry loaded out of the garbage collector's way, as
`rastrillo serve` does after start-up: the renderer's allocations set off full
collections, which otherwise walk every object import made (tens of thousands).

Run: .venv/bin/python bench/bench_schemas.py [--frozen]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

from rastrillo.registry.declare import Arg, ToolDef, ToolRead, ToolWrite
from rastrillo.tools import FORMATS, schemas, schemas_json

TOOLS = 1_000
REPEAT = 30
GOAL_MS = 50.0


TYPED = [
    ("quantity", Arg("how many", type=int, minimum=1, maximum=10)),
    ("seat", Arg("where to sit", choices=["aisle", "window", "any"], required=False)),
    ("price", Arg("at most this price", type=float, minimum=0, required=False)),
    ("gift", Arg("wrap it", type=bool, required=False)),
    ("note", Arg("a note", required=False, max_length=200, pattern="^[^<>]*$")),
]
"""One of each typed, optional or constrained kind; each tool takes two of them."""


def registry(count: int = TOOLS) -> list[ToolDef]:
    """Half reads, half writes; three args each, a plain id and two typed ones in turn."""
    defs = []
    for i in range(count):
        write = i % 2 == 1
        defs.append(
            ToolDef(
                id=f"things_{i}_id_{'cancel_post' if write else 'get'}",
                method="POST" if write else "GET",
                path=f"/things-{i}/{{id}}" + ("/cancel" if write else ""),
                description=f"Do the thing number {i} to one order, and say what happened. " * 2,
                access=ToolWrite if write else ToolRead,
                args={"id": "the order id", **dict((TYPED * 2)[i % 5 : i % 5 + 2])},
                confirm="Do thing {id} because {reason}?" if write else "",
                source=f"actions/things-{i}/[id].py",
            )
        )
    return defs


def ms(run: Callable[[], object], clock: Callable[[], float] = time.perf_counter) -> float:
    start = clock()
    run()
    return (clock() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frozen", action="store_true", help="gc.freeze() after import")
    frozen = parser.parse_args().frozen
    defs = registry()
    if frozen:
        gc.freeze()
    rows = []
    for fmt in FORMATS:
        cold = ms(lambda fmt=fmt: schemas(defs, fmt))
        warm = statistics.median(ms(lambda fmt=fmt: schemas(defs, fmt)) for _ in range(REPEAT))
        as_json = statistics.median(
            ms(lambda fmt=fmt: schemas_json(defs, fmt)) for _ in range(REPEAT)
        )
        cpu = statistics.median(
            ms(lambda fmt=fmt: schemas(defs, fmt), time.process_time) for _ in range(REPEAT)
        )
        rows.append((fmt, cold, warm, as_json, cpu))
    heap = ", start-up heap frozen" if frozen else ""
    print(
        f"schemas for {TOOLS:,} tools (ms; warm = median of {REPEAT}; cpu = warm in CPU time{heap})"
    )
    print(f"{'format':<18}{'cold':>8}{'warm':>8}{'json':>8}{'cpu':>8}")
    for fmt, *times in rows:
        print(f"{fmt:<18}" + "".join(f"{t:>8.2f}" for t in times))
    totals = [sum(row[i] for row in rows) for i in (1, 2, 3, 4)]
    print(f"{'all five':<18}" + "".join(f"{t:>8.2f}" for t in totals))
    wall = "meets" if max(totals[:2]) <= GOAL_MS else "MISSES"
    cpu = "meets" if totals[3] <= GOAL_MS else "MISSES"
    print(
        f"goal: all five formats <= {GOAL_MS:.0f} ms "
        f"(wall clock, cold and warm: {wall} it; CPU time, warm: {cpu} it)"
    )


if __name__ == "__main__":
    main()
