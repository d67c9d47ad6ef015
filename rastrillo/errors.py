"""The framework's error hierarchy.

Every error a user can cause by a mistake (a bad action file, a bad command
line, a bad configuration) is a :class:`RastrilloError`, so the command line
can print its message and exit non-zero without a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass


class RastrilloError(Exception):
    """Base class for errors caused by the app or its configuration."""


class ConfigError(RastrilloError):
    """`Options` or the environment is not usable as given."""


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with an app folder: a file, an optional line, a message."""

    file: str
    line: int | None
    message: str

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
