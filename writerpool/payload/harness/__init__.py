"""The acceptance harness: probes its own environment and prints a JSON report.

One program serves both sides: the isolation control runs it uncontained on the host
(where it must see escapes), acceptance runs it inside a writer's container (where it
must not). It uses only the standard library and imports nothing from writerpool, so it
runs on any Python 3 inside the image; the image carries it as one zip archive
(runtime/image_tools.py), which the control also streams to a host. Inputs come from
environment variables:
WRITERPOOL_HARNESS_CANARIES (os.pathsep-separated host files that must be unreadable),
WRITERPOOL_HARNESS_HOST_HOME (the operator's home), WRITERPOOL_HARNESS_WORK (the clone),
WRITERPOOL_HARNESS_ALLOWED_KEYS (credential variables deliberately given),
WRITERPOOL_HARNESS_CANARY ("scan": a canary credential was sent through the real path
and must be found nowhere; "skip": an open network kind, where the key is copied in),
WRITERPOOL_HARNESS_HOST_PORT (a port listening on the host's loopback),
WRITERPOOL_HARNESS_AGENTS and WRITERPOOL_HARNESS_AGENT_DIR (each agent of the
workspace's profiles and its rendered directory: `agents.py`), and the
proxy socket WRITERPOOL_EGRESS_SOCKET of a `provider` network. A writer with an
allowlist also has WRITERPOOL_CONNECT_SOCKET (its allowlist proxy) and
WRITERPOOL_HARNESS_ALLOW_PORT: the allowlist probes (`allowlist.py`) ask that proxy for
`*.acceptance.test` names, an address and TLS and plain HTTP requests that it must refuse,
each with its own reason.

The network checks decide the classification and are reported apart from the verdict:
an open network kind is accepted as `not_limited`, never as `limited`. Active probes
(name resolution, a direct connection) run only where no route exists, so no packet
can leave: on a host with a route the passive checks already say `not_limited`.

Modules: `host` (containment of files, processes and privileges), `canary` (the
provider credential found nowhere), `agents` (each agent's rendered directory and
command: no key, the proxy its way out), `network` (routes, resolution, the provider proxy),
`allowlist` and `tls` (the allowlist proxy's probes), `report` (the run and its JSON).
"""
