"""A session's allowlist proxy: opened beside its provider proxy when the workspace has
an allowlist (`mode set --allow`), with the CA bundle the writer's tools verify with."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from writerpool.config.models import Config
from writerpool.egress.allowlist import Allowlist
from writerpool.pool.container import CONNECT_SOCKET, EGRESS_CA
from writerpool.state.atomic import write_atomic

if TYPE_CHECKING:
    from writerpool.egress.connect import ConnectSession, LoopRunner
    from writerpool.egress.connect_model import ConnectRecord

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


def open_allowlist(
    runner: LoopRunner,
    config: Config,
    words: tuple[str, ...],
    *,
    session: str,
    writer: str | None,
    egress_dir: Path,
    audit: Callable[[ConnectRecord], None] | None,
) -> ConnectSession:
    """Start the session's allowlist proxy at egress_dir/connect.sock (sets expanded now)
    and put the host's public certificates at egress_dir/ca.pem."""
    from writerpool.egress.connect import ConnectLimits, ConnectSession  # noqa: PLC0415
    from writerpool.egress.derived import resolve_allowlist  # noqa: PLC0415

    entries, _ = resolve_allowlist(config, words)
    write_atomic(egress_dir / EGRESS_CA, public_certificates(bundle_source(config)), mode=0o600)
    proxy = ConnectSession(
        runner, session=session, writer=writer, socket_path=egress_dir / CONNECT_SOCKET,
        allowlist=Allowlist(entries), resolve=config.egress.resolve,
        limits=ConnectLimits.of(config.egress), audit=audit,
    )  # fmt: skip
    proxy.start()
    return proxy
