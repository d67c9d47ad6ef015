"""The examples of the user docs (README.md, docs/*.md), pulled out to be run as tests.

Every page's examples run as a reader would use them, by these conventions:

- A ```python block runs as it stands. A ```py block is a fragment: it needs
  what the prose around it gives it (an app, its ``OPTIONS``, a session, a
  ``ctx``), so the page's own test supplies that and runs the fragment verbatim,
  ``await`` allowed at its top level (docs/agents.md's:
  tests/docs/test_agents_fragments.py; a model provider's SDK is pointed at a
  fake of its API there). A fragment ending in ``...`` leaves the rest to the
  test. docs/mcp.md's fragments (agent SDKs connecting to a served app) are
  read, not run, each saying why. ```sh and ```console blocks are commands: the
  tests run the ones a reader copies for an app folder (``rastrillo ...``,
  ``python app.py``).
- A block whose first line is ``# actions/<path>`` is that action file,
  verbatim: the test writes it into a real app folder, generates, and requests
  it through the real app stack.
- A block that sets ``OPTIONS = rastrillo.Options(`` is an app.py, after the
  scaffold's imports (``Path``, ``rastrillo``, ``routes``, ``tools``); in
  ``Options(...,`` (or ``Options(`` then ``...,`` on the next line) the ``...``
  stands for the settings every app.py passes, which the test puts in its place
  (``app_dir``, ``routes``, ``tools``, see ``app_py``). The page's blocks
  before it supply the rest of its names, and a later block setting
  ``OPTIONS`` again replaces it.
- A block that uses ``ctx`` outside any ``def`` is the body of a ``handle``:
  the test indents it into ``def handle(ctx):`` and appends what that handle
  answers once the example has run (``handle_py``).
- The other ```python blocks of a page run in order in one namespace, as a
  reader pastes them into one module.

Every ```python and ```py block is taken by some test with :func:`doc_block` or
:func:`doc_blocks`, their arguments written as literals (or a module's string
constants) so that tests/docs/test_every_example.py can tell which; a block no test
runs says why on the line above its fence, ``<!-- not run: why -->``.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[1]

_FENCE = re.compile(r"^(?:<!-- not run: ([^\n]+?) -->\n)?```([\w-]*)\n(.*?)^```$", re.S | re.M)
_ELIDED_SETTINGS = re.compile(r"Options\(\s*\.\.\.,")

APP_SETTINGS = "app_dir=Path(__file__).resolve().parent, routes=routes(), tools=tools(),"
APP_IMPORTS = "from pathlib import Path\n\nimport rastrillo\nfrom gen import routes, tools\n\n"


@dataclass(frozen=True)
class Fenced:
    language: str
    body: str
    not_run: str | None
    """Why no test runs it, as its ``<!-- not run: ... -->`` line says; None if one does."""


def fenced(page: str) -> list[Fenced]:
    """Every fenced block of ``page`` (a path from the repository root), in order."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return [Fenced(tag, body, why or None) for why, tag, body in _FENCE.findall(text)]


def doc_blocks(page: str, language: str) -> list[str]:
    """The fenced blocks of ``page`` in ``language``, in order: a test that takes them
    this way runs them all."""
    return [block.body for block in fenced(page) if block.language == language]


def doc_block(page: str, language: str, containing: str) -> str:
    """The one block of ``page`` in ``language`` that contains ``containing``."""
    [block] = [b for b in doc_blocks(page, language) if containing in b]
    return block


def doc_actions(page: str) -> dict[str, str]:
    """The action files ``page`` shows (its ```python blocks whose first line is
    ``# actions/<path>``), by their path under ``actions/``."""
    blocks = doc_blocks(page, "python")
    return {action_path(block): block for block in blocks if block.startswith("# actions/")}


def app_py(*blocks: str) -> str:
    """An app.py of the given blocks, each ``Options(...,`` given the settings it elides."""
    assert any("OPTIONS = rastrillo.Options(" in block for block in blocks), "no block sets OPTIONS"
    body = "\n\n".join(_ELIDED_SETTINGS.sub(f"Options({APP_SETTINGS}", block) for block in blocks)
    return APP_IMPORTS + body


def handle_py(body: str, answer: str, imports: str = "") -> str:
    """An action file whose ``handle`` runs ``body`` then returns ``answer``."""
    return f"{imports}\n\ndef handle(ctx):\n{textwrap.indent(body, '    ')}    return {answer}\n"


def action_path(block: str) -> str:
    """The path under ``actions/`` that a block's first line, ``# actions/<path>``, names."""
    first = block.splitlines()[0]
    assert first.startswith("# actions/"), first
    return first.removeprefix("# actions/")
