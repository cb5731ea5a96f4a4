"""Errors of ``hpcbridge.mpi.File`` calls as mpi4py code catches them.

mpi4py raises ``MPI.Exception`` (with an MPI error class) for every failed MPI-IO call, and code
written for it catches that: ``except MPI.Exception as e: if e.Get_error_class() ==
MPI.ERR_NO_SUCH_FILE``. hpcbridge raises Python's own exceptions, which name the URL
(``FileNotFoundError``, ``ValueError``, ``io.UnsupportedOperation``...). Each such exception
leaving a ``File`` method is raised as an instance of both: a subclass of its own type and of
``MPI.Exception``, whose error class is the one Open MPI gives for the same mistake (checked
against Open MPI in tests/mpi/test_oracle_edges_mpi.py). ``TypeError`` (a wrong Python
argument, which mpi4py also reports as ``TypeError``) is left as it is.
"""

from __future__ import annotations

import errno
import functools
import io
import threading

__all__ = ["mpi_errors", "as_mpi_exception", "error_class_of"]

_TYPES: dict[type, type] = {}
_LOCK = threading.Lock()


def error_class_of(exc: BaseException) -> str:
    """The name of the MPI error class (``ERR_...``) Open MPI reports for what ``exc`` says."""
    text = str(exc)
    if isinstance(exc, FileExistsError):
        return "ERR_FILE_EXISTS"
    if isinstance(exc, FileNotFoundError):
        return "ERR_NO_SUCH_FILE"
    if isinstance(exc, PermissionError):
        return "ERR_ACCESS"
    if isinstance(exc, (IsADirectoryError, NotADirectoryError)):
        return "ERR_BAD_FILE"
    if isinstance(exc, io.UnsupportedOperation):  # before OSError and ValueError: it is both
        if text.startswith("write:"):
            return "ERR_READ_ONLY"
        if text.startswith(("read:", "sync:")):  # Open MPI: reading write-only, syncing read-only
            return "ERR_ACCESS"
        return "ERR_UNSUPPORTED_OPERATION"
    if isinstance(exc, OSError):
        return {errno.ENOSPC: "ERR_NO_SPACE", errno.EDQUOT: "ERR_QUOTA"}.get(exc.errno, "ERR_IO")
    if isinstance(exc, NotImplementedError):
        # Open MPI: a data representation it does not know is ERR_UNSUPPORTED_DATAREP.
        return "ERR_UNSUPPORTED_DATAREP" if "datarep" in text else "ERR_UNSUPPORTED_OPERATION"
    if isinstance(exc, ValueError):
        if "closed file" in text:
            return "ERR_FILE"
        if "split collective" in text and "already active" in text:
            return "ERR_REQUEST"  # Open MPI: a second *_begin before the first's *_end
        if "amode" in text or "invalid mode" in text or "MODE_" in text:
            return "ERR_AMODE"
        if "hint" in text:
            return "ERR_INFO_VALUE"
        if "MPI file view rule" in text:  # a filetype MPI forbids (negative or decreasing displacements)
            return "ERR_TYPE"
        return "ERR_ARG"
    return "ERR_OTHER"


def _combined(base: type) -> type:
    """``base`` and ``MPI.Exception`` in one class (made once per base)."""
    with _LOCK:
        cls = _TYPES.get(base)
        if cls is None:
            from mpi4py import MPI

            def __init__(self, code, *args):
                self._mpi_error = code
                base.__init__(self, *args)

            def __int__(self):  # MPI.Exception's methods take the error code from int(self)
                return self._mpi_error

            def __reduce__(self):
                plain = base(*self.args)
                if isinstance(plain, OSError):
                    plain.filename = self.filename
                return as_mpi_exception, (plain,)

            cls = type(base.__name__, (MPI.Exception, base), {
                "__init__": __init__, "__int__": __int__, "__reduce__": __reduce__, "__module__": base.__module__,
                "__str__": base.__str__, "__repr__": base.__repr__, "__hash__": base.__hash__,
                "__doc__": f"{base.__name__} raised by hpcbridge.mpi, also an MPI.Exception."})
            _TYPES[base] = cls
        return cls


def as_mpi_exception(exc: BaseException) -> BaseException:
    """``exc`` as an instance of its own type and of ``MPI.Exception`` (see the module text); the
    original's attributes (``errno``, ``filename``...) and message are kept."""
    from mpi4py import MPI

    if isinstance(exc, MPI.Exception) or isinstance(exc, TypeError):
        return exc
    try:
        combined = _combined(type(exc))(getattr(MPI, error_class_of(exc)), *exc.args)
    except Exception:  # an exception type that cannot be made again from its args: as it is
        return exc
    if isinstance(exc, OSError) and exc.filename is not None and combined.filename is None:
        combined.filename = exc.filename
    combined.__dict__.update({k: v for k, v in vars(exc).items() if k != "_mpi_error"})
    return combined


def mpi_errors(function):
    """Wrap a ``File`` method: its exceptions leave as :func:`as_mpi_exception` makes them."""
    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except Exception as exc:
            combined = as_mpi_exception(exc)
            if combined is exc:
                raise
            raise combined.with_traceback(exc.__traceback__) from exc.__cause__
    return call
