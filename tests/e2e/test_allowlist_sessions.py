"""A real package flow through a workspace's egress allowlist: pi (scripted provider) in
a real writer on rootless Podman runs `pip install` and `npm install` against a
registry-like test host (HTTPS from a test CA made here, a PEP 503 index with one wheel,
an npm registry with one tarball), and they succeed through the allowlist proxy; an
unlisted name fails with the proxy's message; a listed name that resolves to loopback is
refused. The test host listens on 127.0.0.1 only; its `.test` names exist only in the
proxy's `[egress.resolve]` map. pip is the writer image's own (in a venv); the image
has no npm, so the agent fetches npm's tarball through the proxy too and runs it on the
image's Node.js."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.e2e.harness import connect
from tests.e2e.pool_support import make_pool, result_value
from tests.integration.writers_support import wp
from tests.support.registry import NAME, Registry, registry, tool_routes
from writerpool.agent.scripted import Script, ScriptedProvider, ScriptEntry, Step, ToolCall
from writerpool.config.paths import Paths

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi]

INSTALL = """
cd /tmp
base=https://{name}:{port}
python3 -c "import urllib.request as u; u.urlretrieve('$base/tools/npm.tgz', 'npm.tgz')"
echo "fetch-exit=$?"
python3 -m venv /tmp/venv && /tmp/venv/bin/pip install -q --no-cache-dir \
    --disable-pip-version-check --index-url $base/simple/ wptiny 2>&1 | tail -3
echo "pip-exit=${{PIPESTATUS[0]}}"
/tmp/venv/bin/python -c 'import wptiny; print("pip-import=" + wptiny.MESSAGE)'
mkdir -p npmtool proj && tar -xzf npm.tgz -C npmtool && cd proj && echo '{{}}' > package.json
node /tmp/npmtool/npm/bin/npm-cli.js install --no-audit --no-fund --cache /tmp/npm-cache \
    --registry $base/npm/ wptiny 2>&1 | tail -3
echo "npm-exit=${{PIPESTATUS[0]}}"
node -e 'console.log("npm-require=" + require("/tmp/proj/node_modules/wptiny"))'
"""

REFUSED = """
cd /tmp
COLUMNS=400 /tmp/venv/bin/pip download --no-cache-dir --disable-pip-version-check --retries 1 \
    --no-deps -d /tmp/downloads --index-url https://unlisted.test/simple/ wptiny \
    > unlisted.txt 2>&1
echo "unlisted-pip-exit=$?"
tr '\n' ' ' < unlisted.txt | tr -s ' ' \
    | grep -o 'unlisted.test:443 is not allowed (not_listed)' | head -1 | sed 's/^/unlisted-pip=/'
grep -i -E -m8 'proxy|403|fetch|error|tunnel' unlisted.txt | cut -c1-400 | sed 's/^/pip-said: /'
python3 - <<'EOF'
import urllib.request
for name, url in (("unlisted", "https://unlisted.test/"),
                  ("rebind", "https://rebind.test:{port}/simple/")):
    try:
        urllib.request.urlopen(url, timeout=20)
        print(name + "=reached")
    except OSError as exc:
        print(name + "=" + str(exc))
EOF
"""


def script(port: int) -> Script:
    def bash(command: str) -> list[Step]:
        call = ToolCall(name="bash", arguments={"command": command, "timeout": 240})
        return [Step(tool_calls=[call]), Step(text="{tool_results}")]

    return Script(
        scripts=[
            ScriptEntry(match="install-deps", steps=bash(INSTALL.format(name=NAME, port=port))),
            ScriptEntry(match="try-refused", steps=bash(REFUSED.format(port=port))),
        ],
        default=[Step(text="plain")],
    )


@pytest.fixture
def test_host(tmp_path: Path) -> Iterator[Registry]:
    with registry(tmp_path / "registry", tool_routes()) as served:
        yield served


def test_pip_and_npm_install_through_the_allowlist_and_refusals_name_the_host(
    tmp_path: Path, test_host: Registry, image_pin: Path
) -> None:
    with ScriptedProvider(script(test_host.port)) as provider:
        pool = make_pool(tmp_path, provider, "allow", writers=1)
        config = Paths.from_env().config_file
        config.write_text(
            config.read_text() + f'\n[egress]\nca_bundle = "{test_host.ca}"\n\n[egress.resolve]\n'
            f'"{NAME}" = ["127.0.0.1"]\n"rebind.test" = ["127.0.0.2"]\n'
        )
        allow = f"{test_host.entry},127.0.0.1/32,rebind.test:{test_host.port}"
        wp("mode", "set", pool.alias, "container", "--profiles", "code", "--allow", allow,
           "--apply", check=True)  # fmt: skip

        async def scenario() -> tuple[dict[str, object], dict[str, object]]:
            async with connect(pool.server) as client:
                started = await client.ok("pi_session_start", pool.start_args())
                sid = started["session"]["sessionId"]
                turns = []
                for message in ("install-deps now", "try-refused now"):
                    body = await client.ok(
                        "pi_session_prompt", {"sessionId": sid, "message": message}
                    )
                    turns.append(await client.wait_turn(sid, body["turnId"], limit=400))
                await client.ok("pi_session_close", {"sessionId": sid})
                return turns[0], turns[1]

        installed, refused = anyio.run(scenario)
    text, refusals = str(installed["text"]), str(refused["text"])
    print(text, refusals, sep="\n")  # what the agent saw, for the record
    assert result_value(text, "fetch-exit") == "0"
    assert result_value(text, "pip-exit") == "0"
    assert result_value(text, "pip-import") == "wptiny installed through the allowlist"
    assert result_value(text, "npm-exit") == "0"
    assert result_value(text, "npm-require") == "wptiny installed through the allowlist"
    assert {"/simple/wptiny/", "/files/wptiny-0.1-py3-none-any.whl", "/npm/wptiny",
            "/npm/wptiny/-/wptiny-0.1.0.tgz"} <= set(test_host.requests)  # fmt: skip
    assert result_value(refusals, "unlisted-pip-exit") != "0"
    assert result_value(refusals, "unlisted-pip") == "unlisted.test:443 is not allowed (not_listed)"
    assert "unlisted.test:443 is not allowed (not_listed)" in result_value(refusals, "unlisted")
    rebind = result_value(refusals, "rebind")
    assert f"rebind.test:{test_host.port} is not allowed (address_loopback)" in rebind
    denied = {d["destination"]: d["reason"] for d in refused["egressDenied"]}  # type: ignore[attr-defined]
    assert denied == {"unlisted.test:443": "not_listed",
                      f"rebind.test:{test_host.port}": "address_loopback"}  # fmt: skip
    _, log = wp("egress", "log", pool.writer(1), check=True)
    decisions = log["data"]["decisions"]
    print("\n".join(f["message"] for f in log["findings"]))
    allowed = [d for d in decisions if d["decision"] == "allowed"]
    assert allowed and all(d["entry"] == test_host.entry for d in allowed)
    assert all(d["address"] == "127.0.0.1" for d in allowed)
    assert {(d["destination"], d["reason"]) for d in decisions if d["decision"] == "denied"} == {
        ("unlisted.test:443", "not_listed"), (f"rebind.test:{test_host.port}", "address_loopback")
    }  # fmt: skip
