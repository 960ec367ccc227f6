"""`writerpool doctor` end to end: probe the host, run every check."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from writerpool.agent.install import ca_variables_set
from writerpool.config.models import load_config
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.doctor.host import probe_node
from writerpool.doctor.image import read_pin
from writerpool.doctor.model import Check, CheckResult
from writerpool.doctor.registry import run_checks
from writerpool.doctor.remote import remote_hosts
from writerpool.doctor.services import npm_registry
from writerpool.errors import WriterpoolError
from writerpool.runtime.host_facts import gather_host_facts


def images_to_probe(paths: Paths) -> tuple[str | None, list[str]]:
    """The pinned image (also used for the trial container) and every image id a
    container workspace names; unreadable files are reported by their own checks."""
    pin, _ = read_pin(paths)
    pinned = pin.image_id if pin is not None else None
    ids = [pinned] if pinned is not None else []
    try:
        load_config(paths)
        modes = load_modes(paths)
    except WriterpoolError:
        return pinned, ids
    for entry in modes.workspaces.values():
        if entry.container is not None and entry.container.image != "default":
            ids.append(entry.container.image)
    return pinned, ids


def diagnose(
    paths: Paths,
    registry_probe: Callable[[], str | None] | None = None,
    extra: Sequence[Check] = (),
    *,
    hosts: bool = False,
    reuse: bool = False,
) -> list[CheckResult]:
    """Every built-in check, then `extra` (checks doctor does not own, such as the pool's);
    with `registry_probe` (it uses the network), also whether npm reaches its registry:
    the probe returns why not, or None. With `hosts`, every configured [hosts.NAME] is
    probed over SSH too (the doctor command; provisioning on this machine does not touch
    other hosts). With `reuse` (a writer operation's gate), a recent passing probe of
    Podman stands for a new one (runtime/probe_record.py); doctor itself probes afresh."""
    pinned, image_ids = images_to_probe(paths)
    facts = gather_host_facts(image_ids=image_ids, trial_image=pinned, reuse=reuse)
    facts = replace(facts, node=probe_node(paths.pi_prefix))
    if hosts:
        extra = (*extra, remote_hosts)
    results = run_checks(paths, facts, extra)
    if registry_probe is not None:
        results.append(npm_registry(registry_probe(), ca_variables_set()))
    return results
