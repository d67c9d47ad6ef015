"""Logging for the processes `rastrillo.run` starts: the server and the sidecar."""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def configure_logging() -> None:
    """INFO logs to stderr with time and logger name, unless the app configured logging."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format=FORMAT)
