"""Who may act for whom: agent grants and tokens, MCP at ``/mcp``, and OAuth for it.

The submodules are imported where they are used (the MCP SDK is heavy); the
paths they are served at are named here (defined in `rastrillo.routing`, with the
framework's other paths), for the app to route without importing them.
"""

from rastrillo.routing import MCP_PATH, RESOURCE_METADATA_PATH

__all__ = ["MCP_PATH", "RESOURCE_METADATA_PATH"]
