"""`rastrillo generate` over 1,000 action files, as a whole command.

Goal: under 1.5 s for the whole command (interpreter start included). The
baseline, run alternately in the same run, is the interpreter starting and
importing rastrillo — so the ratio shows what generate itself costs.

    python bench/bench_generate.py [--files 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RASTRILLO = [sys.executable, "-m", "rastrillo.cli.main"]

READ = '''"""GET {path}."""

import rastrillo

TOOL = rastrillo.Tool(
    description="Show item {i} of section {s}.",
    args={{"id": "the item id"}},
)


def handle(ctx):
    return ctx.json({{"section": {s}, "id": ctx.params["id"]}})
'''

WRITE = '''"""POST {path}."""

import rastrillo

TOOL = rastrillo.Tool(
    description="Change item {i} of section {s}.",
    access=rastrillo.ToolWrite,
    args={{"id": "the item id", "note": "a note"}},
    confirm="Change item {{id}} with {{note}}?",
)


def handle(ctx):
    return ctx.json({{"changed": ctx.params["id"]}})
'''


def make_app(root: Path, count: int) -> None:
    for i in range(count):
        section = i // 20
        write = i % 2 == 1
        name = f"item{i}/[id].{'POST' if write else 'GET'}.py"
        path = root / "actions" / f"s{section}" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        template = WRITE if write else READ
        path.write_text(template.format(path=f"/s{section}/item{i}/{{id}}", i=i, s=section))


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp)
        make_app(app, args.files)
        generate = [*RASTRILLO, "generate", str(app)]
        baseline = [sys.executable, "-c", "import rastrillo.cli.main"]
        runs: dict[str, list[float]] = {"generate": [], "baseline": []}
        for _ in range(args.rounds):
            shutil.rmtree(app / "gen", ignore_errors=True)
            runs["generate"].append(timed(generate))
            runs["baseline"].append(timed(baseline))
        check = timed([*RASTRILLO, "generate", "--check", str(app)])
    gen, base = statistics.median(runs["generate"]), statistics.median(runs["baseline"])
    print(f"rastrillo generate over {args.files} action files (half of them tools), "
          f"median of {args.rounds}")
    print(f"  generate:            {gen:.3f} s (goal < 1.5 s)")
    print(f"  generate --check:    {check:.3f} s")
    print(f"  baseline (start + import): {base:.3f} s; generate costs {gen / base:.1f}x that")


if __name__ == "__main__":
    main()
