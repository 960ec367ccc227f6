"""A host over SSH configured carelessly, answering oddly, or left by a killed controller:
a pin another account may rewrite is refused before ssh runs; a url whose socket is no
Podman service has its own code; what acceptance, the isolation control and a session
leave on the host (the canary in the SSH user's home, the control's work directory, the
session's forwarded socket) goes with the process that made it, SIGKILL too."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.integration.test_collect_helpers import unique_alias, write_workspaces
from tests.integration.writers_support import wp
from tests.support.cli import run_cli
from tests.support.hostile_podman import hostile_podman
from tests.support.repos import make_repo
from tests.support.testhost import add_host, provision_there
from writerpool.config.hosts import HostConfig
from writerpool.config.models import Pool
from writerpool.config.paths import Paths
from writerpool.crash import ENV
from writerpool.errors import WriterpoolError
from writerpool.pool.writer.container import writer_spec
from writerpool.runtime.host import writer_at
from writerpool.runtime.remote import connect
from writerpool.runtime.spec import LABEL_WRITER, ContainerSpec, VolumeMount
from writerpool.runtime.ssh import SshRoute
from writerpool.runtime.volumes import volume_name

pytestmark = [pytest.mark.podman, pytest.mark.remote]


def test_a_known_hosts_file_another_account_may_rewrite_pins_nothing(
    testhost: HostConfig, tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    known = keys / "known_hosts"
    shutil.copyfile(testhost.known_hosts, known)
    host = testhost.model_copy(update={"known_hosts": known})
    known.chmod(0o666)
    with pytest.raises(WriterpoolError) as exc, connect("th", host):
        pass
    assert exc.value.code == "host_config_invalid"
    assert "known_hosts may be written by another account" in exc.value.message
    assert testhost.target.address not in exc.value.message
    known.chmod(0o644)
    with connect("th", host) as remote:
        assert remote.version()


@pytest.mark.parametrize("path", ["/etc/passwd", "/run/user/1/podman/none.sock"])
def test_a_url_whose_socket_is_no_podman_service_is_refused_with_its_code(
    testhost: HostConfig, path: str
) -> None:
    url = testhost.url.replace(testhost.target.socket, path)
    with (
        pytest.raises(WriterpoolError) as exc,
        connect("th", testhost.model_copy(update={"url": url})),
    ):
        pass
    assert exc.value.code == "host_podman_unavailable"
    assert testhost.target.address not in exc.value.message
    assert testhost.target.user not in exc.value.message


def test_a_host_whose_podman_lies_is_refused_and_its_words_cannot_drive_the_terminal(
    testhost: HostConfig,
) -> None:
    with hostile_podman(testhost) as lying:
        with connect("th", lying) as remote, pytest.raises(WriterpoolError) as exc:
            remote.facts()  # a version of 200,000 characters, bound for every fingerprint
        assert exc.value.code == "host_podman_unavailable" and len(exc.value.message) < 200
        assert run_cli("config", "init").code == 0
        add_host(lying)
        listed = run_cli("image", "prune", "--host", "th")
    assert listed.code == 1, listed.out
    assert "\\x1b]0;owned\\x07" in listed.out  # the terminal title it meant to set
    assert not {"\x1b", "\x07", "\r"} & set(listed.out + listed.err)


@pytest.mark.parametrize("shared", ["0777", "link"])
def test_a_sessions_socket_is_made_only_in_a_directory_of_the_ssh_users_own(
    testhost: HostConfig, tmp_path: Path, shared: str
) -> None:
    # The sockets' directory sits beside the url's socket directory: a url whose socket
    # is reached through /tmp puts it where another account could have made it first.
    ssh = SshRoute.from_config("th", testhost)
    base = f"/tmp/wp-shared-{secrets.token_hex(4)}"
    made = (
        f"mkdir -m 0777 {base}/writerpool"
        if shared == "0777"
        else f"mkdir -m 0777 {base}/elsewhere && ln -s {base}/elsewhere {base}/writerpool"
    )
    assert ssh.exec(["sh", "-c", f"mkdir -p {base}/podman && ln -s {testhost.target.socket} "
                     f"{base}/podman/podman.sock && {made}"]).returncode == 0  # fmt: skip
    url = testhost.url.replace(testhost.target.socket, f"{base}/podman/podman.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "proxy.sock"))
    try:
        with connect("th", testhost.model_copy(update={"url": url})) as remote:
            if shared == "0777":  # this user's own, made private before any socket goes there
                with remote.forwarded_socket(tmp_path / "proxy.sock", "s-own"):
                    mode = ssh.exec(["stat", "-c", "%a", f"{base}/writerpool"]).out.strip()
                assert mode == "700"
            else:
                link = remote.forwarded_socket(tmp_path / "proxy.sock", "s-link")
                with pytest.raises(WriterpoolError) as exc, link:
                    pass
                assert exc.value.code == "host_config_invalid"
                assert _on_host(ssh, f"{base}/elsewhere/*") == []
    finally:
        listener.close()
        ssh.exec(["rm", "-rf", "--", base])


def test_a_host_that_answers_without_end_is_cut_off_at_the_bound(testhost: HostConfig) -> None:
    ssh = SshRoute.from_config("th", testhost)
    with pytest.raises(WriterpoolError) as exc:  # 64 MiB where a line was expected
        ssh.exec(["sh", "-c", "head -c 67108864 /dev/zero"], timeout=120)
    assert exc.value.code == "command_failed" and "answered with over" in exc.value.message
    assert testhost.target.address not in exc.value.message
    assert ssh.exec(["sh", "-c", "head -c 1048576 /dev/zero"]).stdout == bytes(1048576)


PLANT_AND_WAIT = """
import json, sys, time
from tests.integration.test_collect_helpers import unique_alias, write_workspaces
from tests.integration.writers_support import wp
from tests.support.cli import run_cli
from tests.support.hostile_podman import hostile_podman
from tests.support.repos import make_repo
from tests.support.testhost import add_host, provision_there
from writerpool.config.hosts import HostConfig
from writerpool.config.models import Pool
from writerpool.config.paths import Paths
from writerpool.runtime.probes import held_directory, planted_canary
from writerpool.runtime.spec import LABEL_WRITER, ContainerSpec, VolumeMount
from writerpool.runtime.ssh import SshRoute
from writerpool.runtime.volumes import volume_name
ssh = SshRoute.from_config("th", HostConfig(**json.loads(sys.argv[1])))
with planted_canary(ssh) as canary, held_directory(ssh, "/tmp", "wp-left", canary=False) as work:
    print(json.dumps([canary.file, work]), flush=True)
    time.sleep(600)
"""


def _present(ssh: SshRoute, path: str) -> bool:
    return ssh.exec(["test", "-e", path], timeout=20).returncode == 0


def test_what_acceptance_plants_on_the_host_goes_with_a_killed_controller(
    testhost: HostConfig,
) -> None:
    ssh = SshRoute.from_config("th", testhost)
    given = {"url": testhost.url, "identity": str(testhost.identity),
             "known_hosts": str(testhost.known_hosts)}  # fmt: skip
    planter = subprocess.Popen([sys.executable, "-c", PLANT_AND_WAIT, json.dumps(given)],
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert planter.stdout is not None
        canary, work = json.loads(planter.stdout.readline())
        assert ssh.exec(["cat", canary], timeout=20).out == "writerpool canary\n"
        assert _present(ssh, work)
    finally:
        planter.kill()
        planter.wait()
        if planter.stdout is not None:
            planter.stdout.close()
    for _ in range(60):  # bounded: 30 s for the host to see the connection end
        if not _present(ssh, str(Path(canary).parent)) and not _present(ssh, work):
            break
        threading.Event().wait(0.5)
    assert not _present(ssh, str(Path(canary).parent)), "the canary outlived its planter"
    assert not _present(ssh, work), "the control's work directory outlived its planter"


FORWARD_AND_WAIT = """
import json, socket, sys, tempfile, time
from pathlib import Path
from tests.integration.test_collect_helpers import unique_alias, write_workspaces
from tests.integration.writers_support import wp
from tests.support.cli import run_cli
from tests.support.hostile_podman import hostile_podman
from tests.support.repos import make_repo
from tests.support.testhost import add_host, provision_there
from writerpool.config.hosts import HostConfig
from writerpool.config.models import Pool
from writerpool.config.paths import Paths
from writerpool.runtime.remote import connect
local = Path(tempfile.mkdtemp()) / "proxy.sock"
listener = socket.socket(socket.AF_UNIX)
listener.bind(str(local))
listener.listen()
with connect("th", HostConfig(**json.loads(sys.argv[1]))) as remote, \\
        remote.forwarded_socket(local, "s-left") as there:
    print(there, flush=True)
    time.sleep(600)
"""


def test_a_sessions_socket_on_the_host_goes_with_a_killed_controller(testhost: HostConfig) -> None:
    ssh = SshRoute.from_config("th", testhost)
    given = {"url": testhost.url, "identity": str(testhost.identity),
             "known_hosts": str(testhost.known_hosts)}  # fmt: skip
    opener = subprocess.Popen([sys.executable, "-c", FORWARD_AND_WAIT, json.dumps(given)],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert opener.stdout is not None
        there = opener.stdout.readline().strip()
        assert ssh.exec(["test", "-S", there], timeout=20).returncode == 0
    finally:
        opener.kill()
        opener.wait()
        if opener.stdout is not None:
            opener.stdout.close()
    for _ in range(60):  # bounded: 30 s for the host to see the connection end
        if not _present(ssh, there):
            break
        threading.Event().wait(0.5)
    assert not _present(ssh, there), "the session's socket outlived the controller"


# The agent's bash in its session container on the host: every way to leave the next
# session a `.git` guard that is a link (its bind mount's source, resolved by the host's
# Podman) is tried, and every socket the container can see is listed.
AGENT = r"""
for try in "mv /work/.git/hooks /work/.git/h2" "rm -rf /work/.git/hooks" \
    "mv /work/.git /work/g" "rm -f /work/.git/config" "ln -sfn /run /work/.git/hooks" \
    "mv /work/.git/config /work/c2"; do
  sh -c "$try" 2>/dev/null && echo "did: $try"
done
find / \( -path /proc -o -path /sys \) -prune -o -type s -print 2>/dev/null | sed 's/^/socket: /'
ls -A /run/user 2>/dev/null | sed 's/^/run-user: /'
true
"""


@pytest.mark.every_testhost
@pytest.mark.image
@pytest.mark.git
def test_an_agent_on_the_host_can_neither_redirect_the_git_guards_nor_see_a_socket(
    testhost: HostConfig, image_pin: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "checkout", commits=2, files=2)
    alias = unique_alias("hostile")
    paths = write_workspaces({alias: repo})
    name = f"{alias}-w1"
    with connect("th", testhost) as remote:
        state = provision_there(remote, paths, alias, name, repo, image_pin)
        try:
            image = str(json.loads(image_pin.read_text())["imageId"])
            spec = writer_spec(paths, remote, state, image, Pool(), remote.facts())
            done = remote.run(spec, ["sh", "-c", AGENT])
            assert done.returncode == 0, done.stderr[-1000:]
            assert done.out == "", done.out
            kinds = remote.run(_clone_reader(image, name), ["stat", "-c", "%F", ".git",
                               ".git/hooks", ".git/config"])  # fmt: skip
            assert kinds.out.split("\n")[:3] == ["directory", "directory", "regular file"]
        finally:
            remote.remove_storage(writer_at(paths, name, remote.name))


def _clone_reader(image: str, writer: str) -> ContainerSpec:
    clone = VolumeMount(volume=volume_name(writer, "clone"), target="/c", read_only=True)
    return ContainerSpec(image_id=image, name=f"writerpool-{writer}-look", workdir="/c",
                         volumes=(clone,), labels={LABEL_WRITER: writer})  # fmt: skip


def _on_host(ssh: SshRoute, pattern: str) -> list[str]:
    """Names matching `pattern` (a shell glob under the SSH user's home or runtime dir)."""
    listed = ssh.exec(["sh", "-c", f"ls -d {pattern} 2>/dev/null || true"], timeout=20)
    return listed.out.split()


@pytest.mark.image
@pytest.mark.git
def test_a_mode_set_killed_mid_acceptance_on_the_host_leaves_nothing_and_the_next_completes(
    testhost: HostConfig, image_pin: Path, tmp_path: Path
) -> None:
    alias = unique_alias("killed")
    write_workspaces({alias: make_repo(tmp_path / "checkout", commits=2, files=2)})
    add_host(testhost)
    wp("image", "transfer", "--host", "th", check=True)
    wp("control", "--apply", check=True)
    wp("control", "--host", "th", "--apply", check=True)
    ssh = SshRoute.from_config("th", testhost)
    # The canary in the SSH user's home, and the proxy's socket forwarded for the writer.
    canaries = "$HOME/.writerpool-canary-*"
    sockets = f"/run/user/$(id -u)/writerpool/egress/{alias}-w1/proxy.sock"
    # What other runs left on this account's test host is not this run's to judge.
    before = set(_on_host(ssh, canaries)), set(_on_host(ssh, sockets))

    def left() -> tuple[set[str], set[str]]:
        return set(_on_host(ssh, canaries)) - before[0], set(_on_host(ssh, sockets)) - before[1]

    argv = [sys.executable, "-m", "writerpool", "mode", "set", alias, "container", "--profiles",
            "code", "--network", "provider", "--hosts", "th", "--apply", "--json"]  # fmt: skip
    # Killed where acceptance holds all it plants there, just before the harness runs.
    env = {**os.environ, ENV: "acceptance.probes_held"}
    setting = subprocess.run(argv, env=env, capture_output=True, timeout=600, check=False)
    try:
        assert setting.returncode == -9, setting.stderr[-2000:]
        for _ in range(60):  # bounded: 30 s for the host to see the connections end
            if left() == (set(), set()):
                break
            threading.Event().wait(0.5)
        assert left() == (set(), set())
        code, report = wp("mode", "set", alias, "container", "--profiles", "code",
                          "--network", "provider", "--hosts", "th", "--apply")  # fmt: skip
        assert code == 0, report
        assert f"writer/{alias}/{alias}-w1" in [
            f["target"] for f in report["findings"] if f["code"] == "writer_accepted"
        ], report
        assert left() == (set(), set())
    finally:
        with connect("th", testhost) as remote:
            remote.remove_storage(writer_at(Paths.from_env(), f"{alias}-w1", remote.name))
