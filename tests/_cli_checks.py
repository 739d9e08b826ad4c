"""What the command-line tests check of a refusal: a clear error, never a traceback."""

from __future__ import annotations

from typing import Any


def assert_clear_error(result: Any, *says: str, code: int = 2) -> None:
    """``result`` (typer's ``CliRunner`` result) exited with ``code`` through
    ``SystemExit`` (no traceback), and its output says each of ``says``."""
    assert result.exit_code == code, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit), repr(result.exception)  # no traceback
    assert "Traceback" not in result.output
    for text in says:
        assert text in result.output, result.output
