"""MEMORY.md and USER.md on disk, read and replaced the way Hermes does it, within the folder owner's files.

Hermes (`utils.atomic_replace`, its issue #16743) writes a memory file through a symbolic link: the
new text goes to a synced temporary file next to the link and is renamed onto the link's target, so
the link survives. When that rename fails with EXDEV (the target is on another file system) or
EBUSY (the file is a bind mount), it copies the text into the target instead. Either way the file
ends with mode 0600. `write_memory_file` does the same, with one rule Hermes has no need for: a
link is followed only to a regular file owned by the owner of the memories folder (or, for a file
not there yet, into a directory that owner owns), and a file is written in place only if that owner
owns it. A daemon running as another user (root, say) is thus never steered into someone else's
file by a link the folder's owner planted; `ForeignFileError` names the file instead. Reading
(`read_memory_text`) follows a link under the same rule, so such a daemon never copies someone
else's file into the ledger either.

Directories are held open while checking and writing, so a path swapped after the check cannot
redirect the write. When Dreamer runs as root, the file it writes keeps the owner (and group) of
the file it replaces, or takes the folder's, so the agent can still read its 0600 file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dreamer.errors import MemoryFileError
from dreamer.hermes.memory.locking import TEMP_PREFIX, TEMP_SUFFIX

__all__ = [
    "FILE_MODE",
    "MAX_MEMORY_FILE_BYTES",
    "ForeignFileError",
    "MemoryFileTooLargeError",
    "Rename",
    "read_memory_text",
    "write_memory_file",
]

#: The mode Hermes leaves a memory file with (its temporary file's, from mkstemp).
FILE_MODE = 0o600

#: `os.replace` with directory descriptors; a parameter so a test can inject a fault.
Rename = Callable[..., None]


#: The largest memory file read. Hermes' limits are a few thousand characters (2,200 and 1,375 by
#: default); a file hundreds of times that is not a memory file being edited but a log or a dump
#: put in its place, and reading it would make an audit run for minutes and report megabytes.
MAX_MEMORY_FILE_BYTES = 1 << 20


class MemoryFileTooLargeError(MemoryFileError, OSError):
    """A memory file far larger than any memory limit (see `MAX_MEMORY_FILE_BYTES`). Caught as an
    `OSError` by the readers, which report the file as unreadable."""

    def __init__(self, path: Path, size: int) -> None:
        super().__init__(
            errno.EFBIG,
            f"{path} holds {size:,} bytes, far over any memory limit (Dreamer reads at most "
            f"{MAX_MEMORY_FILE_BYTES:,}); trim it or move it aside, then run again",
        )
        self.filename = str(path)

    def __str__(self) -> str:
        return str(self.strerror)


class ForeignFileError(MemoryFileError, OSError):
    """A memory file (or its link's target) belongs to someone other than the folder's owner. Catch
    it, or `OSError`, around a read or write of a memory file: the store refuses with its own error
    naming the file, the audit reports ERROR."""

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(
            errno.EPERM,
            f"refusing to use {path}: {detail}; Dreamer follows a link, or writes a file in place, only "
            f"when the file belongs to the owner of the memories folder. Point the link at a file that "
            f"user owns, or replace the link with a regular file",
        )
        self.filename = str(path)

    def __str__(self) -> str:
        return str(self.strerror)


@dataclass(frozen=True)
class _Place:
    """Where a memory file's bytes live: a directory held open and a name in it."""

    folder_fd: int
    dir_fd: int
    name: str
    folder_owner: int
    folder_gid: int
    via_link: bool


def _open_dir(path: str | Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


@contextlib.contextmanager
def _place_of(path: Path) -> Iterator[_Place]:
    """The directory and name holding `path`'s bytes: itself, or its link's checked target."""
    folder_fd = _open_dir(path.parent)
    try:
        folder = os.fstat(folder_fd)
        try:
            own = os.stat(path.name, dir_fd=folder_fd, follow_symlinks=False)
        except FileNotFoundError:
            own = None
        if own is None or not stat.S_ISLNK(own.st_mode):
            yield _Place(folder_fd, folder_fd, path.name, folder.st_uid, folder.st_gid, via_link=False)
            return
        real = Path(os.path.realpath(path))
        target_fd = _open_dir(real.parent)
        try:
            _check_link_target(path, real, target_fd, folder.st_uid)
            yield _Place(folder_fd, target_fd, real.name, folder.st_uid, folder.st_gid, via_link=True)
        finally:
            os.close(target_fd)
    finally:
        os.close(folder_fd)


def _check_link_target(link: Path, real: Path, dir_fd: int, owner: int) -> None:
    try:
        target = os.stat(real.name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        holder = os.fstat(dir_fd).st_uid
        if holder != owner:
            raise ForeignFileError(
                link, f"it links to {real}, which does not exist, in a directory owned by uid {holder}"
            ) from None
        return
    if not stat.S_ISREG(target.st_mode):
        raise ForeignFileError(link, f"it links to {real}, which is not a regular file")
    if target.st_uid != owner:
        raise ForeignFileError(
            link, f"it links to {real}, owned by uid {target.st_uid}, not by the folder's owner (uid {owner})"
        )


def read_memory_text(path: Path) -> str | None:
    """The text of the memory file at `path` (through a link the folder's owner owns); None if absent.

    Raises `ForeignFileError` for a link to someone else's file, `OSError` / `UnicodeDecodeError`
    when the file cannot be read (a FIFO or directory in its place included: it is never waited on).
    """
    try:
        with _place_of(path) as place:
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(place.name, flags, dir_fd=place.dir_fd)
            with os.fdopen(fd, "rb") as handle:
                info = os.fstat(handle.fileno())
                if not stat.S_ISREG(info.st_mode):
                    raise OSError(errno.EINVAL, f"{path} is not a regular file")
                if place.via_link and info.st_uid != place.folder_owner:
                    raise ForeignFileError(path, "its link's target changed owner while it was opened")
                data = handle.read(MAX_MEMORY_FILE_BYTES + 1)
                if len(data) > MAX_MEMORY_FILE_BYTES:
                    raise MemoryFileTooLargeError(path, max(info.st_size, len(data)))
    except FileNotFoundError:
        return None
    return data.decode("utf-8")


def write_memory_file(path: Path, text: str, *, rename: Rename = os.replace) -> None:
    """Replace the memory file at `path` with `text`, mode 0600, as Hermes does (module docstring)."""
    data = text.encode("utf-8")
    with _place_of(path) as place:
        owner = _owner_to_keep(place)
        fd, tmp_path = tempfile.mkstemp(dir=path.parent, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
        tmp_name = os.path.basename(tmp_path)
        try:
            try:
                _write_all(fd, data)
                os.fsync(fd)
                if owner is not None:
                    os.fchown(fd, *owner)
            finally:
                os.close(fd)
            try:
                rename(tmp_name, place.name, src_dir_fd=place.folder_fd, dst_dir_fd=place.dir_fd)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.EBUSY):
                    raise
                _copy_in_place(path, place, data, owner)
                os.unlink(tmp_name, dir_fd=place.folder_fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name, dir_fd=place.folder_fd)
            raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _owner_to_keep(place: _Place) -> tuple[int, int] | None:
    """As root: the owner and group of the file being replaced (or the folder's), for the new file."""
    if os.geteuid() != 0:
        return None
    try:
        current = os.stat(place.name, dir_fd=place.dir_fd, follow_symlinks=False)
        owner = (current.st_uid, current.st_gid)
    except FileNotFoundError:
        owner = (place.folder_owner, place.folder_gid)
    return None if owner == (0, 0) else owner


def _copy_in_place(path: Path, place: _Place, data: bytes, owner: tuple[int, int] | None) -> None:
    """Hermes' fallback when the rename cannot happen: write the bytes into the file itself."""
    flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(place.name, flags | os.O_CREAT | os.O_EXCL, FILE_MODE, dir_fd=place.dir_fd)
        created = True
    except FileExistsError:
        fd = os.open(place.name, flags, dir_fd=place.dir_fd)
        created = False
    try:
        info = os.fstat(fd)
        if not created and info.st_uid != place.folder_owner:
            raise ForeignFileError(
                path,
                f"it must be written in place (a bind mount or another file system), and it is owned by "
                f"uid {info.st_uid}, not by the folder's owner (uid {place.folder_owner})",
            )
        if created and owner is not None:
            os.fchown(fd, *owner)
        os.ftruncate(fd, 0)
        _write_all(fd, data)
        os.fchmod(fd, FILE_MODE)
        os.fsync(fd)
    finally:
        os.close(fd)
