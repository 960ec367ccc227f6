"""pi's Node.js compile cache, made once on the host when the writer image is built.

Each start of pi compiles its ~1,400 modules again; with V8's code cache for them
(Node's `NODE_COMPILE_CACHE`) a start reads them compiled instead (about 0.1 s of a
0.7 s start on this project's hosts). The cache is made here by starting the pinned pi
on the host until its first RPC answer, in "portable" mode: entries are keyed by the
module's path relative to the cache directory, so `<prefix>/compile-cache` made beside
`<prefix>/node_modules` is valid at /opt/pi/compile-cache beside /opt/pi/node_modules.
The image copies it read-only (images/Containerfile) and images/pi-launcher points
pi's Node.js at it: nothing in a writer can change it, and an entry whose source or
Node.js build differs is ignored by Node (it compiles as before).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from writerpool.agent.compact import node_options
from writerpool.agent.install import bundled_node, pi_cli
from writerpool.agent.launch import pi_args, render_agent_dir
from writerpool.config.models import Profile, Provider
from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed, run

COMPILE_CACHE = "compile-cache"
START_TIMEOUT = 120.0
GET_STATE = b'{"id":"1","type":"get_state"}\n'
_PROVIDER = "writerpool-cache"
# Never contacted: pi answers get_state offline; the port is the discard service.
_ENDPOINT = Provider(base_url="http://127.0.0.1:9/v1")


def make_compile_cache(prefix: Path) -> Path:
    """(Re)make `<prefix>/compile-cache` from one start of the pi installed in prefix."""
    node = bundled_node(prefix)
    if node is None or not node.is_file():
        raise WriterpoolError("image_build_failed", "no official Node.js build beside pi")
    cache = prefix / COMPILE_CACHE
    shutil.rmtree(cache, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="writerpool-compile-cache-") as tmp:
        home = Path(tmp)
        agent = home / "agent"
        render_agent_dir(agent, _PROVIDER, _ENDPOINT, True)
        profile = Profile(permission="coding", provider=_PROVIDER, model="m", thinking="off")
        env = {
            "PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home),
            "LANG": "C.UTF-8", "PI_OFFLINE": "1", "PI_TELEMETRY": "0",
            "PI_CODING_AGENT_DIR": str(agent), "NODE_OPTIONS": node_options(agent),
            "NODE_COMPILE_CACHE": str(cache), "NODE_COMPILE_CACHE_PORTABLE": "1",
        }  # fmt: skip
        # pi answers, reads the end of its input and exits; Node writes the cache then.
        try:
            args = pi_args(profile, False, agent, session_dir=home / "pi-sessions")
            argv = [str(node), str(pi_cli(prefix)), *args]
            run(argv, cwd=home, env=env, input=GET_STATE, timeout=START_TIMEOUT)
        except CommandFailed as exc:
            raise WriterpoolError(
                "image_build_failed", f"pi did not start to make its compile cache: {exc.message}"
            ) from exc
    if not any(path.is_file() for path in cache.rglob("*")):
        raise WriterpoolError("image_build_failed", "pi's start left no compile cache")
    return cache
