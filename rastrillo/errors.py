"""The framework's error hierarchy.

Every error a user can cause by a mistake (a bad action file, a bad command
line, a bad configuration) is a :class:`RastrilloError`, so the command line
can print its message and exit non-zero without a traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import FrameType


def written(value: object) -> str:
    """``repr(value)``, or what kind of value it is where it cannot be written: an integer
    of more than 4,300 digits (or a list holding one) makes ``repr`` raise ``ValueError``,
    and an object handed over in-process may raise anything from its ``__repr__``. A value
    a call holds must never turn its refusal or its audit row into that."""
    try:
        return repr(value)
    except Exception:
        return f"<a {type(value).__name__} that cannot be written>"


class RastrilloError(Exception):
    """Base class for errors caused by the app or its configuration."""


class ConfigError(RastrilloError):
    """`Options` or the environment is not usable as given."""


class UnknownField(RastrilloError, TypeError):
    """A keyword no field of ``rastrillo.Options``, ``Tool`` or ``Arg`` has: a misspelling.

    One line names the statement that wrote it, the keyword and the field meant,
    where Python's own ``TypeError`` named only the keyword, deep in a traceback.
    Still a `TypeError`, as that one was.
    """


def unknown_field(kind: str, name: str, fields: Sequence[str]) -> str:
    """``kind has no field 'descripton'; did you mean 'description'?``, or the fields it has."""
    meant = closest_field(name, fields)
    hint = f"did you mean {meant!r}?" if meant else f"it takes {', '.join(fields)}"
    return f"{kind} has no field {name!r}; {hint}"


def closest_field(name: str, fields: Sequence[str]) -> str | None:
    """The field ``name`` most likely misspells (difflib's ratio at least 0.6), if any."""
    from difflib import get_close_matches  # only when a field is misspelt

    close = get_close_matches(name, fields, n=1)
    return close[0] if close else None


def refuse_unknown_fields(kind: str, given: Iterable[str], fields: Sequence[str]) -> None:
    """Raise `UnknownField` for the first of ``given`` that is not one of ``fields``, naming
    the file and line of the statement outside the framework that called ``kind``."""
    for name in given:
        if name not in fields:
            one_line_if_it_ends_the_script()
            raise UnknownField(f"{_caller()}: {unknown_field(kind, name, fields)}")


_PACKAGE = os.path.dirname(__file__) + os.sep


def _caller() -> str:
    """``file:line`` of the innermost frame outside this package (and Python's importlib):
    the app's own statement, relative to the working directory when it is under it."""
    frame = sys._getframe(1)
    while frame.f_back is not None and (frame.f_code.co_filename.startswith((_PACKAGE, "<"))):
        frame = frame.f_back
    path = frame.f_code.co_filename
    relative = os.path.relpath(path) if os.path.isabs(path) else path
    where = path if relative.startswith("..") else relative
    return f"{where}:{frame.f_lineno}"


def one_line_if_it_ends_the_script() -> None:
    """Called where a user's mistake is raised: if it is raised as ``python app.py`` loads
    (its top-level statements, and the action files they load through ``gen/``), have it
    print as one line should nothing catch it, as the command line says a mistake.

    Only then: ``import rastrillo`` changes no process-wide hook, so a program that uses
    Rastrillo from its functions (its tests, a library) keeps Python's own traceback.
    """
    if _loading_the_script(sys._getframe(1)):
        print_mistakes_as_one_line()


def _loading_the_script(frame: FrameType) -> bool:
    """Whether ``frame`` runs as the main script file loads: every frame below it is
    module-level code (the script's, an action's), Python's own (an import, a dataclass's
    ``__init__``), Rastrillo's or the app's ``gen/``, down to the script's top level."""
    while frame.f_back is not None:
        code = frame.f_code
        if not (
            code.co_name == "<module>"
            or code.co_filename.startswith((_PACKAGE, "<"))
            or frame.f_globals.get("__package__") == "gen"
        ):
            return False
        frame = frame.f_back
    top = frame.f_globals
    return (
        frame.f_code.co_name == "<module>"
        and top.get("__name__") == "__main__"
        and "__file__" in top
    )


def print_mistakes_as_one_line() -> None:
    """Have an app's mistake that reaches the top of the process print as one line, as the
    command line prints it, instead of a traceback through the framework. Any other
    exception still goes to the hook there was. ``RASTRILLO_TRACEBACK=1`` shows the
    traceback too."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, tb: object) -> None:
        if not isinstance(error, RastrilloError) or os.environ.get("RASTRILLO_TRACEBACK"):
            previous(kind, error, tb)  # type: ignore[arg-type]
            return
        from rastrillo.visible import for_terminal

        sys.stderr.write(f"error: {for_terminal(str(error))}\n")

    if getattr(previous, "__qualname__", "") != hook.__qualname__:
        sys.excepthook = hook


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an app folder: a file, an optional line, a message."""

    file: str
    line: int | None
    message: str

    def __lt__(self, other: Problem) -> bool:
        """File by file, what is wrong with the file as a whole (no line) first, then by
        line: the order problems are listed in. The fields' own order would compare a
        missing line with a number, which raises."""
        mine = (self.file, self.line or 0, self.message)
        return mine < (other.file, other.line or 0, other.message)

    def __str__(self) -> str:
        """One line, for a terminal: a file name is anyone's choice in a cloned folder (all
        but ``/``), so an ESC sequence or a line break in it is printed escaped."""
        from rastrillo.visible import for_terminal  # only when a problem is shown

        where = f"{self.file}:{self.line}" if self.line else self.file
        return for_terminal(f"{where}: {self.message}")


class GenerateError(RastrilloError):
    """`rastrillo generate` refused the app folder; every problem is listed."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(problems)
        super().__init__("\n".join(str(p) for p in self.problems))
