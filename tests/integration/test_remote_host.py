"""A second Podman host over SSH (scripts/testhost): its Podman answers only through a
connection with the pinned host key; the writer image reaches it by the same ID."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.integration.writers_support import wp
from tests.support import procs
from tests.support.testhost import add_host
from writerpool.config.hosts import HostConfig
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.proc import run
from writerpool.runtime.host import writer_at
from writerpool.runtime.image_transfer import remote_image_id, remote_images, transfer_image
from writerpool.runtime.local import LocalPodman
from writerpool.runtime.podman import podman_env
from writerpool.runtime.remote import connect
from writerpool.runtime.spec import LABEL_WRITER, ContainerSpec, Mount, VolumeMount
from writerpool.runtime.ssh import SshRoute
from writerpool.runtime.volumes import create_volumes, volume_name, writer_volumes
from writerpool.state.images import BuiltImage, record_built

pytestmark = [pytest.mark.podman, pytest.mark.remote]


def _other_key(tmp_path: Path, host: HostConfig) -> Path:
    """A known_hosts file pinning a freshly made key for the host's address."""
    key = tmp_path / "other_host_key"
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)])
    known = tmp_path / "known_hosts_changed"
    public = " ".join(key.with_suffix(".pub").read_text().split()[:2])
    known.write_text(f"{host.target.address} {public}\n")
    return known


@pytest.mark.every_testhost
def test_remote_podman_answers_through_the_pinned_connection(testhost: HostConfig) -> None:
    with connect("th", testhost) as remote:
        assert remote.socket_path.parent.stat().st_mode & 0o077 == 0
        version = remote.version()
        info = json.loads(remote.cli(["info", "--format", "json"]).out)
        facts = remote.facts()  # the host's, asked in one round trip
        forwarded = remote.socket_path
    assert (facts.host, facts.podman_version, facts.rootless) == ("th", version, True)
    assert version.split(".")[0] in ("4", "5")
    assert info["host"]["security"]["rootless"] is True
    # The host's own socket path, not this machine's: the forward ended with the block.
    assert not forwarded.exists()


def test_a_changed_host_key_is_refused_and_the_pin_is_kept(
    testhost: HostConfig, tmp_path: Path
) -> None:
    known = _other_key(tmp_path, testhost)
    before = known.read_bytes()
    changed = testhost.model_copy(update={"known_hosts": known})
    with pytest.raises(WriterpoolError) as exc:
        SshRoute.from_config("th", changed).exec(["true"])
    assert exc.value.code == "host_key_mismatch"
    with pytest.raises(WriterpoolError) as exc, connect("th", changed):
        pass
    assert exc.value.code == "host_key_mismatch"
    assert known.read_bytes() == before


def test_a_host_with_no_pinned_key_is_refused(testhost: HostConfig, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts_empty"
    empty.write_text("")
    unpinned = testhost.model_copy(update={"known_hosts": empty})
    with pytest.raises(WriterpoolError) as exc:
        SshRoute.from_config("th", unpinned).exec(["true"])
    assert exc.value.code == "host_key_unpinned"
    assert empty.read_text() == ""


def test_a_closed_port_is_writer_host_unreachable(testhost: HostConfig) -> None:
    target = testhost.target
    closed = testhost.model_copy(
        update={"url": f"ssh://{target.user}@{target.address}:2{target.socket}"}
    )
    with pytest.raises(WriterpoolError) as exc:
        SshRoute.from_config("th", closed).exec(["true"])
    assert exc.value.code == "writer_host_unreachable"


def _configure_host(testhost: HostConfig) -> None:
    assert wp("config", "init")[0] == 0
    add_host(testhost)


def _only_the_pinned_image_on(testhost: HostConfig, pinned: str) -> None:
    """The test host is the tests' own account: earlier writer images it received (one per
    rebuild) are removed, so its storage holds one writer image, not one per build."""
    with connect("th", testhost) as remote:
        for image_id in remote_images(remote):  # bounded by the host's images
            if image_id != pinned:
                remote.cli(["image", "rm", "--force", "--", image_id], check=False)


@pytest.mark.every_testhost
@pytest.mark.image
def test_the_image_reaches_the_host_by_its_id_and_doctor_checks_the_host(
    testhost: HostConfig, image_pin: Path
) -> None:
    _configure_host(testhost)
    pinned = json.loads(image_pin.read_text())["imageId"]
    _only_the_pinned_image_on(testhost, pinned)
    code, report = wp("image", "transfer", "--host", "th")
    assert code == 0, report
    assert report["findings"][0]["code"] in ("image_transferred", "image_present")
    with connect("th", testhost) as remote:
        assert remote_image_id(remote, pinned) == pinned
    code, again = wp("image", "transfer", "--host", "th")
    assert [f["code"] for f in again["findings"]] == ["image_present"]
    _, doctor = wp("doctor")
    checks = {f["code"]: f for f in doctor["findings"] if f["target"] == "host/th"}
    assert checks["remote_reachable"]["status"] == "ok"
    assert checks["remote_api"]["status"] == "ok"
    assert checks["remote_podman"]["status"] == "ok"
    assert checks["remote_tools"]["status"] == "ok"
    assert checks["remote_image"]["status"] == "ok"
    assert checks["remote_disk"]["data"]["freeBytes"] > 0
    code, prune = wp("image", "prune", "--host", "th")
    assert code == 0 and pinned in prune["data"]["kept"]
    assert pinned not in prune["data"]["prunable"]


def test_doctor_reports_a_changed_host_key_with_its_remedy(
    testhost: HostConfig, tmp_path: Path
) -> None:
    _configure_host(testhost.model_copy(update={"known_hosts": _other_key(tmp_path, testhost)}))
    _, doctor = wp("doctor")
    [reach] = [f for f in doctor["findings"] if f["target"] == "host/th"]
    assert reach["code"] == "remote_reachable" and reach["status"] == "error"
    assert "host_key_mismatch" in reach["message"] and reach["remedy"]
    assert testhost.target.address not in json.dumps(doctor)


def _serve_once(path: Path, stop: threading.Event) -> threading.Thread:
    """A Unix socket on the controller answering `pong:` and what it was sent."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    server.settimeout(0.2)

    def loop() -> None:
        with server:
            while not stop.is_set():  # bounded by the test: stop is set at its end
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                with conn:
                    conn.sendall(b"pong:" + conn.recv(64))

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


@pytest.mark.every_testhost
@pytest.mark.image
def test_a_container_on_the_host_reaches_a_controller_socket_for_one_session_only(
    testhost: HostConfig, image_pin: Path, tmp_path: Path
) -> None:
    pinned = json.loads(image_pin.read_text())["imageId"]
    local = tmp_path / "proxy.sock"
    stop = threading.Event()
    thread = _serve_once(local, stop)
    probe = ("import socket; s = socket.socket(socket.AF_UNIX); s.connect('/run/proxy.sock'); "
             "s.sendall(b'ping'); print(s.recv(64).decode())")  # fmt: skip
    try:
        with connect("th", testhost) as remote:
            transfer_image(LocalPodman(), remote, pinned, lambda sent, total: None)
            with remote.forwarded_socket(local, "s-1") as there:
                mount = Mount(source=Path(str(there)), target="/run/proxy.sock")
                spec = ContainerSpec(image_id=pinned, name="writerpool-test-remote-sock",
                                     workdir="/tmp", mounts=(mount,))  # fmt: skip
                done = remote.run(spec, ["python3", "-c", probe], timeout=120)
                assert done.returncode == 0, done.stderr[-2000:]
                assert done.out.strip() == "pong:ping"
                # The host's socket is the controller's, not a host path of the controller.
                assert str(tmp_path) not in " ".join(spec.run_argv(["true"]))
            gone = remote.host.exec(["test", "-e", str(there)])
            assert gone.returncode != 0
            again = remote.run(spec, ["python3", "-c", probe], timeout=120)
            assert again.returncode != 0
    finally:
        stop.set()
        thread.join(timeout=5)


def _forwarder_pid(local_socket: Path) -> int:
    """The ssh process forwarding `local_socket` (this test's own child)."""
    for process in procs.mine():
        argv = process.argv
        if argv and argv[0].endswith(b"ssh") and any(str(local_socket).encode() in a for a in argv):
            return process.pid
    raise AssertionError("no ssh process forwards the socket")


def test_a_connection_killed_mid_use_is_writer_host_unreachable(testhost: HostConfig) -> None:
    with connect("th", testhost) as remote:
        assert remote.version()
        os.kill(_forwarder_pid(remote.socket_path), signal.SIGKILL)
        with pytest.raises(WriterpoolError) as exc:
            remote.containers("io.writerpool.writer", "none")
        assert exc.value.code == "writer_host_unreachable"
        with pytest.raises(WriterpoolError) as exc:
            remote.cli(["info", "--format", "json"])
        assert exc.value.code == "writer_host_unreachable"
        assert testhost.target.address not in exc.value.message
    # A new connection works at once: nothing was left half-open on either side.
    with connect("th", testhost) as again:
        assert again.version()


@pytest.mark.every_testhost
def test_the_isolation_control_runs_on_the_host_with_a_record_of_its_own(
    testhost: HostConfig,
) -> None:
    _configure_host(testhost)
    code, plan = wp("control", "--host", "th")
    assert code == 0 and plan["findings"][0]["code"] == "isolation_control_planned"
    code, report = wp("control", "--host", "th", "--apply")
    assert code == 0, report
    [finding] = report["findings"]
    assert (finding["code"], finding["target"]) == ("isolation_control_passed", "host/th/control")
    state = Path(os.environ["XDG_STATE_HOME"]) / "writerpool"
    record = json.loads((state / "isolation-control-hosts" / "th.json").read_text())
    assert record["passed"] is True and record["missed"] == []
    # The host's own control is not this machine's; doctor reports each on its own.
    assert not (state / "isolation-control.json").exists()
    _, doctor = wp("doctor")
    controls = {f["target"]: f["status"] for f in doctor["findings"]
                if f["code"] == "isolation_control"}  # fmt: skip
    assert controls == {"control": "warning", "host/th/control": "ok"}, doctor
    with connect("th", testhost) as remote:
        left = remote.host.exec(["sh", "-c", "ls -a ~ | grep -c writerpool-canary || true"])
    assert left.out.strip() == "0"


def _tiny_image(tmp_path: Path) -> str:
    """A one-file image made here by `podman import`, labelled for this test."""
    root = tmp_path / "rootfs"
    root.mkdir()
    (root / "marker").write_text(secrets.token_hex(8))  # a fresh ID for every run
    archive = tmp_path / "rootfs.tar"
    run(["tar", "-C", str(root), "-cf", str(archive), "."])
    done = run(["podman", "import", "--quiet", str(archive)], env=podman_env(), timeout=120)
    return done.out.strip().removeprefix("sha256:")


def test_image_prune_on_a_host_removes_only_recorded_unused_images_there(
    testhost: HostConfig, image_pin: Path, tmp_path: Path
) -> None:
    _configure_host(testhost)
    pinned = json.loads(image_pin.read_text())["imageId"]
    old = _tiny_image(tmp_path)
    try:
        record_built(Paths.from_env(), [BuiltImage(id=old, kind="derived", base=pinned,
                                                   name="old-tools")])  # fmt: skip
        with connect("th", testhost) as remote:
            assert transfer_image(LocalPodman(), remote, old, lambda sent, total: None)
            transfer_image(LocalPodman(), remote, pinned, lambda sent, total: None)
        code, plan = wp("image", "prune", "--host", "th")
        assert code == 0 and plan["data"]["prunable"] == [old], plan
        with connect("th", testhost) as remote:
            assert remote_image_id(remote, old) == old, "a plan removes nothing"
        code, done = wp("image", "prune", "--host", "th", "--apply")
        assert code == 0 and "image_removed" in [f["code"] for f in done["findings"]], done
        with connect("th", testhost) as remote:
            assert remote_image_id(remote, old) is None
            assert remote_image_id(remote, pinned) == pinned
        # This machine's copy is not the host's: prune --host leaves it.
        assert (
            run(["podman", "image", "exists", old], env=podman_env(), check=False).returncode == 0
        )
    finally:
        run(["podman", "image", "rm", "--force", old], env=podman_env(), check=False)


@pytest.mark.every_testhost
@pytest.mark.image
def test_a_writers_storage_lives_in_volumes_of_its_host_and_goes_with_them(
    testhost: HostConfig, image_pin: Path
) -> None:
    pinned = json.loads(image_pin.read_text())["imageId"]
    writer = f"tvol{secrets.token_hex(3)}-w1"
    with connect("th", testhost) as remote:
        transfer_image(LocalPodman(), remote, pinned, lambda sent, total: None)
        # Through the seam: the host's storage operations make and remove the volumes.
        handle = writer_at(Paths.from_env(), writer, remote.name)
        remote.create_storage(handle, cache=False, adopt=False)
        made = create_volumes(
            remote, handle, cache=False, adopt=False
        )  # idempotent: the same names
        assert sorted(writer_volumes(remote, handle)) == sorted(made.values())
        # The same writer name in another writerpool state of the host's account (another
        # controller id): its volumes are neither taken nor removed.
        other = dataclasses.replace(handle, controller="f" * 16)
        with pytest.raises(WriterpoolError) as taken:
            remote.create_storage(other, cache=True, adopt=False)
        assert taken.value.code == "writer_name_taken", taken.value
        with pytest.raises(WriterpoolError) as taken:
            remote.remove_storage(other)
        assert taken.value.code == "writer_name_taken", taken.value
        with pytest.raises(WriterpoolError) as taken:  # nor are they its storage
            remote.storage_present(other, "clone")
        assert taken.value.code == "writer_name_taken", taken.value
        assert remote.storage_present(handle, "clone")
        assert sorted(writer_volumes(remote, handle)) == sorted(made.values())
        # A volume an older writerpool made (no state's id): a writer this state
        # provisions does not take it; one this state holds already (its recreate) does.
        legacy = dataclasses.replace(handle, name=f"{writer}x")
        remote.cli(["volume", "create", "--label", f"{LABEL_WRITER}={legacy.name}",
                    volume_name(legacy.name, "clone")], timeout=60)  # fmt: skip
        with pytest.raises(WriterpoolError) as taken:
            remote.create_storage(legacy, cache=False, adopt=False)
        assert taken.value.code == "writer_name_taken", taken.value
        remote.create_storage(legacy, cache=False, adopt=True)
        remote.remove_storage(legacy)
        assert writer_volumes(remote, legacy) == []
        clone = VolumeMount(volume=made["clone"], target="/work")
        spec = ContainerSpec(image_id=pinned, name=f"writerpool-test-{writer}", volumes=(clone,))
        # What an agent leaves: files of another id inside its own user namespace too.
        wrote = remote.run(spec, ["sh", "-c", "echo work > /work/f && unshare -Ur sh -c "
                                  "'mkdir /work/d && echo x > /work/d/g' && ls /work"])  # fmt: skip
        assert wrote.returncode == 0, wrote.stderr[-1000:]
        again = remote.run(spec, ["cat", "/work/f"])
        assert again.out.strip() == "work"
        where = remote.cli(["volume", "inspect", "--format", "{{.Mountpoint}}", made["clone"]])
        # In the host account's storage: this machine's account cannot even read it.
        assert where.out.startswith("/") and not os.access(where.out.strip(), os.R_OK)
        remote.remove_storage(handle)
        assert writer_volumes(remote, handle) == []
        assert not LocalPodman().cli(["volume", "ls", "-q"]).out.count(writer)


@pytest.mark.image
def test_a_stream_cut_by_a_killed_connection_is_writer_host_unreachable_then_one_completes(
    testhost: HostConfig, image_pin: Path
) -> None:
    """Collection's stream (WriterHost.stream) from a container on the host: the SSH
    connection killed while the data flows is the host's failure, and a new connection
    streams the whole of it."""
    pinned = json.loads(image_pin.read_text())["imageId"]
    total = 64 * 1024 * 1024
    command = ["sh", "-c", f"cat >/dev/null; head -c {total} /dev/zero"]
    got: list[int] = []

    def cut(remote: Any) -> Any:
        def consume(stream: Any) -> None:
            got.append(len(stream.read(1024 * 1024)))
            os.kill(_forwarder_pid(remote.socket_path), signal.SIGKILL)
            while chunk := stream.read(1024 * 1024):  # what was already on its way
                got.append(len(chunk))
            raise WriterpoolError("writer_collect_failed", "the stream ended inside the bundle")

        return consume

    with connect("th", testhost) as remote:
        transfer_image(LocalPodman(), remote, pinned, lambda sent, total: None)
        spec = ContainerSpec(image_id=pinned, name=f"writerpool-test-cut-{secrets.token_hex(3)}",
                             workdir="/tmp")  # fmt: skip
        with pytest.raises(WriterpoolError) as exc:
            remote.stream(spec, command, timeout=300, input=b"request", consume=cut(remote))
        assert exc.value.code == "writer_host_unreachable"
        assert testhost.target.address not in exc.value.message
    assert got[0] == 1024 * 1024 and sum(got) < total
    received: list[int] = []
    with connect("th", testhost) as again:
        whole = spec.model_copy(update={"name": f"{spec.name}-again"})

        def count(stream: Any) -> None:
            received.extend(iter(lambda: len(stream.read(1 << 20)), 0))

        done = again.stream(whole, command, timeout=300, input=b"request", consume=count)
        assert done.returncode == 0 and sum(received) == total


OPEN_AND_WAIT = """
import json, sys, time
from writerpool.config.hosts import HostConfig
from writerpool.runtime.remote import connect
with connect("th", HostConfig(**json.loads(sys.argv[1]))) as remote:
    print(remote.socket_path, flush=True)
    time.sleep(600)
"""


def _ended(pid: int) -> bool:
    """Gone, or a zombie left for whoever adopted it."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def test_a_forward_ends_with_the_process_that_opened_it_even_killed(testhost: HostConfig) -> None:
    given = {"url": testhost.url, "identity": str(testhost.identity),
             "known_hosts": str(testhost.known_hosts)}  # fmt: skip
    opener = subprocess.Popen([sys.executable, "-c", OPEN_AND_WAIT, json.dumps(given)],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert opener.stdout is not None
        forwarder = _forwarder_pid(Path(opener.stdout.readline().strip()))
        assert not _ended(forwarder)
    finally:
        opener.kill()
        opener.wait()
        if opener.stdout is not None:
            opener.stdout.close()
    for _ in range(300):  # bounded: 30 s for ssh to see its stdin end and the host's reply
        if _ended(forwarder):
            break
        threading.Event().wait(0.1)
    assert _ended(forwarder), "the forward outlived the process that opened it"
