"""File tools confined to a root directory: ``read_file``, ``write_file``, ``list_dir``.

Each factory takes the root and returns an :class:`~piagent.types.AgentTool`. What is confined
(see the README's "Limits and safety"):

* Every path the model gives is taken relative to the root and resolved with
  ``os.path.realpath`` (``..`` and symlinks inside the root are followed); a path that ends
  up outside the root is refused.
* The resolved path is then opened one component at a time from a descriptor of the root,
  each with ``O_NOFOLLOW``: a symlink swapped in by another process between the check and the
  open is refused, never followed out of the root.
* Only regular files are read or written (never a FIFO, a device or a socket, which could block
  forever), only directories are listed; a file with more than one hard link is never written
  (its other name may be outside the root).

Not confined: reading a hard link whose other name is outside the root (a hard link to a
file is indistinguishable from the file), and what a process outside piagent does with the
files. ``read_file`` reads at most ``max_bytes`` of the lines it returns, and nothing after them.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Optional

from ..decorator import tool
from ..exceptions import InvalidValueError
from ..types import AgentTool

__all__ = ["confine", "file_tools", "list_dir", "read_file", "write_file"]

_BINARY_PROBE = 8192
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def _root(root: os.PathLike[str] | str) -> str:
    real = os.path.realpath(os.fspath(root))
    if not os.path.isdir(real):
        raise InvalidValueError(f"root {os.fspath(root)!r} is not an existing directory")
    return real


def confine(root: str, path: str) -> str:
    """The real absolute path of ``path`` taken relative to ``root`` (a real path).

    Raises PermissionError when it resolves outside ``root``, ValueError for an empty path.
    """
    if not path or "\0" in path:
        raise InvalidValueError("path must be a non-empty string without NUL characters")
    resolved = os.path.realpath(os.path.join(root, path))
    if os.path.commonpath([root, resolved]) != root:
        raise PermissionError(f"Path {path!r} is outside the allowed directory {root}; use a path inside it")
    return resolved


def _moved(path: str) -> PermissionError:
    return PermissionError(f"Path {path!r} changed while it was opened (a symbolic link appeared); refused")


@contextmanager
def _confined_fd(
    root: str, path: str, flags: int, make_parents: bool = False, directory: bool = False
) -> Iterator[tuple[int, str]]:
    """An fd for ``path`` under ``root``, opened component by component with ``O_NOFOLLOW``
    (``O_NONBLOCK`` too, so a FIFO never blocks the open); yields ``(fd, resolved path)``."""
    resolved = confine(root, path)
    relative = os.path.relpath(resolved, root)
    parts = [] if relative == "." else relative.split(os.sep)
    if not parts and not directory:
        raise IsADirectoryError(f"{path} is a directory")
    current = os.open(root, os.O_RDONLY | _DIRECTORY)
    try:
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            if last and not directory:
                opened = os.open(part, flags | _NOFOLLOW | _NONBLOCK | os.O_CLOEXEC, 0o666, dir_fd=current)
            else:
                try:
                    opened = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=current)
                except FileNotFoundError:
                    if not make_parents or last:
                        raise
                    os.mkdir(part, dir_fd=current)
                    opened = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=current)
            os.close(current)
            current = opened
    except OSError as exc:
        # O_NOFOLLOW meeting a symlink: ELOOP for the last part, ENOTDIR (with O_DIRECTORY) for a directory
        moved = exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and _is_symlink(part, current))
        os.close(current)
        if moved:
            raise _moved(path) from None
        if exc.errno == errno.ENXIO:  # a FIFO with no reader, opened for writing
            raise PermissionError(f"{path} is not a regular file; refused") from None
        raise
    try:
        yield current, resolved
    finally:
        os.close(current)


def _is_symlink(name: str, directory_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=directory_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _regular(fd: int, path: str) -> os.stat_result:
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(f"{path} is a directory; use list_dir")
    if not stat.S_ISREG(info.st_mode):
        raise PermissionError(f"{path} is not a regular file (a FIFO, device or socket); refused")
    os.set_blocking(fd, True)
    return info


def _display(root: str, resolved: str) -> str:
    return os.path.relpath(resolved, root)


def read_file(root: os.PathLike[str] | str, *, max_bytes: int = 50_000) -> AgentTool:
    """A ``read_file`` tool for text files under ``root``; output is cut at ``max_bytes``."""
    base = _root(root)

    @tool(name="read_file", replay="safe")
    def read(
        path: Annotated[str, "File path, relative to the working directory."],
        offset: Annotated[int, "First line to read (1-based)."] = 1,
        limit: Annotated[Optional[int], "Maximum number of lines to read; all by default."] = None,
    ) -> str:
        """Read a text file. Long output is truncated; read on with `offset`."""
        if offset < 1:
            raise InvalidValueError("offset must be 1 or more")
        if limit is not None and limit < 1:
            raise InvalidValueError("limit must be 1 or more")
        try:
            with _confined_fd(base, path, os.O_RDONLY) as (fd, _):
                _regular(fd, path)
                with os.fdopen(os.dup(fd), "rb") as handle:
                    if b"\0" in handle.peek(_BINARY_PROBE)[:_BINARY_PROBE]:
                        raise InvalidValueError(f"{path} looks like a binary file; read_file only reads text")
                    return _read_lines(handle, path, offset, limit, max_bytes)
        except FileNotFoundError:
            raise FileNotFoundError(f"File not found: {path}") from None

    return read


def _read_lines(handle: io.BufferedReader, path: str, offset: int, limit: Optional[int], max_bytes: int) -> str:
    """Lines ``offset``.. of ``handle``: reads past the lines before ``offset`` a piece at a time,
    and stops at ``limit`` lines or ``max_bytes`` bytes (a line longer than that shows its start)."""
    number = 0
    chosen: list[bytes] = []
    used = 0
    truncated = False
    while limit is None or len(chosen) < limit:
        piece = handle.readline(max_bytes + 1)
        if not piece:
            break
        number += 1
        if number < offset:
            while not piece.endswith(b"\n"):  # the rest of a long line, skipped a piece at a time
                piece = handle.readline(max_bytes + 1)
                if not piece:
                    break
            continue
        if used + len(piece) > max_bytes:
            truncated = True
            if not chosen:  # one huge line: show its start
                chosen.append(piece[:max_bytes])
            break
        chosen.append(piece)
        used += len(piece)
    if number == 0:
        return ""
    if number < offset:
        raise InvalidValueError(f"offset {offset} is beyond the end of {path} ({number} lines)")
    text = b"".join(chosen).decode("utf-8", "replace")
    last = offset + len(chosen) - 1
    if truncated:
        text = text.encode("utf-8")[:max_bytes].decode("utf-8", "ignore")
        shown = f"showing lines {offset}-{last}; use offset={last + 1} to read on"
        text += f"\n\n[Output truncated at {max_bytes} bytes: {shown}]"
    elif handle.peek(1)[:1]:
        text += f"\n\n[Showing lines {offset}-{last}; use offset={last + 1} to read on]"
    return text


def write_file(root: os.PathLike[str] | str) -> AgentTool:
    """A ``write_file`` tool: create or overwrite a text file under ``root`` (parents are created)."""
    base = _root(root)

    @tool(name="write_file")
    def write(
        path: Annotated[str, "File path, relative to the working directory."],
        content: Annotated[str, "The complete new content of the file."],
    ) -> str:
        """Create or overwrite a text file with the given content."""
        data = content.encode("utf-8")
        with _confined_fd(base, path, os.O_WRONLY | os.O_CREAT, make_parents=True) as (fd, resolved):
            info = _regular(fd, path)
            if info.st_nlink > 1:
                raise PermissionError(
                    f"{path} has {info.st_nlink} hard links; piagent never writes through a hard link "
                    "(its other name may be outside the allowed directory)"
                )
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        return f"Wrote {len(data)} bytes to {_display(base, resolved)}"

    return write


def list_dir(root: os.PathLike[str] | str, *, max_entries: int = 500) -> AgentTool:
    """A ``list_dir`` tool: the entries of a directory under ``root``, directories ending in ``/``."""
    base = _root(root)

    @tool(name="list_dir", replay="safe")
    def listing(path: Annotated[str, "Directory path, relative to the working directory."] = ".") -> str:
        """List a directory's entries, sorted; directories end with '/'."""
        try:
            with _confined_fd(base, path, os.O_RDONLY, directory=True) as (fd, _), os.scandir(fd) as entries:
                names = sorted(e.name + ("/" if e.is_dir(follow_symlinks=False) else "") for e in entries)
        except NotADirectoryError:
            raise NotADirectoryError(f"{path} is not a directory") from None
        except FileNotFoundError:
            raise FileNotFoundError(f"Directory not found: {path}") from None
        if not names:
            return "(empty directory)"
        text = "\n".join(names[:max_entries])
        if len(names) > max_entries:
            text += f"\n\n[Truncated: showing {max_entries} of {len(names)} entries]"
        return text

    return listing


def file_tools(root: os.PathLike[str] | str, *, read_only: bool = False) -> list[AgentTool]:
    """``[read_file, list_dir, write_file]`` under ``root`` (without ``write_file`` if ``read_only``)."""
    tools = [read_file(root), list_dir(root)]
    if not read_only:
        tools.append(write_file(root))
    return tools
