"""The ``rastrillo`` command."""
