"""One base error with a stable code, and the registry of every finding code."""

from __future__ import annotations

import errno

# Every code writerpool can report, with its one-line meaning. docs/codes.md is
# checked against this table by a test, so the two never drift apart.
CODES: dict[str, str] = {
    # configuration and usage
    "config_invalid": "The configuration cannot be loaded or validated",
    "config_missing": "No configuration file exists yet (run `writerpool config init`)",
    "config_exists": "A configuration file already exists; nothing was written",
    "config_written": "A starter configuration file was written",
    "config_valid": "The configuration is valid",
    "modes_file_invalid": "execution-modes.json is unreadable or invalid; nothing was replaced",
    "alias_unknown": "The alias is invalid or not configured",
    "usage_invalid": "Invalid name or combination of arguments",
    "internal_error": "An unexpected error inside writerpool (a bug)",
    "aborted": "The operator interrupted the command (Ctrl-C)",
    "platform_unsupported": "Writer operations need Linux",
    "command_failed": "A git, podman or helper command failed; its last stderr line is shown",
    "command_timeout": "A git, podman or helper command did not finish within its time limit",
    "disk_full": "No space is left on the device (ENOSPC); free space and retry",
    # modes
    "mode_planned": "A mode change was planned only",
    "mode_applied": "The mode entry was written",
    "mode_stored": "The stored mode of a workspace, with the command that sets it",
    "mode_default": "No mode is stored for the workspace; the default applies",
    "mode_setting_changed": "A setting of the workspace's mode changes (old → new)",
    "writer_settings_adopted": "A kept writer took the new lifecycle and profiles",
    "writer_base_move_planned": "A writer at its baseline would move to the new base",
    "writer_base_kept": "A writer not at its baseline stays on its old base (with the fix)",
    "mode_unchanged": "The stored mode already matches; reconciliation still ran",
    "mode_choice_required": "Rootless Podman is unusable; choose host or read-only explicitly",
    "host_ack_required": "A host mode request lacks --accept-host-writes",
    "container_profiles_required": "Container mode needs a non-empty list of coding profiles",
    "container_runtime_unavailable": "Rootless Podman is unavailable or unusable",
    "controllers_restart_required": "Restart or reconnect running servers to load the new policy",
    "workspace_base_ambiguous": "Writers sit on different bases; give --base explicitly",
    # writers: planning and provisioning
    "doctor_failed": "A blocking doctor check failed",
    "writer_planned": "The writer would be provisioned or kept",
    "writer_remove_planned": "The writer would be removed (a plan until --apply)",
    "writer_replace_planned": "A writer that holds nothing would be replaced on new settings",
    "writer_replaced": "A writer that held nothing was removed to be provisioned anew",
    "writer_collect_planned": "Collection was planned only",
    "writer_reset_planned": "Reset was planned only",
    "writer_recreate_planned": "Recreation was planned only",
    "writer_finish_planned": "Finish was planned only",
    "writer_provisioned": "Clone and agent directory prepared; not yet accepted",
    "writer_unchanged": "The writer's provisioned settings already match",
    "writer_settings_changed": "The writer's settings differ from the requested; nothing replaced",
    "writer_reconcile_failed": "Reconciling a writer failed unexpectedly",
    "writer_operation_failed": "A writer operation failed unexpectedly",
    "container_profile_unsupported": "The profile cannot be rendered safely inside a writer",
    "base_ref_invalid": "The base is not a safe named branch",
    "writer_base_unavailable": "The base branch could not be resolved, read or exported",
    "remote_url_refused": "The origin URL carries userinfo and was not copied",
    "image_unavailable": "The writer image is missing or does not match its pin",
    "writer_clone_failed": "Making the writer's clone failed",
    "clone_verification_failed": "The clone holds a hook or a redirecting or executing setting",
    "clone_unreadable": "The clone's refs cannot be read safely from the host",
    "clone_over_cap": "The clone holds more refs, or longer ref names, than writerpool reads",
    "writer_state_invalid": "The writer's state is missing, malformed or mismatched",
    "writer_state_unreadable": "The writer's state cannot be read safely",
    "writer_name_taken": "Another writerpool state of this Podman account made it; left untouched",
    "state_id_invalid": "The state directory's controller-id file is unreadable or malformed",
    # collection and lifecycle
    "writer_inspect_failed": "Inspecting the writer's work in a throwaway container failed",
    "writer_uncollected": "The writer holds work without a matching complete collection",
    "writer_collect_failed": "Making, verifying or importing the bundle failed",
    "collect_bundle_too_large": "The bundle of new work exceeds [pool] collect_max_bundle_bytes",
    "writer_collect_incomplete": "A ref or some work was not exported; no cleanup authorized",
    "writer_work_unexportable": "Work collection cannot export (named with path and size)",
    "writer_leftovers_present": "Ignored/special files or empty dirs: not work, not baseline",
    "writer_not_at_baseline": "The clone, by content, is not exactly its baseline (with why)",
    "writer_state_missing": "A clone without usable state.json; nothing overwritten",
    "ref_name_refused": "An unsafe ref name or a WIP name collision was refused",
    "nothing_to_collect": "No changed branch or uncommitted work to collect",
    "review_refs_replaced": "A collection moved earlier review refs it overwrites aside (named)",
    "review_refs_kept": "Earlier review refs of other branches stay beside the new ones (named)",
    "review_ref_locks_removed": (
        "A collection removed lock files a killed collection left on the writer's review refs"
    ),
    "review_refs_listed": "A writer's review refs in the checkout, with merged and moved ones",
    "review_refs_pruned": "Moved-aside and merged review refs were deleted (or would be)",
    "writer_collected": "A complete collection was imported and recorded",
    "writer_stash_present": "The clone holds a stash, which is not collected",
    "writer_reset_failed": "Reset or its verification failed",
    "writer_reset": "The clone was reset to its base and verified",
    "writer_leftovers_removed": "A lease removed leftovers (ignored files, caches) of a writer",
    "writer_base_followed": "A lease brought a writer to its base branch's current commit",
    "writer_refresh_failed": "Removing leftovers or following the base at lease did not verify",
    "writer_recreate_failed": "The recreated clone is not at its baseline",
    "writer_recreated": "Clone and agent directory were rebuilt and verified",
    "writer_remove_failed": "Removal stopped part way; the state is kept so it can finish",
    "writer_removed": "The writer's state and everything it owned were deleted",
    "writer_busy": "Another process holds the writer's lease",
    "writer_fenced": "It could not be confirmed that no container of the writer exists",
    "writer_lease_unavailable": "The lease file or directory cannot be opened safely",
    "writer_unknown": "No writer of that name exists",
    "writer_not_ready": "The writer is not ready for sessions",
    "writer_status": "A writer's phase, readiness and reason",
    "writer_leasable": "A session would get this writer now",
    "writer_warm": "The pool service keeps the writer started and idle for a session's claim",
    "writer_warm_claimed": "A session claimed a warm writer, its verdict and fingerprint proven",
    "warm_lease_lost": "A warm writer's lease is no longer the pool's; it is recycled",
    "warm_verdict_stale": "A warm writer's clone verdict is no longer the one it was warmed on",
    "warm_image_changed": "The image pin no longer names a warm writer's image; it is recycled",
    "warm_yield_asked": "An operator command asked for a warm writer; the pool yielded it",
    "warm_pi_ended": "A warm writer's pi ended; the writer is recycled",
    "warm_too_old": "A warm writer was held longer than [pool] warm_max_age_seconds; recycled",
    "warm_base_moved": "The workspace's base moved since a warm writer was warmed; recycled",
    "writer_holds_work": "The writer holds work no complete collection covers; no session gets it",
    "writer_collected_unfinished": "The work was collected but finish or reset has not run",
    "writer_log": "The agent's commits on a writer's branch, relative to the base",
    "writer_diff": "The agent's changes in a writer, relative to the base",
    "writer_verified": "The writer's state, clone and readiness check out",
    "writer_acceptance_stale": "The writer was accepted under settings that are no longer current",
    # isolation control and acceptance
    "isolation_control_planned": "The control was planned only; no canaries written",
    "isolation_control_required": "A passing isolation control is required before acceptance",
    "isolation_control_passed": "The uncontained control detected the expected escapes",
    "isolation_control_failed": "The control failed; any earlier passing record was dropped",
    "podman_unavailable": "Podman could not be used",
    "podman_api_unavailable": "Podman's API service cannot be started or does not answer",
    "acceptance_harness_failed": "The contained harness failed or wrote no valid passing report",
    "acceptance_fingerprint_changed": "The acceptance fingerprint changed during the run",
    "writer_acceptance_failed": "Acceptance failed unexpectedly",
    "writer_accepted": "Contained acceptance passed and readiness was recorded",
    # verification, registration, MCP
    "mcp_verified": "The bounded MCP handshake passed",
    "mcp_failed": "The MCP handshake failed",
    "mcp_unsupported": "The MCP server's answers do not match the expected contract",
    "mcp_timeout": "The MCP handshake exceeded its deadline",
    "registration_divergent": "A registration differs from what writerpool would write; left alone",
    "registration_planned": "A client registration change was planned only",
    "registration_exposure": "What a registration's transport exposes to other local accounts",
    "prompt_approval": "Codex: whether pi_session_prompt runs unasked (--approve-prompts), "
    "and what that permits",
    "registration_applied": "The client registration was added",
    "registration_unchanged": "The client registration already matches",
    "registration_removed": "The registration writerpool added was removed",
    "registration_absent": "No registration exists",
    "ownership_unavailable": "The registration lacks ownership proof; removal refused",
    "client_unavailable": "The client's command line tool is not installed",
    "client_failed": "The client's command line tool failed or answered in an unknown form",
    "hook_install_failed": "Installing a writer hook failed",
    # the pool service
    "service_running": "The service runs; its URL is shown",
    "service_stopped": "The service is not running",
    "service_start_failed": "The service could not be started",
    "service_port_taken": "Another program holds the service's port; it does not move to another",
    "service_stop_failed": "The service did not end within its bound",
    "service_token_created": "A client's token was created and shown once",
    "service_token_revoked": "A client's token was revoked",
    "service_client_unknown": "No client of that name has a token",
    "service_settings": "The service refused an invalid settings change; it keeps the last valid",
    "service_tokens_invalid": "The service token file is corrupt; every request is refused",
    # sessions (MCP tools)
    "workspace_unknown": "The workspace is not configured",
    "profile_unknown": "The execution profile is not configured",
    "session_unknown": "No such session",
    "session_closed": "The session is closed",
    "session_busy": "The session already runs a turn",
    "calls_busy": "The client has as many calls running at once as the service allows; "
    "one must end first",
    "turn_unknown": "No such turn",
    "session_start_failed": "The agent could not be started",
    "request_cancelled": "The client cancelled the call or went away; a session it "
    "started was closed (audit outcome)",
    "coding_refused": "The workspace mode refuses coding sessions",
    "agent_host_refused": "Host mode runs pi only; the profile's agent runs only in a writer",
    "agent_unsupported": "The profile's agent is not available in this writerpool",
    "agent_provider_unsupported": "The profile's agent cannot speak its provider's API "
    "(Codex: the OpenAI Responses API only)",
    "agent_turn_exited": "The agent's process for one turn ended before the turn did (Codex: "
    "killed or failed); that turn failed, the session takes another prompt",
    "warm_agent_unsupported": "mode set --warm: none of the profiles' agents can be warmed",
    "base_not_applicable": "base applies only to coding sessions in container workspaces",
    "writer_unavailable": "No free ready writer on the requested base",
    "provider_unconfigured": "The profile's provider has no credential or endpoint",
    "session_failed": "The session's agent exited; close the session and start another",
    "session_egress_lost": "The session's provider proxy is gone; close it and start another",
    "input_invalid": "The tool arguments do not match the tool's input schema",
    "tool_unknown": "No tool of that name",
    "answer_too_large": "A tool answer would exceed the documented 256 KiB cap (a bug)",
    "answer_unencodable": "A tool answer could not be encoded as JSON (a bug); that call "
    "failed, the server goes on",
    # doctor checks
    "isolation_control": "Doctor: whether a passing isolation control is recorded",
    "writer_readiness": "Doctor: a writer's phase and readiness",
    "podman_usable": "Podman is installed, its version known, and `podman info` works",
    "podman_api": "Podman's API service answers and lists containers (fences use it)",
    "npm_registry": "npm reaches its registry with the host's CA variables (doctor --registry)",
    "rootless_user": "writerpool runs as an ordinary user, as rootless containers need",
    "subid_ranges": "The user has subordinate uid and gid ranges Podman uses",
    "idmap_helpers": "newuidmap and newgidmap exist, setuid root or with file capabilities",
    "oci_runtime": "The configured OCI runtime can run containers on this host",
    "storage_driver": "Podman's storage driver shares image layers (vfs copies every image)",
    "network_helper": "Which user-mode network helper (pasta or slirp4netns) writers get",
    "tun_device": "The TUN device a user-mode network needs is usable by the user",
    "cgroup_limits": "Whether memory, CPU and pids limits apply (cgroup v2 with delegation)",
    "writer_image": "The writer image is pinned and present in Podman's storage",
    "pi_node": "The Node.js that runs pi (and npm, which installs it) is present and pinned",
    "config_file": "The configuration file loads and validates",
    "execution_modes": "execution-modes.json loads",
    "workspace_checkout": "The workspace path is a readable git checkout",
    "workspace_mode": "The workspace's execution mode is set and usable on this host",
    "session_placement": "Where a workspace's sessions run (read-only ones: always contained)",
    "profile_provider": "The profile's provider is built into pi or declared under [providers]",
    "lease_dir": "The writers directory is the user's, 0700, and exclusive file locks work",
    "server_descriptors": "The server can raise its descriptor limit to what a full pool needs",
    # provider egress (the per-session proxy; its audit lines' outcomes)
    "egress_failed": "The session's provider proxy could not be opened",
    "egress_ok": "A request went through the provider proxy",
    "egress_token_missing": "A proxy request carried no session token (401)",
    "egress_token_wrong": "A proxy request carried a wrong session token (403)",
    "egress_route_refused": "A proxy request's method and path are not the provider API's (403)",
    "egress_cap_requests": "The session's request cap of the provider proxy was reached (429)",
    "egress_cap_concurrent": "The session's concurrent-request cap was reached (429)",
    "egress_cap_bytes_up": "The session's upload byte cap was reached (429)",
    "egress_cap_bytes_down": "The session's download byte cap was reached (429, or the stream cut)",
    "egress_upstream_failed": "The provider could not be reached or its TLS did not verify (502)",
    "egress_cancelled": "A proxy request ended early: client gone or session stopped",
    "egress_request_failed": "A proxy request failed inside the proxy (500); its log says why",
    # the egress allowlist (`mode set --allow`, the per-session CONNECT proxy)
    "allow_entry_invalid": (
        "An allowlist entry is not a host, *.domain, host:port, http:// or a range"
    ),
    "allow_set_unknown": "An allowlist word names no configured or derived set",
    "allow_set_empty": "An allowlist set names no host (with why and what to do)",
    "allow_too_many": "The allowlist has more entries than the proxy accepts (64)",
    "allow_set_derived": "A derived set names these hosts now, and says where they came from",
    "allow_network_unsupported": "An allowlist needs the provider network",
    "egress_check_allowed": "The destination is allowed, by the named allowlist entry",
    "egress_check_denied": "The destination is not allowed (with the reason and the entry to add)",
    "egress_check_unresolved": "The destination is listed but its name does not resolve here",
    "egress_log_shown": "Recent decisions of a writer's allowlist proxy",
    "egress_set_shown": "A set an allowlist may name: its hosts now and where they came from",
    "egress_log_empty": "The writer's allowlist proxy has decided nothing yet",
    "egress_allow_added": (
        "A session-scoped entry was added to the writer's live allowlist proxy (who, until when)"
    ),
    "egress_allow_no_session": (
        "The writer has no session with an allowlist proxy now; nothing was added"
    ),
    "egress_allow_target_invalid": "egress allow takes one HOST[:PORT] or http://HOST[:PORT]",
    "egress_allow_duration_invalid": "egress allow --for takes 90s, 30m or 2h (1m to 24h)",
    "egress_grants_invalid": "The writer's session-scoped entries file is unreadable or invalid",
    # image
    "uninstall_planned": "uninstall would remove this (plan only)",
    "uninstall_removed": "uninstall removed this",
    "uninstall_refused": "uninstall removed nothing: a writer holds uncollected work",
    "uninstall_kept": "What uninstall leaves: the configuration file and collected refs",
    "image_prune_planned": "An unused writer image would be removed",
    "image_removed": "An unused writer image was removed",
    "image_remove_refused": "Podman refused to remove an image (a container uses it)",
    "image_prune_nothing": "No unused writer image exists",
    "image_built": "The writer image was built and pinned",
    "image_reused": "The writer image was already built from the same inputs",
    "image_build_failed": "Building the writer image failed",
    "agent_pin_mismatch": "image build refused an agent package whose version or integrity "
    "differs from writerpool's pin; nothing was built",
    "npm_registry_unreachable": "image build stopped before its slow steps: npm cannot reach "
    "its registry (the fix is named)",
    "image_definition_missing": "The image definition is neither in the package nor a checkout",
    "image_pinned": "The pinned writer image exists locally",
    "image_outdated": "The pinned image was built from other inputs than the current definition",
    "image_derived": "An image was derived from the pinned writer image and recorded",
    "image_derive_failed": "Deriving an image failed (pip download or the offline build)",
    "image_derive_reused": (
        "The newest image derived under that name holds the same wheels on the same base; kept"
    ),
    "image_requirement_refused": (
        "A requirements line is not a name with versions, markers and --hash; refused before "
        "pip ran (each such line named)"
    ),
    "image_derive_build_refused": (
        "pip was about to start a program (a package's build: not a wheel) on the host; "
        "refused before it started"
    ),
    "image_name_unknown": "No image was derived under that name",
    "image_record_invalid": "The record of images writerpool built is unreadable or invalid",
    "image_record_missing": "This install has no record of images it built; none is removed",
    "cache_tool_missing": "The image lacks the tool a --cache option is for (uv, go)",
    # hosts (`[hosts.NAME]`: a Podman host reached over SSH)
    "host_unknown": "The host name is neither `local` nor a configured [hosts.NAME]",
    "host_config_invalid": (
        "A host's identity or known_hosts file is missing, unreadable or open to another "
        "account, its key is refused, or a directory its url implies is not its user's own"
    ),
    "host_key_mismatch": "The host presented another key than the pinned one; refused",
    "host_podman_unavailable": (
        "No Podman API service answers at the socket path of the host's url, or its "
        "answers are malformed; nothing changed"
    ),
    "host_key_unpinned": "The host's known_hosts file pins no key for its address; refused",
    "writer_host_unsupported": (
        "a writer on an SSH host needs the provider or none network without an allowlist; "
        "nothing changed"
    ),
    "writer_host_unreachable": "The writer's host does not answer over SSH; nothing changed",
    "remote_session_unsupported": (
        "A session on a writer on an SSH host needs the provider or none network, "
        "without an allowlist (the key stays on the controller)"
    ),
    "image_transferred": "The writer image was copied to a host and verified by its ID",
    "image_present": "The host already has the writer image, by the same ID",
    "image_transfer_failed": "Copying the writer image to a host failed or its ID differs",
    "remote_reachable": "Doctor: the host answers over SSH with its pinned key",
    "remote_podman": "Doctor: the host runs rootless Podman, and its version",
    "remote_api": "Doctor: the host's Podman API service answers through the connection",
    "remote_cgroups": "Doctor: whether resource limits apply on the host (cgroups)",
    "remote_image": "Doctor: the pinned writer image is on the host, by the same ID",
    "remote_disk": "Doctor: free disk space in the host's container storage",
    "remote_tools": "Doctor: podman and python3 are on the SSH user's PATH on the host",
}


class WriterpoolError(Exception):
    """An expected failure with a stable code; its message holds no paths or secrets."""

    exit_code = 1

    def __init__(self, code: str, message: str) -> None:
        if code not in CODES:
            raise ValueError(f"unregistered code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message


class UsageError(WriterpoolError):
    exit_code = 2

    def __init__(self, message: str, code: str = "usage_invalid") -> None:
        super().__init__(code, message)


_NO_SPACE = "No space left on device"


def is_disk_full(cause: BaseException | None = None, text: str = "") -> bool:
    """Whether a failure came from a full disk: ENOSPC anywhere in the cause chain, or
    the message git, podman and Python print for it in a command's output."""
    if _NO_SPACE in text:
        return True
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.errno == errno.ENOSPC:
            return True
        stderr = getattr(cause, "stderr", b"")
        if isinstance(stderr, bytes) and _NO_SPACE.encode() in stderr:
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def failure(
    code: str, message: str, cause: BaseException | None = None, text: str = ""
) -> WriterpoolError:
    """The error for a failed step: `disk_full` when a full disk caused it, else `code`."""
    if is_disk_full(cause, text):
        return WriterpoolError("disk_full", f"no space left on the device: {message}")
    return WriterpoolError(code, message)
