"""Acceptance of a writer on a host over SSH: the harness in the container a session there
gets (pool/remote_container.py), checked against that host's own canary, home and
loopback (pool/probes.py). The canary credential goes through the same path as a
session's key: the proxy on this machine, its socket forwarded to the host for this run."""

from __future__ import annotations

import contextlib
import secrets
import tempfile
from collections.abc import Callable
from pathlib import Path

from writerpool.config.models import Pool
from writerpool.config.network import check_remote_network, network_info
from writerpool.config.paths import Paths
from writerpool.pool.container import EGRESS_SOCKET, writer_spec
from writerpool.pool.probes import loopback_port, planted_canary
from writerpool.pool.remote_container import push_agent_dir, remote_spec
from writerpool.proc import Completed
from writerpool.runtime.image_tools import HARNESS
from writerpool.runtime.remote import RemotePodman
from writerpool.state.writer import WriterState

# (agent_dir, egress_dir, allow_port) -> the held grant: acceptance.py's canary path.
PlantCanary = Callable[[Path, Path, int | None], contextlib.AbstractContextManager[None]]


def run_remote_harness(
    remote: RemotePodman,
    paths: Paths,
    state: WriterState,
    image_id: str,
    pool: Pool,
    allowlist: bool,
    granted: PlantCanary,
) -> Completed:
    """The harness's run on the writer's host; every probe and forward ends with it."""
    check_remote_network(remote.name, state.network, ("allowlist",) if allowlist else None)
    spec = writer_spec(paths, state, image_id, pool, remote.facts())
    token = secrets.token_hex(6)
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="wp-accept-")))
        agent_dir, egress_dir = scratch / "agent", scratch / "egress"
        canary = stack.enter_context(planted_canary(remote.host))
        port = stack.enter_context(loopback_port(remote.host))
        stack.enter_context(granted(agent_dir, egress_dir, None))
        push_agent_dir(remote, state.name, agent_dir)
        forwarded = None
        if network_info(state.network).egress:
            forwarded = stack.enter_context(
                remote.session_socket(egress_dir / EGRESS_SOCKET, f"acceptance-{token}")
            )
        spec = remote_spec(remote, spec, state.name, forwarded)
        env = {
            **spec.env,
            "WRITERPOOL_HARNESS_CANARIES": canary.file,
            "WRITERPOOL_HARNESS_HOST_HOME": canary.home,
            "WRITERPOOL_HARNESS_WORK": "/work",
            "WRITERPOOL_HARNESS_CANARY": "scan",
            "WRITERPOOL_HARNESS_HOST_PORT": str(port),
        }
        spec = spec.model_copy(update={"env": env})
        return remote.run(spec, ["python3", HARNESS], timeout=120)
