"""[hosts.NAME] parsing, the pinned ssh argv, how ssh failures are named, and doctor's
judgement of a host's facts (recorded `podman info`)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from writerpool.config.hosts import HostConfig, parse_ssh_url
from writerpool.config.models import parse_config
from writerpool.config.modes import ContainerSettings, host_for
from writerpool.doctor.remote import judge_host
from writerpool.errors import WriterpoolError
from writerpool.runtime.info import PodmanInfo
from writerpool.runtime.probes import _usable
from writerpool.runtime.remote_info import RemoteFacts
from writerpool.runtime.spec import ContainerSpec, VolumeMount
from writerpool.runtime.ssh import SshRoute, classify
from writerpool.runtime.volumes import volume_name

SOCKET = "/run/user/1010/podman/podman.sock"
PIN = "a" * 64
DATA = Path(__file__).parent / "data"


def test_an_ssh_url_gives_user_address_port_and_socket() -> None:
    target = parse_ssh_url(f"ssh://wp-th1@10.231.0.2:2222{SOCKET}")
    assert (target.user, target.address, target.port, target.socket) == (
        "wp-th1", "10.231.0.2", 2222, SOCKET)  # fmt: skip
    # Podman 4.3.1 needs the port written; the URL writerpool renders always has it.
    assert parse_ssh_url(f"ssh://u@h.test{SOCKET}").url() == f"ssh://u@h.test:22{SOCKET}"


@pytest.mark.parametrize(
    "url",
    [
        f"http://u@h.test:22{SOCKET}",
        f"ssh://h.test:22{SOCKET}",
        f"ssh://-oProxyCommand=x@h.test:22{SOCKET}",
        f"ssh://u:pw@h.test:22{SOCKET}",
        "ssh://u@h.test:22/run/../etc/passwd",
        "ssh://u@h.test:22relative",
        f"ssh://u@h.test:99999{SOCKET}",
        f"ssh://u@h.test:0{SOCKET}",
        f"ssh://u@-h.test:22{SOCKET}",
        f"ssh://u@h.test:22{SOCKET}?x=1",
    ],
)
def test_a_bad_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError):
        parse_ssh_url(url)


def _toml(name: str, url: str) -> bytes:
    return (f'[hosts.{name}]\nurl = "{url}"\nidentity = "/k/id"\n'
            f'known_hosts = "/k/known"\n').encode()  # fmt: skip


def test_config_reads_hosts_and_reserves_local() -> None:
    config = parse_config(_toml("th1", f"ssh://u@10.0.0.2:22{SOCKET}"))
    assert config.hosts["th1"].target.address == "10.0.0.2"
    with pytest.raises(WriterpoolError) as exc:
        parse_config(_toml("local", f"ssh://u@10.0.0.2:22{SOCKET}"))
    assert exc.value.code == "config_invalid" and "reserved" in exc.value.message
    with pytest.raises(WriterpoolError) as exc:
        parse_config(_toml("th1", "ssh://u@10.0.0.2:22/x y"))
    assert "hosts.th1.url" in exc.value.message


def test_relative_key_paths_are_refused() -> None:
    with pytest.raises(WriterpoolError) as exc:
        parse_config(
            b'[hosts.a]\nurl = "ssh://u@h.test:22/s"\nidentity = "id"\nknown_hosts = "k"\n'
        )
    assert "identity" in exc.value.message and "known_hosts" in exc.value.message


def test_key_paths_with_spaces_are_refused() -> None:
    with pytest.raises(WriterpoolError) as exc:
        parse_config(b'[hosts.a]\nurl = "ssh://u@h.test:22/s"\nidentity = "/k/id"\n'
                     b'known_hosts = "/k/known /etc/other"\n')  # fmt: skip
    assert "hosts.a.known_hosts" in exc.value.message


def test_the_ssh_argv_checks_the_pinned_key_and_ignores_the_users_config(tmp_path: Path) -> None:
    for name in ("id", "known"):
        (tmp_path / name).write_text("x")
    (tmp_path / "id").chmod(0o600)
    host = HostConfig(url=f"ssh://u@10.0.0.2:2222{SOCKET}", identity=tmp_path / "id",
                known_hosts=tmp_path / "known")  # fmt: skip
    argv = SshRoute.from_config("th1", host).argv("-N")
    pairs = {argv[i + 1] for i, word in enumerate(argv) if word == "-o"}
    assert {"StrictHostKeyChecking=yes", f"UserKnownHostsFile={tmp_path / 'known'}",
            "GlobalKnownHostsFile=/dev/null", "BatchMode=yes"} <= pairs  # fmt: skip
    assert argv[argv.index("-F") + 1] == "/dev/null"
    assert argv[-2:] == ["--", "u@10.0.0.2"] and argv[argv.index("-p") + 1] == "2222"


def test_missing_key_files_are_host_config_invalid(tmp_path: Path) -> None:
    host = HostConfig(url=f"ssh://u@10.0.0.2:22{SOCKET}", identity=tmp_path / "none",
                known_hosts=tmp_path / "none2")  # fmt: skip
    with pytest.raises(WriterpoolError) as exc:
        SshRoute.from_config("th1", host)
    assert exc.value.code == "host_config_invalid" and str(tmp_path) not in exc.value.message


CHANGED = b"""@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
Host key verification failed.
"""


@pytest.mark.parametrize(
    ("stderr", "code"),
    [
        (CHANGED, "host_key_mismatch"),
        (
            b"No ED25519 host key is known for 10.0.0.2 and you have requested strict checking.\n"
            b"Host key verification failed.\n",
            "host_key_unpinned",
        ),
        (b"ssh: connect to host 10.0.0.2 port 22: Connection refused\n", "writer_host_unreachable"),
        (b"u@10.0.0.2: Permission denied (publickey).\n", "host_config_invalid"),
    ],
)
def test_ssh_failures_get_their_codes_without_the_address(stderr: bytes, code: str) -> None:
    err = classify("th1", stderr)
    assert err.code == code
    assert "10.0.0.2" not in err.message and "u@" not in err.message


def _info(
    rootless: bool = True, version: str = "v1", controllers: tuple[str, ...] = ()
) -> PodmanInfo:
    return PodmanInfo.model_validate({
        "host": {"cgroupVersion": version, "cgroupControllers": list(controllers),
                 "security": {"rootless": rootless}},
        "store": {"graphDriverName": "overlay"}, "version": {"Version": "4.3.1"},
    })  # fmt: skip


def _by_id(facts: RemoteFacts, pin: str | None = PIN) -> dict[str, tuple[str, bool]]:
    return {r.id: (r.severity, r.blocking) for r in judge_host(facts, pin)}


def test_a_healthy_host_passes_every_check_but_warns_of_cgroup_v1() -> None:
    facts = RemoteFacts("th1", info=_info(), version="4.3.1", image_present=True,
                        free_bytes=10 * 1024**3)  # fmt: skip
    assert _by_id(facts) == {
        "remote_reachable": ("ok", False), "remote_api": ("ok", False),
        "remote_podman": ("ok", False), "remote_tools": ("ok", False),
        "remote_cgroups": ("warning", False), "remote_image": ("ok", False),
        "remote_disk": ("ok", False),
    }  # fmt: skip
    v2 = RemoteFacts("th1", info=_info(version="v2", controllers=("cpu", "memory", "pids")),
                     version="5.4.2", image_present=True, free_bytes=10 * 1024**3)  # fmt: skip
    assert _by_id(v2)["remote_cgroups"] == ("ok", False)


def test_a_podman5_host_on_cgroup_v1_is_told_podman6_removes_it() -> None:
    recorded = (DATA / "podman-info-5.4.2-debian13-hybrid.json").read_text()
    facts = RemoteFacts("th1", info=PodmanInfo.model_validate_json(recorded), version="5.4.2",
                        image_present=True, free_bytes=10 * 1024**3)  # fmt: skip
    [cgroups] = [r for r in judge_host(facts, PIN) if r.id == "remote_cgroups"]
    assert cgroups.severity == "warning" and not cgroups.blocking
    assert "Podman 5.4.2 deprecates cgroup v1 and Podman 6 removes it" in cgroups.message
    assert "cgroup v2" in cgroups.remedy
    older = RemoteFacts("th1", info=_info(), version="4.3.1", image_present=True,
                        free_bytes=10 * 1024**3)  # fmt: skip
    [cgroups] = [r for r in judge_host(older, PIN) if r.id == "remote_cgroups"]
    assert "deprecates" not in cgroups.message


def test_a_refused_key_stops_every_later_check_and_blocks() -> None:
    err = WriterpoolError("host_key_mismatch", "host th1 presented another key")
    results = judge_host(RemoteFacts("th1", reach_error=err), PIN)
    assert [(r.id, r.severity, r.blocking) for r in results] == [
        ("remote_reachable", "error", True)]  # fmt: skip
    assert results[0].data["code"] == "host_key_mismatch" and results[0].subject == "host/th1"


def test_a_missing_image_rootful_podman_and_low_disk_are_reported() -> None:
    facts = RemoteFacts("th1", info=_info(rootless=False), version="4.3.1",
                        image_present=False, free_bytes=1024**3)  # fmt: skip
    found = _by_id(facts)
    assert found["remote_podman"] == ("error", True)
    assert found["remote_image"] == ("error", True)
    assert found["remote_disk"] == ("warning", False)


def test_a_host_without_python3_for_its_ssh_user_is_a_blocking_error() -> None:
    facts = RemoteFacts("th1", info=_info(), version="4.3.1", image_present=True,
                        free_bytes=10 * 1024**3, missing_tools=("python3",))  # fmt: skip
    [tools] = [r for r in judge_host(facts, PIN) if r.id == "remote_tools"]
    assert (tools.severity, tools.blocking, tools.data) == ("error", True, {"missing": ["python3"]})
    assert "python3" in tools.message and "podman," not in tools.message


def test_no_api_service_is_one_blocking_error() -> None:
    found = _by_id(RemoteFacts("th1", api_error="its Podman API socket does not answer"))
    assert found == {"remote_reachable": ("ok", False), "remote_api": ("error", True)}


def test_the_placement_rule_is_round_robin_in_the_order_given() -> None:
    hosts = ("local", "b", "c")
    assert [host_for(i, hosts) for i in range(1, 8)] == [
        "local", "b", "c", "local", "b", "c", "local"]  # fmt: skip
    assert host_for(5, ("local",)) == "local"


@pytest.mark.parametrize("hosts", [("local", "local"), ("Bad",), ("-x",), ()])
def test_bad_host_lists_are_refused_by_the_mode_entry(hosts: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        ContainerSettings(profiles=("code",), base="main", hosts=hosts)
    assert ContainerSettings(profiles=("code",), base="main").placed_on() == ("local",)


def test_a_spec_without_volumes_keeps_its_digest_and_one_with_them_mounts_by_name() -> None:
    spec = ContainerSpec(image_id="a" * 64, name="w")
    before = {k: v for k, v in spec.model_dump(mode="json").items() if k != "volumes"}
    digest = "sha256:" + hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()
    assert spec.digest() == digest
    clone = VolumeMount(volume=volume_name("demo-w1", "clone"), target="/work")
    with_volume = spec.model_copy(update={"volumes": (clone,)})
    assert with_volume.digest() != digest
    assert "type=volume,src=writerpool-demo-w1-clone,dst=/work" in with_volume.run_argv(["true"])


@pytest.mark.parametrize("volume", ["other-w1-clone", "writerpool-x,src=/etc", "writerpool-A"])
def test_a_volume_mount_takes_only_writerpool_volume_names(volume: str) -> None:
    with pytest.raises(ValueError):
        VolumeMount(volume=volume, target="/work")


@pytest.mark.parametrize("char", ["%d", "${HOME}", "\\", '"', "'"])
def test_key_paths_ssh_would_expand_or_unquote_are_refused(char: str) -> None:
    # ssh reads `/k/%d/known` as the home directory's file, not the one writerpool checked.
    toml = (f'[hosts.a]\nurl = "ssh://u@h.test:22/s"\nidentity = "/k/id"\n'
            f"known_hosts = {json.dumps(f'/k/{char}/known')}\n")  # fmt: skip
    with pytest.raises(WriterpoolError) as exc:
        parse_config(toml.encode())
    assert exc.value.code == "config_invalid" and "hosts.a.known_hosts" in exc.value.message


def _key_files(tmp_path: Path) -> HostConfig:
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    (keys / "id").write_text("x")
    (keys / "id").chmod(0o600)
    (keys / "known").write_text("10.0.0.2 ssh-ed25519 AAAA\n")
    (keys / "known").chmod(0o644)
    return HostConfig(url=f"ssh://u@10.0.0.2:22{SOCKET}", identity=keys / "id",
                known_hosts=keys / "known")  # fmt: skip


def _refused(host: HostConfig) -> str:
    with pytest.raises(WriterpoolError) as exc:
        SshRoute.from_config("th1", host)
    assert exc.value.code == "host_config_invalid"
    assert str(host.known_hosts.parent) not in exc.value.message
    return exc.value.message


def test_key_files_only_this_account_can_change_are_accepted(tmp_path: Path) -> None:
    host = _key_files(tmp_path)
    assert SshRoute.from_config("th1", host).known_hosts == host.known_hosts
    host.known_hosts.chmod(0o666)
    assert "known_hosts may be written by another account" in _refused(host)
    host.known_hosts.chmod(0o644)
    host.identity.chmod(0o640)
    assert "identity may be read by another account" in _refused(host)
    host.identity.chmod(0o600)
    host.known_hosts.parent.chmod(0o777)
    assert "lies in a directory another account may change" in _refused(host)


def test_a_known_hosts_link_is_judged_by_both_its_directories_and_its_target(
    tmp_path: Path,
) -> None:
    host = _key_files(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "known").symlink_to(host.known_hosts)
    linked = host.model_copy(update={"known_hosts": shared / "known"})
    assert "lies in a directory another account may change" in _refused(linked)
    fifo = tmp_path / "keys" / "fifo"
    os.mkfifo(fifo)
    assert "is missing or unreadable" in _refused(host.model_copy(update={"known_hosts": fifo}))


def test_a_certificate_authority_is_not_a_pinned_key(tmp_path: Path) -> None:
    host = _key_files(tmp_path)
    host.known_hosts.write_text("@cert-authority * ssh-ed25519 AAAA\n")
    assert "@cert-authority" in _refused(host)


@pytest.mark.parametrize(
    ("printed", "usable"),
    [
        ("/home/wp/.writerpool-canary-ab", True),
        ("/home/a:b/.writerpool-canary-ab", False),  # `:` splits the harness's canary list
        ("relative/.writerpool-canary-ab", False),
        ("/home/../etc/.writerpool-canary-ab", False),
        ("/home/wp/.writerpool-canary-other", False),
        ("/home/\x1b[2J/.writerpool-canary-ab", False),
    ],
)
def test_a_hosts_home_is_used_only_when_plain(printed: str, usable: bool) -> None:
    assert _usable(printed, ".writerpool-canary-ab") is usable
