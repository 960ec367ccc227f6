"""Entry point: `python3 -m clonetool inspect|collect|review`, a JSON request on stdin;
the answer is one JSON object on stdout (`collect` frames a bundle after it).
`provision` and `reset` read their request from the environment and a base bundle on
stdin."""

from __future__ import annotations

import json
import sys

from .gitrun import ToolError
from .provision import provision
from .reset import reset
from .review import review
from .scan import inspect
from .stream import collect


def main() -> int:
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    try:
        if command in ("provision", "reset"):
            receiving = provision if command == "provision" else reset
            json.dump(receiving(sys.stdin.buffer), sys.stdout)
            return 0
        request = json.loads(sys.stdin.read() or "{}")
        if command == "collect":
            collect(request, sys.stdout.buffer)
            sys.stdout.buffer.flush()
            return 0
        if command == "inspect":
            result = inspect(request)
        elif command == "review":
            result = review(request)
        else:
            raise ToolError(f"unknown command {command!r}")
    except (ToolError, OSError, ValueError, KeyError) as exc:
        json.dump({"error": f"{type(exc).__name__}: {exc}"[:500]}, sys.stdout)
        return 1
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
