"""Small I/O helpers shared by results, benchmark records and reports.

Files are replaced atomically by :func:`write_atomic` (temporary file, fsync, rename), folders by
:func:`write_dir_atomic`: everything is written into a staging folder beside the final one,
which then takes the final folder's place in one step. The staging folder
``.<name>~stage~<host>~<pid>~<token>`` belongs to process ``pid`` on ``host``, so
:func:`clean_staging` can remove what a killed process left and never touches a live one's.

Replacing an existing folder swaps the two folders with one ``renameat2(RENAME_EXCHANGE)``
(Linux), so at every moment the final folder holds either the complete old contents or the
complete new ones; the old contents are removed only after the swap. Where the call is not
available (another OS or a file system without it), the old folder is first renamed to
``.<name>~old~<host>~<pid>~<token>`` and the staging folder renamed into place; a process killed
between the two renames leaves no final folder, and :func:`clean_staging` puts the old one back.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import io
import logging
import os
import re
import secrets
import shutil
import socket
import tempfile
import warnings
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

_SEP = "~"
#: Folder kinds beside a final folder: a staging folder, or the old contents moved aside.
STAGE, OLD = "stage", "old"
#: How HDF5 quotes the system's error inside its own message.
_HDF5_SYSTEM_ERROR = re.compile(r"errno = (\d+), error message = '([^']*)'")
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _new_file_mode() -> int:
    """The mode ``open`` gives a new file under this process's umask (``0o666 & ~umask``)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: Path, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)``, fsync, then rename onto ``path``: never a half-written file.

    The file gets the mode a plain ``open`` would give it (the umask's), not the 0600 of the
    temporary file it is written through."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, _new_file_mode())
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """An NPZ archive of ``arrays`` (uncompressed, no pickled objects) whose bytes depend on the
    arrays alone: ``np.savez`` stamps each member with the time it was written, so two copies of
    the same data would differ, and so would their SHA-256."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            member = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with archive.open(member, "w", force_zip64=True) as handle:
                np.lib.format.write_array(handle, np.asarray(array), allow_pickle=False)
    return buffer.getvalue()


def npz_holds(path: Path, arrays: Mapping[str, np.ndarray]) -> bool:
    """Whether the NPZ file at ``path`` holds exactly ``arrays``: the same names, dtypes,
    shapes and values (read without pickle; a missing or unreadable file holds nothing)."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            if set(archive.files) != set(arrays):
                return False
            for name, array in arrays.items():
                stored, given = archive[name], np.asarray(array)
                if stored.dtype != given.dtype or not np.array_equal(stored, given):
                    return False
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return False
    return True


def _host() -> str:
    """This machine's name as it appears in staging folder names."""
    return socket.gethostname().replace(_SEP, "-").replace("/", "-") or "localhost"


def _owned(final: Path, kind: str) -> Path:
    """A fresh name beside ``final`` for a folder of ``kind`` owned by this process."""
    token = secrets.token_hex(4)
    return final.with_name(_SEP.join((f".{final.name}", kind, _host(), str(os.getpid()), token)))


def staging_dir(final: Path) -> Path:
    """A new, empty staging folder beside ``final`` (its parent is created if need be), with
    the permissions a new folder gets from the umask."""
    final.parent.mkdir(parents=True, exist_ok=True)
    path = _owned(final, STAGE)
    path.mkdir()
    return path


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap folders ``a`` and ``b`` in one step; False where the system cannot."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, f"cannot swap {a} and {b}: {os.strerror(code)}")


def replace_dir(staging: Path, final: Path) -> None:
    """Put the complete folder ``staging`` in the place of ``final`` in one step, removing what
    ``final`` held only once it is replaced (see the module's notes)."""
    if final.exists() and not final.is_dir():
        raise NotADirectoryError(f"{final} exists and is not a folder")
    if not final.exists():
        os.rename(staging, final)
    elif _exchange(staging, final):
        shutil.rmtree(staging)  # the old contents, now under the staging name
    else:
        old = _owned(final, OLD)
        os.rename(final, old)
        os.rename(staging, final)
        shutil.rmtree(old)
    _fsync(final.parent)


def write_dir_atomic(final: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(folder)`` on a staging folder, fsync what it wrote, then put the folder in
    the place of ``final`` with :func:`replace_dir`: ``final`` holds the complete old or the
    complete new contents at every moment. What killed writers of ``final`` left is removed
    first (:func:`clean_staging`); a symbolic link is followed to the folder it names."""
    final = final.resolve() if final.is_symlink() else final
    clean_staging(final.parent, name=final.name)
    staging = staging_dir(final)
    try:
        write(staging)
        for root, _, files in os.walk(staging):
            for name in files:
                _fsync(Path(root, name))
            _fsync(Path(root))
        replace_dir(staging, final)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return final


def _owner(path: Path) -> tuple[str, str, str, int] | None:
    """``(final name, kind, host, pid)`` of a staging or old folder's name, else None."""
    parts = path.name[1:].split(_SEP) if path.name.startswith(".") else []
    if len(parts) != 5 or parts[1] not in (STAGE, OLD) or not parts[3].isdigit():
        return None
    return parts[0], parts[1], parts[2], int(parts[3])


def _alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def clean_staging(directory: Path, name: str | None = None) -> None:
    """Remove the staging folders in ``directory`` (of final folder ``name`` only, when given)
    whose owner on this machine is gone, and put an old folder back where its replacement
    never arrived. Folders of live processes, or of other machines, are left alone."""
    if not directory.is_dir():
        return
    for path in sorted(directory.iterdir()):
        owner = _owner(path)
        if owner is None or not path.is_dir() or (name is not None and owner[0] != name):
            continue
        final_name, kind, host, pid = owner
        if host != _host() or _alive(pid):
            continue
        final = directory / final_name
        if kind == OLD and not final.exists():
            os.rename(path, final)
            logger.warning("%s: restored from %s, left by a process that was killed", final, path)
        else:
            shutil.rmtree(path, ignore_errors=True)
            logger.debug("removed %s, left by a process that was killed", path)


def system_error(err: BaseException) -> tuple[int, str] | None:
    """The system's ``(errno, message)`` behind a failed file operation, where ``err`` or an
    exception it was raised from or during has one: HDF5 buries it in its own message
    (``Disable slist on flush dest failure failed (file write failed: ..., errno = 28, error
    message = 'No space left on device', ...)``, which h5py raises as a ``RuntimeError`` or an
    ``OSError``); an ``OSError`` carries it as its ``errno``. None where there is none."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found = _HDF5_SYSTEM_ERROR.search(str(current))
        if found:
            return int(found[1]), found[2]
        if isinstance(current, OSError) and current.errno:
            return current.errno, os.strerror(current.errno)
        current = current.__cause__ or current.__context__
    return None


@contextlib.contextmanager
def cause_first(what: str) -> Iterator[None]:
    """Re-raise a failure of the block that has a system error behind it (see
    :func:`system_error`; a full disk) as an ``OSError`` of that errno whose message leads with
    the system's message, then ``what`` (what failed); the original is chained. Other errors
    pass unchanged."""
    try:
        yield
    except (OSError, RuntimeError) as err:
        cause = system_error(err)
        if cause is None:
            raise
        code, message = cause
        raise OSError(code, f"{message}: {what}") from err


def import_arviz() -> Any:
    """ArviZ, imported without its notices about the 1.x refactor (this stack pins 0.23): the
    warning, and the lines it logs at INFO for each preview package not installed."""
    logging.getLogger("arviz.preview").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing", category=FutureWarning)
        import arviz

    return arviz


def netcdf_problem(path: Path) -> str | None:
    """What is wrong with the netCDF file at ``path`` (missing, unreadable, truncated, empty),
    or None. HDF5 checks the file's length against the one its superblock records when it
    opens it, so a truncated file is found here without reading it through."""
    import h5py

    if not path.is_file():
        return "is missing"
    try:
        with h5py.File(path, "r") as handle:
            if not list(handle.keys()):
                return "holds no data"
    except (OSError, ValueError) as err:
        return f"is unreadable ({type(err).__name__}: {err})"
    return None
