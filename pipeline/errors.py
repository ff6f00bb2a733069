"""Errors a person should see as one clear line (the CLI prints them without a traceback).

The app library's `memorypack.PackError` is the other such error: the CLI prints both alike."""


class UserError(Exception):
    """An expected failure: bad input, a missing folder, a refused pack. The message is the line."""
