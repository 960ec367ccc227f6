"""The agent directory, the one credential, pi's flags and its environment."""

from __future__ import annotations

import json
import stat
from pathlib import Path, PurePosixPath

import pytest

from writerpool.agent import launch
from writerpool.agent.compact import PRELOAD_NAME
from writerpool.agent.environment import EGRESS_ENV, HOST, pi_env
from writerpool.config.models import Config, Profile, Provider
from writerpool.config.paths import Paths
from writerpool.config.providers import PLACEHOLDER_KEY, provider_key, resolve_provider
from writerpool.errors import WriterpoolError
from writerpool.pool.writer.container import AGENT_DIR, readonly_spec, writer_spec
from writerpool.proc import run
from writerpool.runtime.host import EngineFacts
from writerpool.runtime.local import LocalPodman
from writerpool.state.writer import BaseRecord, WriterState

CUSTOM = Provider(
    base_url="http://127.0.0.1:8080/v1",
    container_base_url="http://10.0.2.2:8080/v1",
    context_window=32000,
    max_tokens=4096,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_models_json_names_the_endpoint_and_the_profiles_models(tmp_path: Path) -> None:
    launch.render_agent_dir(tmp_path / "agent", "local", CUSTOM, False, ["m-a", "m-b", "m-a"])
    doc = json.loads((tmp_path / "agent" / "models.json").read_text())
    entry = doc["providers"]["local"]
    assert entry["baseUrl"] == "http://127.0.0.1:8080/v1"
    assert entry["api"] == "openai-completions"
    assert [m["id"] for m in entry["models"]] == ["m-a", "m-b"]
    assert entry["models"][0] == {"id": "m-a", "contextWindow": 32000, "maxTokens": 4096}
    assert entry["compat"]["supportsDeveloperRole"] is False
    assert entry["apiKey"] == PLACEHOLDER_KEY  # never the real key
    assert mode(tmp_path / "agent") == 0o700
    assert mode(tmp_path / "agent" / "models.json") == 0o600


def test_a_writer_reaches_the_provider_through_the_container_url() -> None:
    doc = launch.models_document("local", CUSTOM, container=True)
    assert doc["providers"]["local"]["baseUrl"] == "http://10.0.2.2:8080/v1"
    plain = Provider(base_url="http://192.0.2.7:9000/v1", api="anthropic-messages")
    doc = launch.models_document("local", plain, container=True)
    assert doc["providers"]["local"]["baseUrl"] == "http://192.0.2.7:9000/v1"
    assert "compat" not in doc["providers"]["local"]  # compat keys are per API
    assert [m["id"] for m in doc["providers"]["local"]["models"]] == [launch.TEMPLATE_MODEL]


def test_settings_disable_retry_and_builtin_providers_get_no_models_json(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    launch.render_agent_dir(agent, "local", CUSTOM, False)
    launch.render_agent_dir(agent, "anthropic", None, False)
    assert not (agent / "models.json").exists()  # a stale endpoint is not left behind
    assert json.loads((agent / "settings.json").read_text()) == {"retry": {"enabled": False}}


def test_no_fd_shim_inside_a_container_agent_dir(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    (agent / "bin").mkdir(parents=True)
    (agent / "bin" / "fd").write_text("#!/bin/sh\n")
    launch.render_agent_dir(agent, "local", CUSTOM, True)
    assert not (agent / "bin" / "fd").exists()


def test_the_operator_auth_store_is_found_under_home(tmp_path: Path) -> None:
    store = tmp_path / ".pi" / "agent" / "auth.json"
    store.parent.mkdir(parents=True)
    store.write_text('{"anthropic": {"type": "api_key", "key": "sk-home"}}')
    anthropic = resolve_provider(Config(), "anthropic")
    assert anthropic is not None
    assert provider_key(anthropic, {"HOME": str(tmp_path)}) == "sk-home"


def test_custom_key_goes_into_models_json_and_is_taken_out_again(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    launch.render_agent_dir(agent, "local", CUSTOM, False, ["m-1"])
    (agent / "auth.json").write_text('{"local": {"type": "api_key", "key": "stale"}}')
    launch.install_credential(agent, "local", "sk-one")
    models = agent / "models.json"
    entry = json.loads(models.read_text())["providers"]["local"]
    assert entry["apiKey"] == "sk-one" and entry["models"][0]["id"] == "m-1"
    assert mode(models) == 0o600
    assert not (agent / "auth.json").exists()  # it would take precedence in pi
    launch.remove_credential(agent)
    written = models.stat()
    launch.remove_credential(agent)  # nothing left to take out: the file is not rewritten
    again = models.stat()
    assert (again.st_ino, again.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    assert "sk-one" not in models.read_text()
    entry = json.loads(models.read_text())["providers"]["local"]
    assert entry["apiKey"] == PLACEHOLDER_KEY and entry["baseUrl"] == CUSTOM.base_url


def test_builtin_key_is_a_key_only_entry_removed_with_the_file(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    launch.render_agent_dir(agent, "anthropic", None, False)
    launch.install_credential(agent, "anthropic", "sk-ant-1")
    doc = json.loads((agent / "models.json").read_text())
    assert doc == {"providers": {"anthropic": {"apiKey": "sk-ant-1", "headers": {}}}}
    assert mode(agent / "models.json") == 0o600
    launch.remove_credential(agent)
    assert not (agent / "models.json").exists()


def test_an_unreadable_models_json_is_dropped_rather_than_left_with_a_key(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "models.json").write_text('{"providers": {"x": {"apiKey": "sk-1"')
    with pytest.raises(WriterpoolError):
        launch.install_credential(agent, "x", "sk-2")
    launch.remove_credential(agent)
    assert not (agent / "models.json").exists()


@pytest.mark.parametrize("key", ["", "!echo x", "two\nlines", " padded"])
def test_unusable_keys_are_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(WriterpoolError) as err:
        launch.install_credential(tmp_path, "local", key)
    assert err.value.code == "provider_unconfigured"
    assert key.strip() == "" or key.strip() not in err.value.message
    assert not (tmp_path / "models.json").exists()


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_pi_args_select_tools_by_permission() -> None:
    coding = Profile(permission="coding", provider="local", model="m-1", thinking="high")
    args = launch.pi_args(coding, False, "/pi/agent", session_dir="/tmp/s")
    assert args[:3] == ["--mode", "rpc", "--offline"]
    assert flag(args, "--provider") == "local" and flag(args, "--model") == "m-1"
    assert flag(args, "--thinking") == "high"
    assert flag(args, "--tools") == "read,bash,edit,write,grep,find,ls"
    for off in ("--no-extensions", "--no-skills", "--no-prompt-templates", "--no-context-files"):
        assert off in args
    read_only = launch.pi_args(coding, True, "/pi/agent", session_dir="/tmp/s")
    assert flag(read_only, "--tools") == "read,grep,find,ls"
    review = Profile(permission="read-only", provider="local", model="m-1", default=True)
    # A read-only profile stays read-only even when the caller forgets to say so.
    reviewing = launch.pi_args(review, False, "/pi/agent", session_dir="/tmp/s")
    assert flag(reviewing, "--tools") == "read,grep,find,ls"


def test_pi_persists_its_session_nowhere_and_derives_none_into_its_cwd() -> None:
    coding = Profile(permission="coding", provider="local", model="m-1")
    args = launch.pi_args(coding, False, "/pi/agent", session_dir="/tmp/pi-sessions")
    # --no-session would leave pi a session directory of "" (its cwd) for new_session.
    assert "--no-session" not in args
    assert flag(args, "--session") == "/dev/null"
    assert flag(args, "--session-dir") == "/tmp/pi-sessions"
    for relative in ("", ".", "sessions", "./x"):
        with pytest.raises(ValueError, match="absolute"):
            launch.pi_args(coding, False, "/pi/agent", session_dir=relative)


def _state_paths(argv: list[str]) -> dict[str, str]:
    """Where pi keeps state, as a container's argv tells it (the last --env wins)."""
    env = dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "--env")
    return {
        "HOME": env["HOME"], "TMPDIR": env["TMPDIR"], "agent": env["PI_CODING_AGENT_DIR"],
        "session": flag(argv, "--session"), "sessions": flag(argv, "--session-dir"),
    }  # fmt: skip


def _under(path: str, top: str) -> bool:
    return PurePosixPath(path).is_relative_to(top)


def test_pi_keeps_no_state_in_the_clone_of_any_container(tmp_path: Path) -> None:
    facts = EngineFacts(host="local", podman_version="4.3.1", limits=True, rootless=True)
    paths = Paths(config_file=tmp_path / "config.toml", state_dir=tmp_path, cache_dir=tmp_path)
    state = WriterState(
        name="w1", alias="demo", settings_digest="d", image="default", network="provider",
        cache="go", lifecycle="reset", tags="keep", profiles=("code",),
        base=BaseRecord(name="main", ref="refs/heads/main", commit="0" * 40, branch="main"),
    )  # fmt: skip
    writer = writer_spec(paths, LocalPodman(), state, "0" * 64, Config().pool, facts)
    readonly = readonly_spec(
        image_id="0" * 64, session_id="s1", checkout=tmp_path, agent_dir=tmp_path / "agent",
        egress_dir=tmp_path / "egress", pool=Config().pool, facts=facts,
    )  # fmt: skip
    coding = Profile(permission="coding", provider="local", model="m-1")
    for spec in (writer, readonly):
        pi = launch.pi_args(coding, False, AGENT_DIR, session_dir=launch.CONTAINER_SESSION_DIR)
        argv = spec.run_argv(["pi", *pi], interactive=True)
        workdir = flag(argv, "--workdir")
        tmpfs = [argv[i + 1].split(":")[0] for i, arg in enumerate(argv) if arg == "--tmpfs"]
        writable = [m.target for m in spec.mounts if not m.read_only]
        for what, where in _state_paths(argv).items():
            assert PurePosixPath(where).is_absolute(), what
            assert not _under(where, workdir), what
            assert not any(_under(where, target) for target in writable), what
        # What pi could write of its own lands on the container's tmpfs, gone with it.
        for what in ("HOME", "TMPDIR", "sessions"):
            assert any(_under(_state_paths(argv)[what], top) for top in tmpfs), what


def test_host_env_is_minimal_and_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-should-not-pass")
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", "/etc/ssl/certs/ca-certificates.crt")
    env = pi_env(tmp_path / "agent", HOST, tmpdir=tmp_path / "tmp")
    assert env["PI_CODING_AGENT_DIR"] == str(tmp_path / "agent")
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path / "tmp")
    assert env["PI_OFFLINE"] == "1"
    assert env["NODE_EXTRA_CA_CERTS"] == "/etc/ssl/certs/ca-certificates.crt"
    assert "ANTHROPIC_API_KEY" not in env
    assert "/usr/bin" in env["PATH"].split(":")


def test_every_placement_loads_the_preload_that_keeps_pi_output_linear(tmp_path: Path) -> None:
    preload = f'--require "{AGENT_DIR}/{PRELOAD_NAME}"'
    readonly = readonly_spec(
        image_id="0" * 64, session_id="s1", checkout=tmp_path, agent_dir=tmp_path / "agent",
        egress_dir=tmp_path / "egress", pool=Config().pool,
        facts=EngineFacts(host="local", podman_version="4.3.1", limits=True, rootless=True),
    )  # fmt: skip
    writer = pi_env(AGENT_DIR, "provider", writer="w1", cache="go")
    assert readonly.env["NODE_OPTIONS"] == writer["NODE_OPTIONS"] == preload
    assert readonly.env.items() >= EGRESS_ENV.items() and writer.items() >= EGRESS_ENV.items()
    assert "WRITERPOOL_EGRESS_PORT" not in pi_env(AGENT_DIR, "none")
    # An allowlist's proxy variables: only beside the egress forwarder, only when asked.
    assert "HTTPS_PROXY" not in writer and "HTTPS_PROXY" not in readonly.env
    assert pi_env(AGENT_DIR, "provider", allow=True)["HTTPS_PROXY"].startswith("http://127.")
    assert "HTTPS_PROXY" not in pi_env(AGENT_DIR, "none", allow=True)
    assert writer["GIT_AUTHOR_EMAIL"] == "w1@writerpool.invalid" and writer["GOPATH"] == "/pi/go"
    host = pi_env(tmp_path / "agent", HOST, tmpdir=tmp_path)
    assert host["NODE_OPTIONS"] == f'--require "{tmp_path}/agent/{PRELOAD_NAME}"'
    with pytest.raises(ValueError, match="tmpdir"):
        pi_env(tmp_path / "agent", HOST)


def test_fd_shim_drops_only_the_flag_old_fd_rejects(tmp_path: Path) -> None:
    shim = tmp_path / "fd"
    shim.write_text(launch.FD_SHIM.format(fd="/bin/echo"))
    shim.chmod(0o700)
    out = run([str(shim), "--glob", "--no-require-git", "--", "a b", "/w"]).out
    assert out == "--glob -- a b /w\n"
