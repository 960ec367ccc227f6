"""A Node preload that keeps pi's RPC output linear in the answer's length.

pi 0.73.1 writes every streamed delta as a `message_update` event that repeats the whole
partial message twice (`assistantMessageEvent.partial` and `message`). An answer of n
small deltas therefore costs pi O(n²) bytes of JSON: 20 KB in 4-character deltas made
104 MB of stdout, 60 KB made 914 MB. While pi's event loop is busy parsing a burst of
provider data it cannot finish a write, so Node queues every line; once the queue passes
what one writev may hold, pi dies with `write ENOBUFS`, however fast its reader is.

writerpool never uses the partial message (a turn's text comes from `message_end`), so
this preload, loaded with `node --require`, serializes `message_update` events without
it: the event type, content index and the delta itself. Everything else pi writes is
untouched. The preload removes NODE_OPTIONS (and the image's compile cache settings,
agent/compile_cache.py) from pi's environment so the agent's own processes (a
project's Node tests, say) never load it nor read pi's cache.
"""

from __future__ import annotations

from pathlib import Path

from writerpool.atomic import write_atomic

PRELOAD_NAME = "rpc-compact.cjs"

PRELOAD_SOURCE = b"""\
"use strict";
// Written by writerpool (writerpool/agent/compact.py); replaced before each session.
delete process.env.NODE_OPTIONS;
delete process.env.NODE_COMPILE_CACHE;
delete process.env.NODE_COMPILE_CACHE_PORTABLE;
const stringify = JSON.stringify;
JSON.stringify = function (value, replacer, space) {
  if (arguments.length === 1 && value !== null && typeof value === "object" &&
      value.type === "message_update" && value.assistantMessageEvent) {
    const e = value.assistantMessageEvent;
    return stringify({
      type: "message_update",
      assistantMessageEvent: {
        type: e.type,
        contentIndex: e.contentIndex,
        delta: typeof e.delta === "string" ? e.delta : undefined,
      },
    });
  }
  return stringify.apply(this, arguments);
};
"""


def install_preload(agent_dir: Path) -> Path:
    """Write the preload into pi's agent directory; return its path."""
    path = agent_dir / PRELOAD_NAME
    write_atomic(path, PRELOAD_SOURCE, mode=0o644)
    return path


def node_options(agent_dir: str | Path) -> str:
    """NODE_OPTIONS that load the preload from the agent directory (as pi sees it)."""
    path = str(Path(agent_dir) / PRELOAD_NAME)
    if '"' in path or "\\" in path:
        raise ValueError("the agent directory's path cannot be quoted for NODE_OPTIONS")
    return f'--require "{path}"'
