"""Fixtures for end-to-end tests of `writerpool serve`: a scripted provider, a
configuration under tmp_path, and pi installed once per run."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import ServerEnv
from writerpool.agent.install import PI_VERSION, install_pi, installed_version
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
    if shutil.which("node") is None:
        _missing("pi needs Node.js, which is not installed")
    prefix = REAL_PI_PREFIX
    if installed_version(prefix) != PI_VERSION and shutil.which("npm") is None:
        _missing("pi is not installed and npm is missing")
    install_pi(prefix)
    return prefix


@pytest.fixture(scope="session")
def scripted() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(SCRIPT, host="127.0.0.1") as provider:
        yield provider


def _config_text(workspaces: dict[str, Path], base_url: str) -> str:
    lines = ["[workspaces]"]
    lines += [f'{alias} = "{path}"' for alias, path in workspaces.items()]
    lines += [
        "",
        "[profiles.review]",
        'permission = "read-only"',
        'provider = "scripted"',
        'model = "scripted-model"',
        'thinking = "off"',
        "default = true",
        "",
        "[profiles.code]",
        'permission = "coding"',
        'provider = "scripted"',
        'model = "scripted-model"',
        'thinking = "off"',
        "",
        "[providers.scripted]",
        f'base_url = "{base_url}"',
        f'api_key_env = "{KEY_ENV}"',
        "",
        "[pool]",
        "session_close_seconds = 10",
    ]
    return "\n".join(lines) + "\n"


def _store_modes(paths: Paths) -> None:
    store_entry(paths, "hosted", ModeEntry(mode="host", accept_host_writes=True))
    store_entry(paths, "locked", ModeEntry(mode="read-only"))
    store_entry(
        paths,
        "boxed",
        ModeEntry(
            mode="container",
            container=ContainerSettings(profiles=("code",), writers=2, base="main"),
        ),
    )


MakeServer = Callable[..., ServerEnv]


@pytest.fixture
def make_server(tmp_path: Path, scripted: ScriptedProvider) -> MakeServer:
    """Build config, modes and environment for one server (pi optional)."""

    def make(pi: Path | None = None) -> ServerEnv:
        root = tmp_path
        xdg = root / "xdg"
        workspaces = {name: root / "ws" / name for name in ("demo", "hosted", "locked", "boxed")}
        for path in workspaces.values():
            path.mkdir(parents=True, exist_ok=True)
            (path / "README.md").write_text("a workspace\n")
        config_file = root / "config" / "config.toml"
        config_file.parent.mkdir(parents=True, exist_ok=True)
        config_file.write_text(_config_text(workspaces, scripted.base_url()))
        paths = Paths(
            config_file=config_file,
            state_dir=xdg / "state" / "writerpool",
            cache_dir=xdg / "cache" / "writerpool",
        )
        _store_modes(paths)
        if pi is not None:
            paths.cache_dir.mkdir(parents=True, exist_ok=True)
            (paths.cache_dir / "pi").symlink_to(pi, target_is_directory=True)
        key = "sk-scripted-" + secrets.token_hex(12)
        env = {
            "WRITERPOOL_CONFIG": str(config_file),
            "HOME": str(root / "home"),
            "XDG_CONFIG_HOME": str(xdg / "config"),
            "XDG_STATE_HOME": str(xdg / "state"),
            "XDG_CACHE_HOME": str(xdg / "cache"),
            "XDG_DATA_HOME": str(xdg / "data"),
            KEY_ENV: key,
        }
        (root / "home").mkdir(exist_ok=True)
        return ServerEnv(root, env, paths, workspaces, secrets=[key, str(root)])

    return make
