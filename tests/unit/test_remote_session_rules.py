"""Which writers' networks a session on another host may use: only those whose way out is
the proxy on the controller (or none), so the provider's key never reaches the host."""

from __future__ import annotations

import pytest

from writerpool.errors import WriterpoolError
from writerpool.sessions.remote import check_supported


@pytest.mark.parametrize("network", ["provider", "none"])
def test_the_proxied_and_closed_networks_are_offered(network: str) -> None:
    check_supported("th", network, None)


@pytest.mark.parametrize(
    ("network", "allow"),
    [("slirp4netns", None), ("provider", ("mirror.test",))],
)
def test_an_open_network_or_an_allowlist_is_refused_with_its_code(
    network: str, allow: tuple[str, ...] | None
) -> None:
    with pytest.raises(WriterpoolError) as exc:
        check_supported("th", network, allow)
    assert exc.value.code == "remote_session_unsupported"
    assert "th" in exc.value.message
