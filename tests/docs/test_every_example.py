"""Every ```python and ```py block of the README and docs/ is run by some test, or says on
the line above its fence why not: an example no test runs drifts from the code unseen.

Which blocks the tests take is read from their source: each call of ``doc_block`` or
``doc_blocks`` with literal arguments (or a module's string constants) names the blocks it
takes. Reading the calls, not recording them as tests run, gives the same answer whatever
subset of the suite runs, on whichever worker.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from tests.doc_examples import ROOT, doc_actions, doc_block, doc_blocks, fenced

PAGES = ["README.md", *sorted(f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md"))]
RUNNABLE = ("python", "py")
_NOT_TAKERS = {Path("tests/doc_examples.py"), Path(__file__).relative_to(ROOT)}


def _constants(tree: ast.Module) -> dict[str, str]:
    """A module's top-level ``NAME = "text"`` assignments."""
    return {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def _blocks_taken(taker: str, args: list[str]) -> tuple[str, list[str]]:
    """The language and the blocks that ``taker(*args)`` gives its test."""
    if taker == "doc_block":
        return args[1], [doc_block(*args)]
    if taker == "doc_blocks":
        return args[1], doc_blocks(*args)
    return "python", list(doc_actions(*args).values())


@functools.cache
def taken() -> frozenset[tuple[str, str, str]]:
    """(page, language, block) of every block some test takes."""
    found: set[tuple[str, str, str]] = set()
    for file in sorted((ROOT / "tests").rglob("test*.py")):
        if "node_modules" in file.parts or file.relative_to(ROOT) in _NOT_TAKERS:
            continue
        tree = ast.parse(file.read_text(encoding="utf-8"))
        constants = _constants(tree)
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("doc_block", "doc_blocks", "doc_actions")
            ):
                continue
            args = [
                arg.value
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                else constants.get(arg.id)
                if isinstance(arg, ast.Name)
                else None
                for arg in node.args
            ]
            where = f"{file.relative_to(ROOT)}:{node.lineno}"
            assert not node.keywords and all(isinstance(a, str) for a in args), (
                f"{where}: {node.func.id}'s arguments must be literals or module constants"
            )
            language, blocks = _blocks_taken(node.func.id, args)  # type: ignore[arg-type]
            found.update((args[0], language, block) for block in blocks)
    return frozenset(found)


def test_every_python_block_of_the_docs_is_run_by_a_test_or_says_why_not() -> None:
    claimed = taken()
    unrun = [
        f"{page}: ```{block.language} block starting {block.body.splitlines()[0]!r}"
        for page in PAGES
        for block in fenced(page)
        if block.language in RUNNABLE
        and block.not_run is None
        and (page, block.language, block.body) not in claimed
    ]
    assert unrun == []


def test_a_block_said_not_to_run_is_not_taken_by_a_test() -> None:
    """A block marked as not run but run after all: the mark's reason no longer holds."""
    claimed = taken()
    marked = [
        (page, block.language, block.body)
        for page in PAGES
        for block in fenced(page)
        if block.not_run is not None
    ]
    assert [block for block in marked if block in claimed] == []
