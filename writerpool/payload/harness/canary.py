"""The canary credential acceptance sends through the session's real egress path must be
found nowhere inside: in no process's environment or arguments, in no readable file."""

from __future__ import annotations

import os
import re
import stat

from .probe import Result

# Split so that this file does not match its own pattern.
CANARY_RE = re.compile(("wpcanary-") + r"[0-9a-f]{32}")
# Where writerpool puts anything for a session; all of it is scanned.
SCAN_ROOTS = ("/pi", "/tmp", os.path.expanduser("~"))
SCAN_MAX_FILES = 20000
SCAN_MAX_BYTES = 64 * 1024 * 1024
SCAN_FILE_BYTES = 1024 * 1024


def _canary_in(data: bytes) -> bool:
    return CANARY_RE.search(data.decode("latin-1")) is not None


def _scan_processes() -> bool:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for name in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as f:
                    if _canary_in(f.read(SCAN_FILE_BYTES)):
                        return True
            except OSError:
                continue
    return False


def _scan_files(roots: tuple[str, ...], budget: int) -> bool | None:
    """True: a canary found; None: the budget ran out first. `.git` directories are
    skipped: their objects are compressed, and nothing of writerpool writes there."""
    files = 0
    stack = [r for r in dict.fromkeys(roots) if os.path.isdir(r)]
    while stack:
        top = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode) and entry.name != ".git":
                stack.append(entry.path)
            elif stat.S_ISREG(mode):
                files += 1
                if files > SCAN_MAX_FILES or budget <= 0:
                    return None
                try:
                    with open(entry.path, "rb") as f:
                        data = f.read(SCAN_FILE_BYTES)
                except OSError:
                    continue
                budget -= len(data)
                if _canary_in(data):
                    return True
    return False


def check_provider_credential() -> Result:
    mode = os.environ.get("WRITERPOOL_HARNESS_CANARY", "")
    if mode == "skip":
        return "pass", "an open network kind: the provider key is copied in (NOT limited)"
    if mode != "scan":
        return "inconclusive", "no canary credential was sent"
    if _scan_processes():
        return "fail", "the canary credential is in a process's environment or arguments"
    found = _scan_files(SCAN_ROOTS, SCAN_MAX_BYTES)
    if found is None:
        return "inconclusive", "too many files to scan"
    # The clone comes from the operator's checkout: scanned as far as the budget goes.
    if found or _scan_files((os.environ.get("WRITERPOOL_HARNESS_WORK", "/work"),), SCAN_MAX_BYTES):
        return "fail", "the canary credential is in a readable file"
    return "pass", "the canary credential is nowhere inside"
