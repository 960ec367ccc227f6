"""Registering `writerpool serve` with coding clients (Claude Code, Codex) through their
own command line tools, with a record of what writerpool added."""

from writerpool.clients.model import TARGETS, Target, parse_target
from writerpool.clients.service import apply, plan, remove, verify

__all__ = ["TARGETS", "Target", "apply", "parse_target", "plan", "remove", "verify"]
