"""The benchmark's private world: its own config, state, cache and HOME under a
temporary directory, generated repositories, and a scripted provider.

Nothing here reads or writes the operator's own writers: every writerpool path comes
from XDG_* and WRITERPOOL_CONFIG, which point below the bench's root; only the writer
image's pin is copied in (the image itself is shared, read-only).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parent.parent
if str(TOP) not in sys.path:
    sys.path.insert(0, str(TOP))

from tests.support.repos import make_repo  # noqa: E402
from writerpool.agent.install import install_pi  # noqa: E402
from writerpool.agent.scripted import Script, ScriptedProvider, Step  # noqa: E402
from writerpool.config.paths import Paths  # noqa: E402
from writerpool.gitops.hostgit import git_env  # noqa: E402

KEY_ENV = "WRITERPOOL_BENCH_SCRIPTED_KEY"
PROFILE = "code"
XDG = (
    ("XDG_CONFIG_HOME", ".config"),
    ("XDG_STATE_HOME", ".local/state"),
    ("XDG_CACHE_HOME", ".cache"),
    ("XDG_DATA_HOME", ".local/share"),
)
SERVER_VARS = (
    "WRITERPOOL_CONFIG", "HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME",
    "XDG_DATA_HOME", "XDG_RUNTIME_DIR", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "PATH",
    "LANG", "PYTHONPATH", KEY_ENV,
)  # fmt: skip


@dataclass
class Workspace:
    alias: str
    repo: Path
    writers: int


@dataclass
class BenchEnv:
    """Owns the bench's temporary root; `close()` removes it (writers included)."""

    root: Path
    real: Paths
    paths: Paths
    provider: ScriptedProvider
    pi: Path
    workspaces: dict[str, Workspace] = field(default_factory=dict)
    extra_config: list[str] = field(default_factory=list)  # appended by write_config

    @classmethod
    def create(cls) -> BenchEnv:
        real = Paths.from_env()
        if not real.image_pin_file.exists():
            raise SystemExit("bench: the writer image is not built; run `writerpool image build`")
        pi = install_pi(real.pi_prefix)  # idempotent; the real account's copy, shared
        root = Path(tempfile.mkdtemp(prefix="writerpool-bench-"))
        home = root / "home"
        home.mkdir()
        os.environ["HOME"] = str(home)
        for var, sub in XDG:
            os.environ[var] = str(home / sub)
        os.environ["WRITERPOOL_CONFIG"] = str(home / ".config" / "writerpool" / "config.toml")
        gitconfig = root / "gitconfig"
        gitconfig.write_text("[init]\n\tdefaultBranch = main\n")
        os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
        os.environ["GIT_CONFIG_GLOBAL"] = str(gitconfig)
        os.environ[KEY_ENV] = "sk-bench-scripted"
        paths = Paths.from_env()
        paths.state_dir.mkdir(parents=True)
        shutil.copy2(real.image_pin_file, paths.image_pin_file)
        paths.cache_dir.mkdir(parents=True)
        (paths.cache_dir / "pi").symlink_to(real.pi_prefix, target_is_directory=True)
        provider = ScriptedProvider(Script(default=[Step(text="ok")])).start()
        return cls(root=root, real=real, paths=paths, provider=provider, pi=pi)

    def close(self) -> None:
        self.provider.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- repositories and configuration ------------------------------------------

    def add_workspace(self, alias: str, commits: int, writers: int, files: int = 50) -> Workspace:
        repo = make_repo(self.root / "repos" / alias, commits, files)
        ws = Workspace(alias, repo, writers)
        self.workspaces[alias] = ws
        return ws

    def write_config(self) -> None:
        lines = ["[workspaces]"]
        lines += [f'{w.alias} = "{w.repo}"' for w in self.workspaces.values()]
        for name, permission, default in (
            ("review", "read-only", True),
            (PROFILE, "coding", False),
        ):
            lines += [
                "",
                f"[profiles.{name}]",
                f'permission = "{permission}"',
                'provider = "scripted"',
                'model = "scripted-model"',
                'thinking = "off"',
            ]
            lines += ["default = true"] if default else []
        port = self.provider.port
        lines += [
            "", "[providers.scripted]",
            f'base_url = "http://127.0.0.1:{port}/v1"',
            f'api_key_env = "{KEY_ENV}"',
            "", "[pool]", "session_close_seconds = 10",
        ]  # fmt: skip
        lines += self.extra_config
        self.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
        self.paths.config_file.write_text("\n".join(lines) + "\n")

    def server_env(self) -> dict[str, str]:
        return {k: os.environ[k] for k in SERVER_VARS if k in os.environ}

    # -- commands -------------------------------------------------------------------

    def wp(self, *args: str) -> dict[str, Any]:
        """`writerpool ARGS --json` in the bench's world; the parsed report."""
        done = subprocess.run(
            [sys.executable, "-m", "writerpool", *args, "--json"],
            capture_output=True, text=True, timeout=1800, env=dict(os.environ),
        )  # fmt: skip
        try:
            report: dict[str, Any] = json.loads(done.stdout)
        except ValueError:
            raise SystemExit(
                f"bench: writerpool {' '.join(args)} failed ({done.returncode}): "
                f"{done.stderr.strip()[-800:]}"
            ) from None
        return report

    def wp_ok(self, *args: str) -> dict[str, Any]:
        report = self.wp(*args)
        if not report.get("ok"):
            bad = [f for f in report.get("findings", []) if f.get("status") == "error"]
            raise SystemExit(f"bench: writerpool {' '.join(args)} failed: {json.dumps(bad)[:1500]}")
        return report

    def set_container_mode(self, alias: str, *more: str) -> dict[str, Any]:
        ws = self.workspaces[alias]
        return self.wp_ok("mode", "set", alias, "container", "--profiles", PROFILE,
                          "--writers", str(ws.writers), *more, "--apply")  # fmt: skip

    def clone_dir(self, writer: str) -> Path:
        return self.paths.writer_dir(writer) / "clone"


def git(repo: Path, *args: str) -> str:
    """Host git with the bench's fixed identity (for repositories the bench made)."""
    from tests.support import IDENTITY  # noqa: PLC0415

    env = git_env()
    env.update(IDENTITY)
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env=env, timeout=600, check=True)  # fmt: skip
    return done.stdout.strip()


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result
