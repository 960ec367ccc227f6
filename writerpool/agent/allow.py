"""A session's allowlist proxy: a listener of its egress process beside the provider
proxy when the workspace has an allowlist (`mode set --allow`), with the CA bundle the
writer's tools verify with."""

from __future__ import annotations

import os
import re
from pathlib import Path

from writerpool.agent.environment import CONNECT_SOCKET, EGRESS_CA
from writerpool.atomic import write_atomic
from writerpool.config.models import Config
from writerpool.egress.derived import resolve_allowlist
from writerpool.egress.spec import ConnectListenerSpec

SYSTEM_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
MAX_BUNDLE_BYTES = 4 * 1024 * 1024
_CERTIFICATE = re.compile(
    rb"-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]{1,65536}?-----END CERTIFICATE-----"
)


def bundle_source(config: Config) -> Path | None:
    """The host's CA bundle: the configured one, the server's SSL_CERT_FILE, or the
    system's."""
    if config.egress.ca_bundle is not None:
        return config.egress.ca_bundle
    named = os.environ.get("SSL_CERT_FILE")
    if named and Path(named).is_file():
        return Path(named)
    return SYSTEM_BUNDLE if SYSTEM_BUNDLE.is_file() else None


def public_certificates(source: Path | None) -> bytes:
    """Only the certificate blocks of a bundle (a key that sits beside them never leaves
    the host); empty when there is none."""
    if source is None:
        return b""
    try:
        with source.open("rb") as handle:
            raw = handle.read(MAX_BUNDLE_BYTES)
    except OSError:
        return b""
    return b"\n".join(m.group(0) for m in _CERTIFICATE.finditer(raw)) + b"\n"


def allowlist_spec(
    config: Config, words: tuple[str, ...], egress_dir: Path, grants: Path | None = None
) -> ConnectListenerSpec:
    """The session's allowlist proxy, for its egress process (sets expanded now), with
    the host's public certificates put at egress_dir/ca.pem for the writer's tools;
    `grants`: where `writerpool egress allow` adds session-scoped entries."""
    entries, _ = resolve_allowlist(config, words)
    write_atomic(egress_dir / EGRESS_CA, public_certificates(bundle_source(config)), mode=0o600)
    egress = config.egress
    return ConnectListenerSpec(
        socket=CONNECT_SOCKET, entries=tuple(e.text for e in entries), resolve=egress.resolve,
        concurrent=egress.connect_concurrent, total=egress.connect_total,
        header_bytes=egress.header_bytes, header_seconds=egress.header_seconds,
        idle_seconds=egress.idle_seconds, grants=None if grants is None else str(grants),
    )  # fmt: skip
