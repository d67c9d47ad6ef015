"""`rastrillo generate`: read ``actions/``, write ``gen/``.

The generator never imports an action: it parses each file with :mod:`ast`,
derives the route from the file's path, reads an optional ``TOOL``
declaration, and writes ``gen/`` deterministically (same input, byte-identical
output). Any problem anywhere means nothing is written, and every problem is
reported at once.
"""

from __future__ import annotations

from rastrillo.generate.scan import ActionFile, scan_actions
from rastrillo.generate.write import GEN_DIR, generate, render_gen

__all__ = ["GEN_DIR", "ActionFile", "generate", "render_gen", "scan_actions"]
