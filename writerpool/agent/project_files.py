"""pi never reads per-project files from the directory it works in.

pi 0.73.1 finds everything per-project under `join(cwd, CONFIG_DIR_NAME)`: settings
(`shellCommandPrefix` runs before every bash command), extensions, skills, prompts,
themes, `SYSTEM.md`, `APPEND_SYSTEM.md`, packages it would install, and migrations that
write there. CONFIG_DIR_NAME is read from pi's own package.json (`piConfig.configDir`,
".pi" by default). writerpool sets it to a path that climbs out of any working directory
to a fixed place that does not exist and that neither the agent (a read-only root in a
writer) nor the operator's account (on the host) can create: a planted `/work/.pi/…`
is then plain data, and the clone's own `.pi` stays the agent's work like any file.
pi's user configuration is unaffected: writerpool always sets PI_CODING_AGENT_DIR.
"""

from __future__ import annotations

import json
from pathlib import Path

from writerpool.atomic import write_atomic

# Node's path.join clamps ".." at the root: any cwd up to 64 levels deep lands here.
PROJECT_DIR = "../" * 64 + "nonexistent/writerpool-no-pi-project"
MARKER = "writerpool-no-pi-project"


def _manifest(prefix: Path) -> Path:
    return prefix / "node_modules" / "@mariozechner" / "pi-coding-agent" / "package.json"


def project_files_disabled(prefix: Path) -> bool:
    try:
        document = json.loads(_manifest(prefix).read_bytes())
    except (OSError, ValueError):
        return False
    config = document.get("piConfig") if isinstance(document, dict) else None
    return isinstance(config, dict) and config.get("configDir") == PROJECT_DIR


def disable_project_files(prefix: Path) -> None:
    """Point pi's per-project directory of the installed pi at PROJECT_DIR."""
    manifest = _manifest(prefix)
    document = json.loads(manifest.read_bytes())
    config = document.setdefault("piConfig", {})
    config["configDir"] = PROJECT_DIR
    write_atomic(manifest, (json.dumps(document, indent="\t") + "\n").encode(), mode=0o644)
