"""Doctor's checks of Podman's API service and of the npm registry (no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from writerpool.agent.install import install_pi, pi_installed, reach_problem, registry_problem
from writerpool.config.paths import Paths
from writerpool.doctor.model import CheckContext
from writerpool.doctor.services import npm_registry, podman_api
from writerpool.errors import WriterpoolError
from writerpool.proc import CA_VARIABLES
from writerpool.report import sanitize
from writerpool.runtime.info import HostFacts, probe_api
from writerpool.runtime.local import LocalPodman


def _ctx(facts: HostFacts) -> CheckContext:
    return CheckContext(Paths.from_env(), facts)


def test_an_unusable_api_service_is_a_blocking_error_with_a_remedy(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.mkdir(mode=0o500)
    # The socket cannot be created there, so the service can neither answer nor start.
    problem = probe_api(LocalPodman(binary="true", socket_path=blocked / "run" / "podman.sock"))
    assert problem is not None and "API service" in problem
    facts = HostFacts(uid=1000, user="u", api_probed=True, api_error=problem)
    [result] = podman_api(_ctx(facts))
    assert (result.id, result.severity, result.blocking) == ("podman_api", "error", True)
    assert "podman system service" in result.remedy
    assert podman_api(_ctx(HostFacts(uid=1000, user="u"))) == []


def test_an_unreachable_registry_names_npm_and_the_ca_variables(tmp_path: Path) -> None:
    # npm reads ~/.npmrc; HOME is the test's own. Port 9 on loopback refuses at once.
    home = Path.home()
    (home / ".npmrc").write_text("registry=http://127.0.0.1:9/\nfetch-retries=0\n")
    problem = registry_problem(timeout=60)
    assert problem is not None and "/home" not in problem and "/tmp" not in problem
    result = npm_registry(problem, ("NODE_EXTRA_CA_CERTS",))
    assert result.severity == "error" and "NODE_EXTRA_CA_CERTS" in result.message
    # The remedy survives path redaction (it once read `<path><path>`).
    assert "<path>" not in sanitize(result.remedy) and "npm config get registry" in result.remedy
    assert problem.startswith("code ECONNREFUSED"), problem


def test_image_builds_check_names_the_cause_the_ca_variables_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (Path.home() / ".npmrc").write_text("registry=http://127.0.0.1:9/\nfetch-retries=0\n")
    for name in CA_VARIABLES:  # whatever the caller's environment set
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(tmp_path / "proxy-ca.pem"))
    assert not pi_installed(tmp_path / "prefix"), "an empty prefix needs npm"
    problem = reach_problem(timeout=60)
    assert problem is not None and problem.startswith("npm cannot reach its registry: code ")
    assert "(CA variables set: NODE_EXTRA_CA_CERTS)" in problem
    assert "export NODE_EXTRA_CA_CERTS" in problem and "npm config get registry" in problem
    assert "/tmp" not in problem


def test_a_failing_npm_install_shows_npms_own_error(tmp_path: Path) -> None:
    (Path.home() / ".npmrc").write_text("registry=http://127.0.0.1:9/\nfetch-retries=0\n")
    with pytest.raises(WriterpoolError) as caught:
        install_pi(tmp_path / "prefix")
    message = caught.value.message
    assert message.startswith("installing pi with npm failed: code ECONNREFUSED")
    assert "ECONNREFUSED" in message and "/tmp" not in message and "doctor --registry" in message
