"""Keep secrets out of text that leaves the process: log lines, stored errors, printed errors.

Two nets, one after the other:

- *Known values.* The entry points register the secrets they were configured with (the
  password in `DATABASE_URL`, `SMTP_PASSWORD`, `WEBHOOK_URL` with its path, query string and
  query values, `TEMPORAL_API_KEY`); `scrub` replaces each wherever it appears, also inside
  text a peer sent back (a webhook receiver that echoes its request line).
- *Shapes.* In any URL the password of `scheme://user:password@host` and the query string
  are replaced, and so are the values of `token=`, `key=`, `password=`... parameters and
  `Basic` / `Bearer` credentials, for the secrets nobody registered.

`scrub` is cheap when there is nothing to replace; call it on every text that is stored or
printed outside the process.
"""

from __future__ import annotations

import base64
import re
import threading
from urllib.parse import parse_qsl, unquote, urlsplit

MASK = "***"
# Shorter values are not registered: replacing "ab" everywhere would mangle every text.
_MIN_SECRET = 3

# scheme://user:password@  (the password runs to the last @ of the token: an unencoded @
# inside a password must not leave its tail behind)
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'\"]*:)\S*@")
# scheme://host/path?query  ->  scheme://host/path?***
_QUERY = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s?#'\"]*)\?[^\s#'\"]*")
# ...?token=abc&...  in a request line or a bare path
_SECRET_PARAM = re.compile(
    r"(?P<head>[?&;](?:[A-Za-z0-9_.-]*(?:token|key|secret|password|passwd|pwd|sig|signature|auth)"
    r"[A-Za-z0-9_.-]*)=)[^&\s#'\"]+",
    re.IGNORECASE,
)

# Authorization: Basic dXNlcjpwYXNz / Bearer eyJ...  (a receiver may echo its headers)
_AUTH_HEADER = re.compile(
    r"(?P<head>\b(?:Basic|Bearer|Token)\s+)[A-Za-z0-9+/=._~-]{8,}", re.IGNORECASE
)

_known: set[str] = set()
_lock = threading.Lock()
_ordered: tuple[str, ...] = ()


def add_secret(value: str | None) -> None:
    """Register a secret value: `scrub` replaces it from now on."""
    global _ordered
    if not value or len(value) < _MIN_SECRET:
        return
    with _lock:
        if value in _known:
            return
        _known.add(value)
        # Longest first, so a URL goes before the password inside it.
        _ordered = tuple(sorted(_known, key=len, reverse=True))


def add_url_secrets(url: str | None) -> None:
    """Register a URL that is a secret as a whole (a webhook with a token in it): the URL,
    its password, its path with the query (a request line), its query string and values."""
    if not url:
        return
    add_secret(url)
    try:
        parts = urlsplit(url)
    except ValueError:  # malformed: the shapes still catch its password and query
        return
    add_secret(parts.password)
    if parts.password is not None:  # httpx sends it as Basic auth; a receiver may echo that
        credentials = f"{unquote(parts.username or '')}:{unquote(parts.password)}"
        add_secret(base64.b64encode(credentials.encode()).decode())
    if parts.query:
        add_secret(parts.query)
        add_secret(f"{parts.path}?{parts.query}")
        for _, value in parse_qsl(parts.query, keep_blank_values=True):
            add_secret(value)
    if len(parts.path) > 1 and parts.path.count("/") > 1:  # /services/T000/B000/XXXX
        add_secret(parts.path)


def add_password_of(url: str | None) -> None:
    """Register only the password of a connection URL (its host and database stay readable)."""
    if not url:
        return
    match = _USERINFO.search(url)
    if match:
        password = match.group(0)[len(match.group("head")) : -1]
        add_secret(password)
    try:
        add_secret(urlsplit(url).password)
    except ValueError:
        pass


def forget_secrets() -> None:
    """Drop every registered value (tests)."""
    global _ordered
    with _lock:
        _known.clear()
        _ordered = ()


def scrub(text: str) -> str:
    """`text` without any registered secret and without URL passwords or query strings."""
    if not text:
        return text
    for secret in _ordered:
        if secret in text:
            text = text.replace(secret, MASK)
    if "://" in text:
        text = _USERINFO.sub(lambda m: f"{m.group('head')}{MASK}@", text)
        text = _QUERY.sub(lambda m: f"{m.group('head')}?{MASK}", text)
    if "=" in text:
        text = _SECRET_PARAM.sub(lambda m: f"{m.group('head')}{MASK}", text)
    text = _AUTH_HEADER.sub(lambda m: f"{m.group('head')}{MASK}", text)
    return text
