"""Ref-name rules: git's check-ref-format, applied in Python, plus writerpool's own.

Names found in a writer's clone are hostile input: collection would import a branch
`<name>` as `refs/remotes/writer-<writer>/<name>` in the operator's checkout, so every
name is checked here before any git process sees it.
"""

from __future__ import annotations

from collections.abc import Callable

MAX_NAME_BYTES = 200

# Characters git refuses anywhere in a ref name (check-ref-format rules 4 and 5, and
# the backslash); control characters are handled separately.
_FORBIDDEN_CHARS = frozenset(" ~^:?*[\\")


def _is_control(char: str) -> bool:
    return ord(char) < 0x20 or ord(char) == 0x7F


def _has_component(name: str, test: Callable[[str], bool]) -> bool:
    return any(test(component) for component in name.split("/"))


# check-ref-format's rules, in the order git documents them.
_GIT_RULES: tuple[tuple[Callable[[str], bool], str], ...] = (
    (lambda n: not n, "empty name"),
    (lambda n: n == "@", "the name '@' is reserved"),
    (lambda n: any(_is_control(c) for c in n), "control character"),
    (lambda n: " " in n, "space character"),
    (lambda n: any(c in _FORBIDDEN_CHARS for c in n), "forbidden character (~ ^ : ? * [ \\)"),
    (lambda n: ".." in n, "contains '..'"),
    (lambda n: "@{" in n, "contains '@{'"),
    (lambda n: n.startswith("/") or n.endswith("/"), "leading or trailing '/'"),
    (lambda n: "//" in n, "empty path component"),
    (lambda n: n.endswith("."), "ends with '.'"),
    (lambda n: _has_component(n, lambda c: c.startswith(".")), "a component starts with '.'"),
    (lambda n: _has_component(n, lambda c: c.endswith(".lock")), "a component ends with '.lock'"),
)

# writerpool's own rules for names that come from a writer.
_OUR_RULES: tuple[tuple[Callable[[str], bool], str], ...] = (
    (lambda n: len(n.encode("utf-8")) > MAX_NAME_BYTES, f"longer than {MAX_NAME_BYTES} bytes"),
    (lambda n: n.startswith("-"), "leading '-'"),
    (lambda n: not n.isprintable(), "non-printable character"),
    (lambda n: n == "HEAD" or n.endswith("/HEAD"), "the name 'HEAD' is reserved"),
)


def git_format_reason(name: str) -> str | None:
    """Why git's check-ref-format (with --allow-onelevel) refuses `name`, or None.

    The one-slash rule does not apply: callers check names that will sit below a
    prefix such as `refs/heads/`.
    """
    return next((reason for test, reason in _GIT_RULES if test(name)), None)


def refuse_reason(name: str) -> str | None:
    """Why a branch name from a writer must not be imported, or None when it is safe.

    git's rules, then writerpool's: at most 200 bytes of UTF-8, no leading `-` (it
    would read as an option), printable characters only (no invisible or look-alike
    separators), and not `HEAD`, which git treats specially under refs/remotes/<x>/.
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "not valid UTF-8"
    for test, reason in _OUR_RULES[:1] + _GIT_RULES + _OUR_RULES[1:]:
        if test(name):
            return reason
    return None
