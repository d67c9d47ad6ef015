"""Logging for the processes `rastrillo.run` starts: the server and the sidecar."""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from numbers import Number

from rastrillo.clock import SYSTEM_CLOCK, Clock
from rastrillo.visible import for_terminal, literal

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
CONTINUATION = "  | "
"""What begins each line of a record after its first (its traceback's, its stack's): a
record's first line begins with its time, so no line of a traceback reads as a record."""
REPEAT_WINDOW = 60.0
"""A message repeated within this many seconds is counted, not written again."""


@dataclass(frozen=True)
class Due:
    """An event :class:`Repeats` says to write: how many were held back before it."""

    held: int
    """Events held back since the last one of its key written."""
    shared: bool
    """Its key was not remembered (too many keys at once): ``held`` counts the events of
    every key so treated, not of its key alone."""

    def since(self, events: str, of_key: str, of_shared: str) -> str:
        """What the line written adds about those held back before it, or nothing:
        `` (3 more refusals of this client held back since the last line)``, with
        ``of_shared`` in place of ``of_key`` when ``held`` counts other keys' too."""
        if not self.held:
            return ""
        of = of_shared if self.shared else of_key
        return f" ({self.held} more {events} {of} held back since the last line)"


class Repeats:
    """Per key, the first event and then at most one a window; those between are counted.

    What a log line is keyed on may be the sender's choice (a session id presented, say):
    at most ``most`` keys are remembered at once, a key whose window passed is forgotten
    to make room, and the events of a key that finds no room share one count and one
    window. So memory holds ``most + 1`` keys, and a window writes ``most + 1`` lines,
    whatever is sent. Thread-safe: a worker thread may ask while another does.
    """

    def __init__(self, window: float = REPEAT_WINDOW, most: int = 1000) -> None:
        self.window = window
        self.most = most
        self._seen: dict[Hashable, tuple[float, int]] = {}
        """key → (when its last event was written, how many were held back since)."""
        self._full_until = float("-inf")
        """When full, the first instant a key's window may have passed: till then there is
        nothing to forget, and a flood of new keys costs no pass over those remembered."""
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._seen)

    def due(self, key: Hashable, now: float) -> Due | None:
        """An event of ``key`` at ``now`` (a monotonic clock's seconds): :class:`Due` to
        write it, None to hold it back."""
        with self._lock:
            shared = key not in self._seen and not self._room(now)
            if shared:
                key = _SHARED
            last, held = self._seen.get(key, (float("-inf"), 0))
            if now - last < self.window:
                self._seen[key] = (last, held + 1)
                return None
            self._seen[key] = (now, 0)
            return Due(held, shared)

    def _room(self, now: float) -> bool:
        """Whether a new key may be remembered, forgetting those whose window passed."""
        if len(self._seen) - (_SHARED in self._seen) < self.most:
            return True
        if now < self._full_until:
            return False
        self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self.window}
        if len(self._seen) - (_SHARED in self._seen) < self.most:
            return True
        # A key's instant only moves on, so none is forgotten before the oldest one's is.
        self._full_until = min(last for last, _ in self._seen.values()) + self.window
        return False


_SHARED = object()
"""The key of every event whose own key :class:`Repeats` had no room for."""


class RepeatFilter(logging.Filter):
    """Write a repeated warning or error (same logger, level, message template and error
    type) once per window, and with the next one say how many were held back: a fault
    repeated on every request, or every accept, must not fill the disk."""

    def __init__(self, window: float = REPEAT_WINDOW, clock: Clock = SYSTEM_CLOCK):
        super().__init__()
        self.window = window
        self.clock = clock
        self._repeats = Repeats(window)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        error = record.exc_info[0] if record.exc_info else None
        due = self._repeats.due(
            (record.name, record.levelno, record.msg, error), self.clock.monotonic()
        )
        if due is None:
            return False
        if due.held:
            like = "like this or of other kinds" if due.shared else "like this"
            record.msg = f"{record.msg} ({due.held} more {like} in the last {self.window:.0f} s)"
        return True


class OneLineFilter(logging.Filter):
    """A record's message on one line, each control or invisible character escaped, once.

    What a client chose reaches messages as their arguments: uvicorn's access line
    names the client address, which is what a trusted proxy's X-Forwarded-For says,
    any byte a header allows. A C1 CSI there drives the terminal tailing the log; a
    NEL or a line separator starts a line that reads as another record. So the template
    and each argument are escaped before they are put together: an argument written
    with ``%s`` as :func:`~rastrillo.visible.for_terminal` escapes it, one written with
    ``%r`` as :func:`~rastrillo.visible.literal` does (its repr, whose escapes are not
    escaped again: ``'\\x9b'``, never ``'\\\\x9b'``). A traceback is not the message:
    :class:`IndentingFormatter` writes it.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.isascii() and message.isprintable() and "\\" not in message:
            return True  # plain whole, so plain in every part: nothing to escape
        args = record.args
        shown: object = None
        if args and isinstance(args, Mapping):
            shown = {k: _shown(v) for k, v in args.items()}
        elif args:
            shown = tuple(_shown(v) for v in args)
        template = for_terminal(str(record.msg))
        escaped = template if shown is None else template % shown
        if shown is not None and for_terminal(escaped) != escaped.replace("\\", "\\\\"):
            # What the parts did not show alone, put together: a number written with %c
            # (an ESC), a Cyrillic letter an argument brings into the template's Latin
            # word ("p%sypal"). Escaped whole then, its escapes' backslashes doubled.
            escaped = for_terminal(escaped)
        # Left as it is when nothing needed escaping: what else reads the record (a
        # handler of the app's) still finds its template and arguments.
        if escaped != message:
            record.msg, record.args = escaped, None
        return True


def _shown(value: object) -> object:
    """A log argument as :class:`OneLineFilter` writes it: a number as it is (``%d``,
    ``%.1f`` still apply; its text is plain), anything else escaped as it is written."""
    return value if isinstance(value, Number) else _Escaped(value)


class _Escaped:
    """A log argument whose ``%s`` is :func:`for_terminal` of its text and whose ``%r`` is
    :func:`~rastrillo.visible.literal` of it."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __str__(self) -> str:
        return for_terminal(str(self.value))

    def __repr__(self) -> str:
        return literal(self.value)


class IndentingFormatter(logging.Formatter):
    """A record's traceback and stack below its first line, each of their lines begun
    with :data:`CONTINUATION` and escaped as a message is.

    An exception's message is often made of what a client sent (``ValueError(f"bad
    value {text}")``) and a traceback ends with it: a newline there began a line that
    read as a record of its own, a CSI drove the terminal. Escaped line by line, the
    traceback keeps its lines and says all it said; only the lines of one record
    begin with its time.
    """

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        text = self.formatMessage(record)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)  # kept plain, as logging does
        below = (record.exc_text, record.stack_info and self.formatStack(record.stack_info))
        lines = [line for part in below if part for line in part.split("\n")]
        return "".join([text, *(f"\n{CONTINUATION}{for_terminal(line)}" for line in lines)])


def configure_logging(level: int = logging.INFO) -> None:
    """Logs from ``level`` up to stderr with time and logger name, repeats held back, each
    message on one line and each traceback line under it, unless the app configured
    logging."""
    if not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(IndentingFormatter(FORMAT))
        handler.addFilter(RepeatFilter())  # first: it keys on the message's template
        handler.addFilter(OneLineFilter())
        logging.basicConfig(level=level, handlers=[handler])
