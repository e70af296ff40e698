"""The exceptions of the pocket package: one class per status of the C API.

Every failure raises a subclass of :class:`pocket.Error`, which also derives
from the built-in exception a Python caller would expect (bad options are
``ValueError``, an unreadable model is ``OSError``, a missing one
``FileNotFoundError``), so ``except ValueError`` works as well as
``except pocket.Error``. The message is the library's, naming the problem.
"""
from __future__ import annotations


class Error(Exception):
    """A failed call of Pocket's C API. ``status`` is the C status name."""

    status: str = "POCKET_ERR_FAILED"

    def __init__(self, message: str, status: str | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


class InvalidArgumentError(Error, ValueError):
    """An option out of range, an empty prompt, a token id outside the vocabulary."""


class ClosedError(Error, ValueError):
    """The model or session is closed (like I/O on a closed file)."""


class ModelError(Error, OSError):
    """The model cannot be opened or read; the message names the file and field."""

    def __init__(self, message: str, status: str | None = None) -> None:
        Error.__init__(self, message, status)


class ModelNotFoundError(ModelError, FileNotFoundError):
    """The model path does not exist."""


class ContextFullError(Error, ValueError):
    """The prompt (or the conversation so far) does not fit the session's context."""


class CancelledError(Error):
    """Loading was stopped by the progress callback."""


class BusyError(Error, RuntimeError):
    """Another thread is running a call on this session."""


class UnsupportedError(Error, ValueError):
    """An option this library version does not know."""


class InternalError(Error, RuntimeError):
    """A bug in Pocket; the message says where."""


_BY_STATUS: dict[int, type[Error]] = {
    1: InvalidArgumentError,
    2: ClosedError,
    3: ModelError,
    4: ContextFullError,
    5: CancelledError,
    6: BusyError,
    8: MemoryError,  # type: ignore[dict-item]  # the built-in one: nothing to add
    9: UnsupportedError,
    11: InternalError,
}


def from_status(status: int, message: str) -> BaseException:
    """The exception for a C API status (called by the native module)."""
    from . import _core

    cls = _BY_STATUS.get(status, Error)
    if cls is MemoryError:
        return MemoryError(message)
    return cls(message, _core.status_name(status))
