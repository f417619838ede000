"""``redact_url``: no password or token survives, everything else does."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from predops.core.redaction import redact_url


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://user:pw@prom:9090/x", "http://***@prom:9090/x"),
        ("https://user@prom", "https://***@prom"),
        ("http://u:p@ss@prom/", "http://***@prom/"),  # an unescaped @ in the password
        ("http://prom:9090/?token=abc", "http://prom:9090/?token=***"),
        (
            "http://prom/api?query=up&Access_Token=abc&step=60",
            "http://prom/api?query=up&Access_Token=***&step=60",
        ),
        ("http://p/?api_key=1&apikey=2&key=3", "http://p/?api_key=***&apikey=***&key=***"),
        ("http://p/?PASSWORD=x;secret=y#auth=z", "http://p/?PASSWORD=***;secret=***#auth=z"),
        ("http://p/?api%5Fkey=1", "http://p/?api%5Fkey=***"),
        ("http://p/?query=up&start=1", "http://p/?query=up&start=1"),
        ("/data/drop/inventory.parquet", "/data/drop/inventory.parquet"),
        (
            "GET http://a:b@h/v?auth=t (x) failed; with url: /v?auth=t&n=1",
            "GET http://***@h/v?auth=*** (x) failed; with url: /v?auth=***&n=1",
        ),
    ],
)
def test_credentials_are_masked_and_the_rest_kept(text: str, expected: str) -> None:
    assert redact_url(text) == expected


secret = st.text("abcdefghijklmnopqrstuvwxyz0123456789-._~!$'()*+,:", min_size=6, max_size=20)


@given(secret, secret, st.sampled_from(["token", "access_token", "X-Api-Key", "apiKey"]))
def test_no_secret_survives(password: str, token: str, name: str) -> None:
    url = f"http://ops:{password}@prom.example:9090/prom?match=up&{name}={token}"
    out = redact_url(url)
    assert f":{password}@" not in out and f"={token}" not in out
    assert out.startswith("http://***@prom.example:9090/prom?match=up&")
    assert redact_url(out) == out
