"""What a report lets through to the operator's terminal."""

from __future__ import annotations

from writerpool.report import Report, sanitize


def test_terminal_controls_from_a_writer_or_a_host_are_shown_escaped() -> None:
    report = Report("image prune")
    report.add("command_failed", "error", "host/th",
               "Error: \x1b[2J\x1b]0;owned\x07 \u202eevil\r ok", remedy="\x9b6n")  # fmt: skip
    text = report.render_text()
    assert "\\x1b[2J\\x1b]0;owned\\x07 \\u202eevil\\r ok" in text and "\\x9b6n" in text
    assert not {"\x1b", "\x07", "\r", "\u202e", "\x9b"} & set(text)


def test_plain_text_lines_and_tabs_pass_unchanged() -> None:
    assert sanitize("two\tcolumns\nnext line, naïve") == "two\tcolumns\nnext line, naïve"
