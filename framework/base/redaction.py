"""Secrets never leave tclose: one place that redacts database URLs and any text holding them.

:func:`redact_url` is the only redaction function; every output (messages, logs, the JSON and HTML
reports, the audit table, the YAML of ``tclose init``) goes through it. A URL is parsed with
SQLAlchemy's :class:`~sqlalchemy.engine.URL`; its password and every query parameter that carries
a credential (:data:`CREDENTIAL_PARAMETERS`) become ``***``. Free text is searched for URLs, and
every secret the process has seen (:func:`remember_secret`: passwords read from URLs, from
``password_file``, from credential parameters) is replaced wherever it appears, raw or
percent-encoded.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

if TYPE_CHECKING:  # SQLAlchemy is imported on the first URL to parse (start-up of the command)
    import sqlalchemy as sa

#: Query parameters of a database URL whose values are credentials (lower case; libpq, psycopg,
#: PyMySQL, mysqlclient, ODBC and cloud drivers). ``sslkey``/``sslcert`` are file paths, not
#: secrets, but say where a private key lives: they are hidden too.
CREDENTIAL_PARAMETERS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "pass",
        "passfile",
        "sslpassword",
        "ssl_password",
        "sslkey",
        "ssl_key",
        "sslcert",
        "ssl_cert",
        "sslcrl",
        "token",
        "access_token",
        "auth_token",
        "secret",
        "client_secret",
        "api_key",
        "apikey",
        "private_key",
        "private_key_passphrase",
        "passphrase",
        "credentials",
        "credentials_path",
    }
)
MASK = "***"

#: A URL's scheme and ``://`` (``postgresql+psycopg://``).
URL_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*://"
#: A URL in a text; a trailing ':', ',' or ';' is the sentence's ("on URL: message"), not the
#: URL's (read as part of the database name, it would show as ``test%3A``).
_URL = re.compile(URL_SCHEME + r"[^\s'\"<>`]*[^\s'\"<>`:,;]")
_SECRETS: set[str] = set()
_LOCK = threading.Lock()


#: Words that make any query parameter holding them a credential (``motherduck_token``,
#: ``aws_secret_access_key``, ``db_password``): a driver's own names are not all listed above.
CREDENTIAL_WORDS = ("password", "passwd", "passphrase", "secret", "token", "api_key", "apikey")


def is_credential(parameter: str) -> bool:
    """Whether a URL query parameter carries a credential: one of
    :data:`CREDENTIAL_PARAMETERS`, or a name holding one of :data:`CREDENTIAL_WORDS`."""
    name = parameter.lower()
    return name in CREDENTIAL_PARAMETERS or any(word in name for word in CREDENTIAL_WORDS)


def remember_secret(value: str | None) -> None:
    """Add ``value`` to the secrets scrubbed from every text :func:`redact_url` sees."""
    if value and len(str(value)) >= 3:
        with _LOCK:
            _SECRETS.add(str(value))


def url_secrets(url: sa.URL) -> list[str]:
    """The password and the credential query values of ``url``."""
    found = [url.password] if url.password else []
    for name, value in url.query.items():
        if is_credential(name):
            found.extend([value] if isinstance(value, str) else list(value))
    return [str(v) for v in found if v]


def redact_parsed(url: sa.URL) -> str:
    """A parsed URL as text, its password and credential parameters replaced by ``***``."""
    for secret in url_secrets(url):
        remember_secret(secret)
    query = {k: (MASK if is_credential(k) else v) for k, v in url.query.items()}
    text = url.set(query=query).render_as_string(hide_password=True)
    return text.replace("%2A%2A%2A", MASK)


def _redact_one(text: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(text)
    except Exception:  # not a URL SQLAlchemy reads: hide everything that could be userinfo/query
        # up to the last '@': a password written raw may hold '@', '/', '?' or '#' itself
        head, at, rest = text.rpartition("@")
        if at and "://" in head:
            text = head[: head.index("://") + 3] + MASK + at + rest
        return text.split("?", 1)[0].split("#", 1)[0]
    if not url_secrets(parsed):
        return text  # nothing to hide: unchanged (configuration digests depend on it)
    return redact_parsed(parsed)


def redact_url(text: str | sa.URL, remembered: bool = True) -> str:
    """``text`` (a URL, or any message) with every credential replaced by ``***``.

    With ``remembered`` (the default) the secrets this process has seen are scrubbed too;
    without, the result depends on ``text`` alone (for digests, which must be reproducible).
    """
    if not isinstance(text, str):  # a parsed sqlalchemy URL
        redacted = redact_parsed(text)
    else:
        redacted = _URL.sub(lambda m: _redact_one(m.group(0)), str(text))
    return scrub(redacted) if remembered else redacted


def redacted_document(document: Any, remembered: bool = True) -> Any:
    """A configuration document with every ``url`` value redacted (:func:`redact_url`)."""
    if isinstance(document, Mapping):
        return {
            k: redact_url(v, remembered)
            if k == "url" and isinstance(v, str)
            else redacted_document(v, remembered)
            for k, v in document.items()
        }
    if isinstance(document, list):
        return [redacted_document(v, remembered) for v in document]
    return document


def scrub(text: str) -> str:
    """Replace every remembered secret in ``text`` (raw, percent-encoded or decoded)."""
    with _LOCK:
        known = sorted(_SECRETS, key=len, reverse=True)
    for secret in known:
        for form in {secret, quote(secret, safe=""), quote(secret), unquote(secret)}:
            if len(form) >= 3 and form in text:
                text = text.replace(form, MASK)
    return text
