"""Helpers (no tests) for end-to-end tests of container workspaces with several writers.

Each test gets its own workspace alias, so its writers, their containers and their
fences never meet another test's (writer names and labels are global to the Podman
account). The provider plays this module's script, which drives git inside a writer.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.conftest import KEY_ENV, SERVER_ENV_VARS
from tests.e2e.harness import ServerEnv
from tests.integration.test_collect_helpers import snapshot
from tests.integration.writers_support import make_checkout, podman, wp
from writerpool.agent.scripted import Script, ScriptedProvider, ScriptEntry, Step, ToolCall
from writerpool.config.paths import Paths

GIT_ID = "-c user.name=Pi -c user.email=pi@example.invalid"
PLAIN_TEXT = "Nothing to do here."
SLOW_TEXT = "A very slow answer that an abort cuts short."


def _bash(command: str) -> ToolCall:
    return ToolCall(name="bash", arguments={"command": command})


SWAP_GIT_DIR = (
    # The old .git goes inside the new one, where neither git nor a scan of the work
    # tree looks; the new one has the same HEAD, refs, objects and index.
    "mv .git .git-kept && mkdir .git && mv .git-kept .git/kept && "
    "cp -a .git/kept/HEAD .git/kept/objects .git/kept/refs .git/kept/index .git/ && "
    "{ cp -a .git/kept/packed-refs .git/ 2>/dev/null || true; } && "
    "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n' > .git/config && "
    "mkdir .git/hooks && printf '#!/bin/sh\\ntouch /work/.git/hook-ran\\n' "
    "> .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit; "
    'echo "swap-exit=$?"; git status --porcelain; echo "status-exit=$?"'
)

# Each entry's final text echoes what pi's tools returned, so a test can read the
# exit codes of what ran inside the writer from the turn's text.
POOL_SCRIPT = Script(
    scripts=[
        ScriptEntry(
            match="commit-work",
            steps=[
                # Separate steps: pi may run one answer's tool calls concurrently.
                Step(
                    tool_calls=[
                        ToolCall(
                            name="write",
                            arguments={"path": "feature.txt", "content": "made by pi\n"},
                        )
                    ]
                ),
                Step(
                    tool_calls=[
                        _bash(
                            "git switch -q -c pi-work && git add feature.txt && "
                            f"git {GIT_ID} commit -q -m 'feature from pi' && "
                            'echo "commit=$(git rev-parse HEAD)"'
                        ),
                    ]
                ),
                Step(text="{tool_results}"),
            ],
        ),
        ScriptEntry(
            match="plant-settings",
            steps=[
                Step(
                    tool_calls=[
                        _bash(
                            "git config core.fsmonitor 'touch /work/fsmonitor-ran'; "
                            'echo "config-exit=$?"; '
                            "printf '#!/bin/sh\\ntouch /work/hook-ran\\n' "
                            '> .git/hooks/pre-commit; echo "hook-exit=$?"; '
                            'git config --get core.fsmonitor; echo "get-exit=$?"'
                        ),
                    ]
                ),
                # pi's own write tool, not only the shell.
                Step(
                    tool_calls=[
                        ToolCall(
                            name="write",
                            arguments={
                                "path": ".git/hooks/post-checkout",
                                "content": "#!/bin/sh\ntouch /work/hook-ran\n",
                            },
                        )
                    ]
                ),
                Step(text="{tool_results}"),
            ],
        ),
        ScriptEntry(
            match="leave-dirty",
            steps=[
                Step(tool_calls=[_bash('echo draft > uncommitted.txt; echo "dirty-exit=$?"')]),
                Step(text="{tool_results}"),
            ],
        ),
        ScriptEntry(
            match="swap-git-dir",
            steps=[
                # The read-only mounts sit on .git/config and .git/hooks; .git itself is
                # an ordinary directory of the clone, so it can be renamed and rebuilt.
                Step(tool_calls=[_bash(SWAP_GIT_DIR)]),
                Step(text="{tool_results}"),
            ],
        ),
        ScriptEntry(match="take-long", steps=[Step(text=SLOW_TEXT, delay_seconds=300)]),
    ],
    default=[Step(text=PLAIN_TEXT)],
)


def unique_alias(stem: str) -> str:
    return f"{stem}{secrets.token_hex(3)}"


@dataclass
class PoolEnv:
    server: ServerEnv
    alias: str
    checkout: Path
    # The checkout as the operator made it, before writerpool ever read it.
    pristine: dict[str, tuple[int, int, str]]

    @property
    def key(self) -> str:
        return self.server.env[KEY_ENV]

    def writer(self, index: int) -> str:
        return f"{self.alias}-w{index}"

    def clone(self, index: int) -> Path:
        return self.server.paths.writer_dir(self.writer(index)) / "clone"

    def start_args(self) -> dict[str, str]:
        return {"workspace": self.alias, "executionProfile": "code"}


def _config_text(alias: str, checkout: Path, port: int) -> str:
    return f"""\
[workspaces]
{alias} = "{checkout}"

[profiles.review]
permission = "read-only"
provider = "scripted"
model = "scripted-model"
thinking = "off"
default = true

[profiles.code]
permission = "coding"
provider = "scripted"
model = "scripted-model"
thinking = "off"

[providers.scripted]
base_url = "http://127.0.0.1:{port}/v1"
api_key_env = "{KEY_ENV}"

[pool]
session_close_seconds = 10
"""


def make_pool(
    tmp_path: Path,
    provider: ScriptedProvider,
    stem: str,
    writers: int,
    prepare: Callable[[Path], None] | None = None,
) -> PoolEnv:
    """A checkout (changed by `prepare`, if given), its configuration, a passing control
    and `writers` ready writers, all made with the operator's commands in the test's
    isolated HOME and XDG dirs."""
    alias = unique_alias(stem)
    checkout = make_checkout(tmp_path / "checkout", commits=2)
    if prepare is not None:
        prepare(checkout)
    pristine = snapshot(checkout)
    paths = Paths.from_env()
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(_config_text(alias, checkout, provider.port))
    wp("control", "--apply", check=True)
    wp("mode", "set", alias, "container", "--profiles", "code", "--writers", str(writers),
       "--apply", check=True)  # fmt: skip
    key = "sk-scripted-" + secrets.token_hex(12)
    env = {k: os.environ[k] for k in SERVER_ENV_VARS if k in os.environ}
    env[KEY_ENV] = key
    server = ServerEnv(tmp_path, env, paths, {alias: checkout}, secrets=[key, str(tmp_path)])
    return PoolEnv(server, alias, checkout, pristine)


def containers_of(writer: str, running_only: bool = False) -> list[str]:
    """Names from `podman ps -a` (or, running_only, `podman ps`) for the writer's label."""
    which = [] if running_only else ["-a"]
    out = podman("ps", *which, "--filter", f"label=io.writerpool.writer={writer}",
                 "--format", "{{.Names}}")  # fmt: skip
    return out.split()


def result_value(text: str, name: str) -> str:
    """The value after `name=` in a turn text that echoes tool results. An agent that
    reads a command's stdout and stderr apart (Codex) may put a line of one inside a line
    of the other, as they came ("touch: " + "home-exit=1" + "cannot touch …"): where no
    line starts with the name, it is looked for after another word in a line."""
    key = re.escape(name)
    for pattern in (rf"^{key}=(.*)$", rf"[^\w-]{key}=(.*)$"):  # at a line's start first
        found = re.search(pattern, text, re.MULTILINE)
        if found is not None:
            return found.group(1).strip()
    raise AssertionError(f"{name}= not in the tool results: {text!r}")
