"""A host over SSH configured carelessly, answering oddly, or left by a killed controller:
a pin another account may rewrite is refused before ssh runs; a url whose socket is no
Podman service has its own code; what acceptance, the isolation control and a session
leave on the host (the canary in the SSH user's home, the control's work directory, the
session's forwarded socket) goes with the process that made it, SIGKILL too."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.hostile_podman import hostile_podman
from tests.support.testhost import add_host
from writerpool.config.hosts import Host
from writerpool.errors import WriterpoolError
from writerpool.runtime.remote import connect
from writerpool.runtime.ssh import SshHost

pytestmark = [pytest.mark.podman, pytest.mark.remote]


def test_a_known_hosts_file_another_account_may_rewrite_pins_nothing(
    testhost: Host, tmp_path: Path
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
    testhost: Host, path: str
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
    testhost: Host,
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


PLANT_AND_WAIT = """
import json, sys, time
from tests.support.cli import run_cli
from tests.support.hostile_podman import hostile_podman
from tests.support.testhost import add_host
from writerpool.config.hosts import Host
from writerpool.pool.remote_probe import held_directory, planted_canary
from writerpool.runtime.ssh import SshHost
ssh = SshHost.from_config("th", Host(**json.loads(sys.argv[1])))
with planted_canary(ssh) as canary, held_directory(ssh, "/tmp", "wp-left", canary=False) as work:
    print(json.dumps([canary.file, work]), flush=True)
    time.sleep(600)
"""


def _present(ssh: SshHost, path: str) -> bool:
    return ssh.exec(["test", "-e", path], timeout=20).returncode == 0


def test_what_acceptance_plants_on_the_host_goes_with_a_killed_controller(
    testhost: Host,
) -> None:
    ssh = SshHost.from_config("th", testhost)
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
from tests.support.cli import run_cli
from tests.support.hostile_podman import hostile_podman
from tests.support.testhost import add_host
from writerpool.config.hosts import Host
from writerpool.runtime.remote import connect
local = Path(tempfile.mkdtemp()) / "proxy.sock"
listener = socket.socket(socket.AF_UNIX)
listener.bind(str(local))
listener.listen()
with connect("th", Host(**json.loads(sys.argv[1]))) as remote, \\
        remote.session_socket(local, "s-left") as there:
    print(there, flush=True)
    time.sleep(600)
"""


def test_a_sessions_socket_on_the_host_goes_with_a_killed_controller(testhost: Host) -> None:
    ssh = SshHost.from_config("th", testhost)
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
