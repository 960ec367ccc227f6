"""The main job end to end: provision and accept a writer, run a coding session through
a real MCP client, collect the work and show the review branch.

Runs on the embedded scripted provider unless ANTHROPIC_API_KEY is set."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from writerpool.agent.scripted import Script, ScriptedProvider
from writerpool.config.paths import Paths

WRITE_AND_COMMIT = (
    "printf 'def greet(name):\\n    return f\"hello, {name}\"\\n' > greet.py && "
    "git add greet.py && git commit -q -m 'Add greet()' && git log --oneline -1"
)
SCRIPT = {
    "default": [
        {"tool_calls": [{"name": "bash", "arguments": {"command": WRITE_AND_COMMIT}}]},
        {"text": "I added greet.py with a greet() function and committed it."},
    ]
}
PROMPT = "Add a greet(name) function in greet.py and commit it."


def step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def wp(*args: str, check: bool = True) -> int:
    done = subprocess.run([sys.executable, "-m", "writerpool", *args])
    if check and done.returncode not in (0,):
        raise SystemExit(f"writerpool {' '.join(args)} failed ({done.returncode})")
    return done.returncode


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def make_repo(root: Path) -> Path:
    repo = root / "demo-repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# demo\n")
    git(repo, "add", ".")
    git(
        repo,
        "-c",
        "user.name=Demo",
        "-c",
        "user.email=demo@example.invalid",
        "commit",
        "-q",
        "-m",
        "Initial commit",
    )
    return repo


def write_config(root: Path, repo: Path, port: int) -> None:
    real_key = os.environ.get("ANTHROPIC_API_KEY")
    provider, model = ("anthropic", "claude-sonnet-4-5") if real_key else ("scripted", "scripted")
    config = Path(os.environ["WRITERPOOL_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"""[workspaces]
demo = "{repo}"

[profiles.review]
permission = "read-only"
provider = "{provider}"
model = "{model}"
default = true

[profiles.code]
permission = "coding"
provider = "{provider}"
model = "{model}"

[providers.scripted]
base_url = "http://127.0.0.1:{port}/v1"
""")


async def coding_session() -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "writerpool", "serve"], env=dict(os.environ)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def call(name: str, args: dict[str, object]) -> dict[str, object]:
            result = await session.call_tool(name, args)
            body = result.structured_content or json.loads(result.content[0].text)  # type: ignore[union-attr]
            if not body.get("ok"):
                raise SystemExit(f"{name} failed: {body}")
            return body

        started = await call("pi_session_start", {"workspace": "demo", "executionProfile": "code"})
        sid = str(started["session"]["sessionId"])  # type: ignore[index]
        print(f"session {sid} on writer {started['session'].get('writer')}")  # type: ignore[union-attr]
        turn = await call("pi_session_prompt", {"sessionId": sid, "message": PROMPT})
        turn_id = str(turn["turnId"])
        while True:
            got = await call(
                "pi_turn_get", {"sessionId": sid, "turnId": turn_id, "waitSeconds": 10}
            )
            if got["turn"]["status"] != "running":  # type: ignore[index]
                break
        print(f"turn {got['turn']['status']}: {got['turn'].get('text')}")  # type: ignore[index,union-attr]
        await call("pi_session_close", {"sessionId": sid})


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="writerpool-demo-"))
    real = Paths.from_env()
    os.environ["WRITERPOOL_CONFIG"] = str(root / "config.toml")
    os.environ["XDG_STATE_HOME"] = str(root / "state")
    paths = Paths.from_env()
    paths.state_dir.mkdir(parents=True)
    shutil.copy2(real.image_pin_file, paths.image_pin_file)
    repo = make_repo(root)
    with ScriptedProvider(Script.model_validate(SCRIPT)) as provider:
        write_config(root, repo, provider.port)
        step("doctor")
        wp("doctor", check=False)
        step("isolation control")
        wp("control", "--apply")
        step("provision and accept a writer")
        wp("mode", "set", "demo", "container", "--profiles", "code", "--apply")
        wp("writer", "list")
        step("a coding session through the MCP server")
        start = time.monotonic()
        asyncio.run(coding_session())
        print(f"session took {time.monotonic() - start:.1f} s")
    step("collect the work")
    wp("writer", "collect", "demo-w1", "--apply")
    step("the review branch in the operator's checkout")
    print(git(repo, "log", "--oneline", "--decorate", "writer-demo-w1/main"))
    print(git(repo, "show", "--stat", "--format=%s", "writer-demo-w1/main"))
    print(f"the checkout's own main is untouched: {git(repo, 'log', '--oneline', 'main').strip()}")


if __name__ == "__main__":
    main()
