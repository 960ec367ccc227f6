"""Which writers' networks a session on another host may use: only those whose way out is
the proxy on the controller (or none), so the provider's key never reaches the host."""

from __future__ import annotations

from pathlib import Path

import pytest

from writerpool.config.hosts import HostConfig, parse_ssh_url
from writerpool.config.network import check_remote_network
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.runtime.host import writer_at
from writerpool.runtime.hosts import WriterHosts
from writerpool.runtime.local import LocalPodman
from writerpool.runtime.remote import RemotePodman
from writerpool.runtime.ssh import SshRoute
from writerpool.runtime.volumes import AGENT_DIR_CAP


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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Neither a podman client nor ssh exists: any question to the host would fail otherwise.
    monkeypatch.setenv("WRITERPOOL_PODMAN", str(tmp_path / "no-podman"))
    target = parse_ssh_url("ssh://wp@th.test:22/run/user/1000/podman/podman.sock")
    ssh = SshRoute("th", target, tmp_path / "id", tmp_path / "known", binary=str(tmp_path / "no"))
    host = RemotePodman(ssh, tmp_path / "api.sock")
    writer = writer_at(Paths.from_env(), "w-w1", host.name)
    with pytest.raises(WriterpoolError) as refused, host.agent_dir(writer) as agent_dir:
        (agent_dir / "settings.json").write_bytes(b"x" * (AGENT_DIR_CAP + 1))
    assert refused.value.code == "session_start_failed"
    assert "too large" in refused.value.message


def test_a_host_over_ssh_refuses_an_open_network_for_its_writers(tmp_path: Path) -> None:
    target = parse_ssh_url("ssh://wp@th.test:22/run/user/1000/podman/podman.sock")
    host = RemotePodman(SshRoute("th", target, tmp_path / "id", tmp_path / "known"),
                        tmp_path / "api.sock")  # fmt: skip
    host.check_network("provider", None)
    with pytest.raises(WriterpoolError) as refused:
        host.check_network("slirp4netns", None)
    assert refused.value.code == "remote_session_unsupported"
    LocalPodman().check_network("slirp4netns", ("mirror.test",))  # this machine: any


def test_a_set_of_hosts_asks_each_hosts_kind_without_connecting(tmp_path: Path) -> None:
    th = HostConfig(url="ssh://wp@th.test:22/run/user/1000/podman/podman.sock",
                    identity=tmp_path / "id", known_hosts=tmp_path / "known")  # fmt: skip
    with WriterHosts({"th": th}, LocalPodman()) as hosts:
        hosts.check_network("local", "slirp4netns", ("mirror.test",))  # this machine: any
        hosts.check_network("th", "provider", None)
        with pytest.raises(WriterpoolError) as refused:
            hosts.check_network("th", "slirp4netns", None)
        assert refused.value.code == "remote_session_unsupported"
        with pytest.raises(WriterpoolError) as unknown:
            hosts.check_network("elsewhere", "none", None)
        assert unknown.value.code == "host_unknown"
        assert hosts._open == {}  # no connection was made (th.test would not answer)
