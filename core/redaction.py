"""Credentials out of URLs before they are printed or stored.

An input named on the command line or in the scheduler's configuration is quoted in
error messages, reports, the ingest log, quarantine rows and run records. A URL may
carry a password (``http://user:pass@host``) or a token in its query
(``?access_token=...``); :func:`redact_url` keeps everything else readable.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"

SECRET_WORDS = (
    "token",
    "key",
    "password",
    "passwd",
    "pwd",
    "secret",
    "auth",
    "credential",
    "signature",
    "sig",
    "session",
)
"""A query parameter whose name (case-insensitive, percent-decoding undone) contains one
of these has its value masked: ``token``, ``access_token``, ``api_key``, ``apikey``,
``X-Amz-Signature``, ``client_secret``, ... Masking a harmless one costs nothing."""

_USERINFO = re.compile(r"(?<=//)[^/?#\s]*@")
"""``user:pass@`` right after a URL's ``//``, up to its last ``@`` (a host holds none)."""
_QUERY_PAIR = re.compile(r"(?<=[?&;])([^=&;#\s]+)=([^&;#\s]*)")


def _mask_pair(m: re.Match[str]) -> str:
    name = m.group(1)
    if any(word in unquote(name).lower() for word in SECRET_WORDS):
        return f"{name}={MASK}"
    return m.group(0)


def redact_url(text: str) -> str:
    """``text`` with every URL's user-info replaced by ``***@`` and the values of
    token-like query parameters by ``***``.

    ``text`` may be one URL or a message that quotes URLs (or only their path and query);
    anything else passes unchanged, so it is safe to apply to any input name.
    """
    return _QUERY_PAIR.sub(_mask_pair, _USERINFO.sub(MASK + "@", text))
