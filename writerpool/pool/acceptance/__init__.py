"""Acceptance: the harness run in a writer's exact container, the isolation control it is
judged against, the harness's typed report, each agent of a writer's profiles rendered
behind the proxy for the harness to check (`agents`), and the peers of its allowlist
probes (the probe target, the control's open relay)."""
