"""Errors a person should see as one clear line (the CLI prints them without a traceback).

The app library's `memorypack.PackError` is the other such error: the CLI prints both alike."""


class UserError(Exception):
    """An expected failure: bad input, a missing folder, a refused pack. The message is the line."""


def one_line(error: BaseException) -> str:
    """`Type: first line` of an unexpected error, for a per-tenant failure shown in the UI (the
    traceback goes to the log)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
