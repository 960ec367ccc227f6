"""Which writers' networks a session on another host may use: only those whose way out is
the proxy on the controller (or none), so the provider's key never reaches the host."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from writerpool.config.network import check_remote_network
from writerpool.errors import WriterpoolError
from writerpool.pool.remote_container import AGENT_DIR_CAP, push_agent_dir
from writerpool.runtime.remote import RemotePodman


@pytest.mark.parametrize("network", ["provider", "none"])
def test_the_proxied_and_closed_networks_are_offered(network: str) -> None:
    check_remote_network("th", network, None)


@pytest.mark.parametrize(
    ("network", "allow"),
    [("slirp4netns", None), ("provider", ("mirror.test",))],
)
def test_an_open_network_or_an_allowlist_is_refused_with_its_code(
    network: str, allow: tuple[str, ...] | None
) -> None:
    with pytest.raises(WriterpoolError) as exc:
        check_remote_network("th", network, allow)
    assert exc.value.code == "remote_session_unsupported"
    assert "th" in exc.value.message


def test_an_agent_directory_over_the_cap_is_refused_before_the_host_is_asked(
    tmp_path: Path,
) -> None:
    (tmp_path / "settings.json").write_bytes(b"x" * (AGENT_DIR_CAP + 1))
    untouched = cast(RemotePodman, object())  # any use of the host would raise
    with pytest.raises(WriterpoolError) as refused:
        push_agent_dir(untouched, "w-w1", tmp_path)
    assert refused.value.code == "session_start_failed"
    assert "too large" in refused.value.message
