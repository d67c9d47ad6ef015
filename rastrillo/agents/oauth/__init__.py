"""The app as its own OAuth 2.1 authorization server, so MCP clients connect as they expect.

An MCP client finds its way here from the ``WWW-Authenticate`` header of
``/mcp``: protected-resource metadata (RFC 9728) names this app as the
authorization server, whose metadata (RFC 8414) lists the endpoints below. The
client registers itself (RFC 7591), sends the user's browser to authorize,
and trades the code it gets back for tokens. The HTTP side of every endpoint
is the ``mcp`` SDK's own handlers; this package is the provider behind them,
backed by the grants of :mod:`rastrillo.agents.grants` (OAuth is one more way
to obtain a grant, not a second token store).

The rules this provider adds to the SDK's:

- Every client is public (``token_endpoint_auth_method`` ``none``): with
  PKCE S256, exact redirect URIs and single-use codes a client secret proves
  nothing more, and not issuing one leaves no secret to store. Redirect URIs
  are ``https``, ``http`` on a loopback host, or a private-use scheme with a
  dot in it (``com.example.app:/cb``, RFC 8252); never a fragment or a user.
- A redirect URI matches a registered one exactly (both in the URL
  standard's normal form), except that a loopback ``http`` URI may use any
  port (RFC 8252).
- An agent name is one that none of the user's live grants has, in any case: refused
  on the consent page, and again, in one step with the insert, when the code is
  traded (:class:`grants.AgentNameTaken`).
- PKCE is S256 only: the SDK refuses any other method, and the challenge
  must be a SHA-256 digest in base64url (43 characters).
- ``resource``, when sent to authorize or token, must be ``<origin>/mcp``, named once.
- The authorize endpoint only records the request and sends the browser to
  the consent page (``/_rastrillo/agents/authorize``), where the signed-in
  user allows or denies it; the code is made only when they allow. A request
  it refuses is answered to the person, never sent on to the client's
  redirect URI, which anyone may have registered (no open redirector).
- Codes are random (256 bits), stored as digests, expire after two minutes
  and are used once: a second use revokes the grant the first one made.
- Refresh tokens rotate; one used twice revokes the whole grant (in grants).
- Registration and authorize store a row for anyone who asks, so each is rate
  limited (429 with ``Retry-After`` past the limit), in counts that no web page the
  person opens can spend for another client: on a developer's machine every page
  reaches the app from the address their MCP client comes from. A registration is
  JSON (RFC 7591), which no page can send without CORS; one a page sends (it carries
  an ``Origin``) is counted for that origin at that address, and one a program sends
  for its address. Authorize is counted per registered client, once the request is
  valid. A client that no authorization or grant ever named is forgotten a day after
  it registered: a flood of them neither fills the database nor lasts. What a row keeps
  is bounded too: a registration to 8 KiB, a request's ``state`` to :data:`STATE_MAX`.
- A refresh stores a token pair, so refreshes are rate limited per grant
  (:data:`REFRESHES_PER_GRANT`), counted before the refresh token is used.
- A database that cannot answer for a moment is answered 503 with ``Retry-After`` at
  every endpoint, as on every page (``availability``), authorize included: the SDK's
  handler would answer it 400 ``server_error``.

One module for each concern, read bottom-up: the person's answer on the consent page
(`consent`), what a client may register (`registration`), what stands before the
endpoints (`guards`: rate limits, the body limit, 503, CORS), and the SDK's provider with
the endpoints that serve it (`authority`). The names the framework, the consent page and
the tests use are here.
"""

from rastrillo.agents.oauth.authority import STATE_MAX, Authority
from rastrillo.agents.oauth.consent import (
    CODE_TTL,
    REQUEST_TTL,
    AuthorizationGone,
    BadAgentName,
    PendingAuthorization,
    allow,
    deny,
    pending,
)
from rastrillo.agents.oauth.guards import (
    AUTHORIZATIONS_PER_CLIENT,
    RATE_WINDOW,
    REFRESHES_PER_GRANT,
    REGISTRATIONS_FROM_PAGES,
    REGISTRATIONS_PER_ADDRESS,
    REGISTRATIONS_PER_ORIGIN,
)

__all__ = [
    "AUTHORIZATIONS_PER_CLIENT",
    "CODE_TTL",
    "RATE_WINDOW",
    "REFRESHES_PER_GRANT",
    "REGISTRATIONS_FROM_PAGES",
    "REGISTRATIONS_PER_ADDRESS",
    "REGISTRATIONS_PER_ORIGIN",
    "REQUEST_TTL",
    "STATE_MAX",
    "Authority",
    "AuthorizationGone",
    "BadAgentName",
    "PendingAuthorization",
    "allow",
    "deny",
    "pending",
]
