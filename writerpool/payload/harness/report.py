"""The harness's run: every check, then one JSON report on stdout."""

from __future__ import annotations

import json
import os
import sys

from .agents import agent_checks
from .allowlist import ALLOW_CHECKS
from .canary import check_provider_credential
from .host import HOST_CHECKS
from .network import NETWORK_CHECKS
from .probe import run_all

SCHEMA_VERSION = 1
CHECKS = {**HOST_CHECKS, "provider_credential": check_provider_credential}


def main() -> int:
    checks = run_all({**CHECKS, **agent_checks()})
    allowlist = bool(os.environ.get("WRITERPOOL_HARNESS_ALLOW_PORT"))
    network = run_all({**NETWORK_CHECKS, **(ALLOW_CHECKS if allowlist else {})})
    verdict = "pass" if all(c["status"] == "pass" for c in checks.values()) else "fail"
    limited = all(c["status"] == "pass" for c in network.values())
    kind = "limited-allowlist" if allowlist else "limited"
    report = {
        "schemaVersion": SCHEMA_VERSION,
        "verdict": verdict,
        "network": kind if limited else "not_limited",
        "checks": checks,
        "networkChecks": network,
    }
    json.dump(report, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0
