"""`rastrillo generate` over 1,000 action files, as a whole command.

Goal: at most 0.2 s for the whole command (interpreter start included). The
commands run as a user's Python runs them, with its bytecode cache (in a
private folder, filled by one untimed run), and again with
``PYTHONDONTWRITEBYTECODE=1``, where every start compiles the modules it
imports. Baselines, run alternately in the same rounds: a bare interpreter
start, and the start plus ``import rastrillo.cli.main``; the ratio shows what
generate itself costs.

    python bench/bench_generate.py [--files 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
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


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp) / "app"
        make_app(app, args.files)
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        uncached = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        generate = [*RASTRILLO, "generate", str(app)]
        commands = {
            "generate": (generate, cached),
            "generate, no bytecode cache": (generate, uncached),
            "bare start (python -c pass)": ([sys.executable, "-c", "pass"], cached),
            "start + import rastrillo.cli.main": (
                [sys.executable, "-c", "import rastrillo.cli.main"],
                cached,
            ),
        }
        for cmd, env in commands.values():  # fills the bytecode cache
            subprocess.run(cmd, check=True, capture_output=True, env=env)
        runs: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, (cmd, env) in commands.items():
                shutil.rmtree(app / "gen", ignore_errors=True)
                runs[name].append(timed(cmd, env))
        subprocess.run(generate, check=True, capture_output=True, env=cached)
        check = statistics.median(
            timed([*RASTRILLO, "generate", "--check", str(app)], cached) for _ in range(3)
        )
    median = {name: statistics.median(times) for name, times in runs.items()}
    print(
        f"rastrillo generate over {args.files} action files (half read tools, half write), "
        f"median of {args.rounds} (min-max)"
    )
    for name, times in runs.items():
        print(f"  {name + ':':<36} {median[name]:.3f} s ({min(times):.3f}-{max(times):.3f})")
    print(f"  {'generate --check:':<36} {check:.3f} s")
    print(
        "  goal: generate at most 0.2 s; it costs "
        f"{median['generate'] / median['bare start (python -c pass)']:.1f}x a bare start"
    )
    print(f"  load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
