"""What a client may register (redirect URIs, grant and response types, a name that reads
as itself), and a redirect URI matched against the ones it registered."""

from __future__ import annotations

import re

from mcp.server.auth.provider import RegistrationError
from mcp.shared.auth import InvalidRedirectUriError, OAuthClientInformationFull
from pydantic import AnyUrl

from rastrillo import visible
from rastrillo.registry.validate import unsafe_character

_PRIVATE_SCHEME = re.compile(r"[a-z][a-z0-9+-]*(?:\.[a-z0-9+-]+)+")
LOOPBACK = frozenset({"127.0.0.1", "[::1]", "localhost"})
GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})
_CLIENT_NAME_MAX = 100
_REDIRECT_URIS_MAX = 10
_REGISTRATION_MAX = 8 * 1024
"""The most a client's registration may take stored, as JSON (a client registers its
name, a few redirect URIs and a few links; the request body may be 4 MiB)."""


class Client(OAuthClientInformationFull):
    """A registered client, whose redirect URIs match exactly but for a loopback port."""

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        registered = self.redirect_uris or []
        if redirect_uri is None:
            if len(registered) == 1:
                return registered[0]
            raise InvalidRedirectUriError(
                "redirect_uri is required: this client registered several"
            )
        if any(_same_redirect(redirect_uri, r) for r in registered):
            return redirect_uri
        raise InvalidRedirectUriError("redirect_uri is not one this client registered")


def _same_redirect(asked: AnyUrl, registered: AnyUrl) -> bool:
    if str(asked) == str(registered):
        return True
    return (
        asked.scheme == registered.scheme == "http"
        and asked.host == registered.host
        and asked.host in LOOPBACK
        and (asked.username, asked.password, asked.path, asked.query, asked.fragment)
        == (registered.username, registered.password, registered.path, registered.query, None)
    )


def stored_registration(info: OAuthClientInformationFull) -> str:
    """``info``, a client's registration, checked and made a public client's (no secret:
    every client here is one), as its row stores it: JSON within :data:`_REGISTRATION_MAX`."""
    _check_registration(info)
    info.token_endpoint_auth_method = "none"
    info.client_secret = None
    info.client_secret_expires_at = None
    stored = info.model_dump_json(exclude_none=True)
    if len(stored.encode()) > _REGISTRATION_MAX:
        raise RegistrationError(
            "invalid_client_metadata",
            f"the registration is larger than {_REGISTRATION_MAX // 1024} KiB",
        )
    return stored


def _check_registration(info: OAuthClientInformationFull) -> None:
    if len(info.redirect_uris or []) > _REDIRECT_URIS_MAX:
        raise RegistrationError(
            "invalid_redirect_uri", f"at most {_REDIRECT_URIS_MAX} redirect URIs"
        )
    for uri in info.redirect_uris or []:
        problem = _redirect_problem(uri)
        if problem:
            raise RegistrationError("invalid_redirect_uri", f"{str(uri)[:200]}: {problem}")
    if not set(info.grant_types) <= GRANT_TYPES:
        raise RegistrationError(
            "invalid_client_metadata",
            "grant_types may be authorization_code and refresh_token only",
        )
    if info.response_types != ["code"]:
        raise RegistrationError(
            "invalid_client_metadata", "response_types must be exactly ['code']"
        )
    if info.client_name is not None and len(info.client_name) > _CLIENT_NAME_MAX:
        raise RegistrationError(
            "invalid_client_metadata", f"client_name is longer than {_CLIENT_NAME_MAX} characters"
        )
    if info.client_name is not None and (problem := _name_problem(info.client_name)):
        raise RegistrationError("invalid_client_metadata", f"client_name {problem}")


def _name_problem(name: str) -> str | None:
    """Why a client's name could read as another, or None.

    The consent page shows the name the client chose. One holding a character no tool
    arg may hold (a control character, a bidirectional override: ``validate``'s rule), one
    that shows as nothing or moves the text around it, or one drawn as an ASCII character
    (``visible``: a Cyrillic a in ``Claude``) reads as a name it is not: refused, naming the
    character. The page marks such characters too, in a name stored before this rule."""
    bad = unsafe_character(name)
    if bad is not None:
        return f"holds {visible.label(bad)}, which no text here may hold"
    marked = next((p for p in visible.parts(name) if p.label is not None), None)
    if marked is None:
        return None
    if marked.lookalike:
        return f"holds {marked.label}, which is drawn as an ASCII character it is not"
    return f"holds {marked.label}, which shows as nothing or moves the text around it"


def _redirect_problem(uri: AnyUrl) -> str | None:
    if uri.fragment is not None:
        return "a redirect URI has no fragment"
    if uri.username is not None or uri.password is not None:
        return "a redirect URI has no user or password"
    if uri.scheme == "https":
        return None if uri.host else "an https redirect URI needs a host"
    if uri.scheme == "http":
        return None if uri.host in LOOPBACK else "http is for loopback hosts only; use https"
    if _PRIVATE_SCHEME.fullmatch(uri.scheme):
        return None
    return "use https, http on a loopback host, or an app's own scheme (com.example.app:/)"
