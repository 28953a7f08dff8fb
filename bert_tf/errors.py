"""One error type for everything a user can get wrong, and one way for a program to report it.

Every error the library raises for bad input, settings or files derives from `BertTfError` and says
in one line what is wrong and where (the file, line, flag or variable). Entry points run through
`run_or_exit`, which turns such an error into exactly one `PROG: error: MESSAGE` line on stderr and
exit status 1 (or the error's own `status`), with no traceback. Anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import sys
from typing import Callable, TypeVar

T = TypeVar("T")


class BertTfError(Exception):
    """Base of the errors raised for bad input, settings or files; the message is for the user.

    `status`: the exit status its one line ends with (1; a stop on a signal uses 128 + the signal, as a shell)."""

    status = 1


EXPECTED_ERRORS: tuple[type[BaseException], ...] = (BertTfError, OSError)


def error_line(prog: str, error: BaseException) -> str:
    """`PROG: error: MESSAGE` in one line (an OSError's message is its first line)."""
    message = " ".join(str(error).split("\n")[:1]) if isinstance(error, OSError) else str(error)
    return f"{prog}: error: {message}"


def run_or_status(run: Callable[[], T], prog: str,
                  errors: tuple[type[BaseException], ...] = EXPECTED_ERRORS) -> T | int:
    """Runs `run`; an expected error becomes one `PROG: error: MESSAGE` line on stderr and its status (1)."""
    try:
        return run()
    except errors as e:
        print(error_line(prog, e), file=sys.stderr, flush=True)
        return getattr(e, "status", 1)


def run_or_exit(run: Callable[[], T], prog: str,
                errors: tuple[type[BaseException], ...] = EXPECTED_ERRORS) -> T:
    """Runs `run`; an expected error becomes one `PROG: error: MESSAGE` line on stderr and its exit status."""
    try:
        return run()
    except errors as e:
        print(error_line(prog, e), file=sys.stderr, flush=True)
        sys.exit(getattr(e, "status", 1))
