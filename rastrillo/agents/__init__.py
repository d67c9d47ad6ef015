"""Who may act for whom: agent grants and tokens, MCP at ``/mcp``, and OAuth for it.

The submodules are imported where they are used (the MCP SDK is heavy); the
paths they are served at are here, for the app to route without importing them.
"""

MCP_PATH = "/mcp"
"""Where ``Options(mcp=True)`` serves MCP (Streamable HTTP)."""
RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource"
"""The protected-resource metadata (RFC 9728) a 401 from ``/mcp`` points to."""
