"""Registering writerpool with coding clients (Claude Code, Codex) through their own
command line tools, with a record of what writerpool added: the `writerpool serve`
command (stdio), or the pool service's URL (`--http`)."""

from writerpool.clients.model import TARGETS, Target, parse_target
from writerpool.clients.service import apply, plan, remove
from writerpool.clients.verify import Checks, verify

__all__ = ["TARGETS", "Checks", "Target", "apply", "parse_target", "plan", "remove", "verify"]
