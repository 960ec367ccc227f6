"""The documented codes and the registry in code must agree."""

import re
from pathlib import Path

from writerpool.errors import CODES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "codes.md"


def test_every_registered_code_is_documented_and_no_other() -> None:
    documented = re.findall(r"^\| `([a-z_]+)` \|", DOCS.read_text(), flags=re.M)
    assert documented == list(CODES), "run scripts/gen-codes-doc"


def test_every_code_has_a_one_line_meaning() -> None:
    for code, meaning in CODES.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", code)
        assert meaning and "\n" not in meaning, code
