"""File tools confined to a root directory: ``read_file``, ``write_file``, ``list_dir``.

Each factory takes the root and returns an :class:`~piagent.types.AgentTool`. Every path the
model gives is taken relative to the root and resolved with ``os.path.realpath`` (so ``..``
and symlinks are followed first); a path that ends up outside the root is refused with an
error result. This keeps an honest model inside its directory; it is not a sandbox against
a process that swaps symlinks while a call runs.
"""

from __future__ import annotations

import os
from typing import Annotated, Optional

from ..decorator import tool
from ..types import AgentTool

__all__ = ["confine", "file_tools", "list_dir", "read_file", "write_file"]

_BINARY_PROBE = 8192


def _root(root: os.PathLike[str] | str) -> str:
    real = os.path.realpath(os.fspath(root))
    if not os.path.isdir(real):
        raise ValueError(f"root {os.fspath(root)!r} is not an existing directory")
    return real


def confine(root: str, path: str) -> str:
    """The real absolute path of ``path`` taken relative to ``root`` (a real path).

    Raises PermissionError when it resolves outside ``root``, ValueError for an empty path.
    """
    if not path or "\0" in path:
        raise ValueError("path must be a non-empty string without NUL characters")
    resolved = os.path.realpath(os.path.join(root, path))
    if os.path.commonpath([root, resolved]) != root:
        raise PermissionError(f"Path {path!r} is outside the allowed directory {root}; use a path inside it")
    return resolved


def _display(root: str, resolved: str) -> str:
    return os.path.relpath(resolved, root)


def read_file(root: os.PathLike[str] | str, *, max_bytes: int = 50_000) -> AgentTool:
    """A ``read_file`` tool for text files under ``root``; output is cut at ``max_bytes``."""
    base = _root(root)

    @tool(name="read_file")
    def read(
        path: Annotated[str, "File path, relative to the working directory."],
        offset: Annotated[int, "First line to read (1-based)."] = 1,
        limit: Annotated[Optional[int], "Maximum number of lines to read; all by default."] = None,
    ) -> str:
        """Read a text file. Long output is truncated; read on with `offset`."""
        resolved = confine(base, path)
        if offset < 1:
            raise ValueError("offset must be 1 or more")
        if limit is not None and limit < 1:
            raise ValueError("limit must be 1 or more")
        try:
            with open(resolved, "rb") as probe:
                if b"\0" in probe.read(_BINARY_PROBE):
                    raise ValueError(f"{path} looks like a binary file; read_file only reads text")
            return _read_lines(resolved, path, offset, limit, max_bytes)
        except IsADirectoryError:
            raise IsADirectoryError(f"{path} is a directory; use list_dir") from None
        except FileNotFoundError:
            raise FileNotFoundError(f"File not found: {path}") from None

    return read


def _read_lines(resolved: str, path: str, offset: int, limit: Optional[int], max_bytes: int) -> str:
    chosen: list[str] = []
    used = 0
    total = 0
    truncated = False
    with open(resolved, encoding="utf-8", errors="replace", newline="") as handle:
        for number, line in enumerate(handle, start=1):
            total = number
            if number < offset or truncated or (limit is not None and number >= offset + limit):
                continue
            size = len(line.encode("utf-8"))
            if used + size > max_bytes:
                truncated = True
                if not chosen:  # one huge line: show its start
                    chosen.append(line.encode("utf-8")[:max_bytes].decode("utf-8", "ignore"))
                continue
            chosen.append(line)
            used += size
    if total == 0:
        return ""
    if offset > total:
        raise ValueError(f"offset {offset} is beyond the end of {path} ({total} lines)")
    text = "".join(chosen)
    last = offset + len(chosen) - 1
    if truncated:
        text += (
            f"\n\n[Output truncated at {max_bytes} bytes: showing lines {offset}-{last} of {total}; "
            f"use offset={last + 1} to read on]"
        )
    elif last < total:
        text += f"\n\n[Showing lines {offset}-{last} of {total}; use offset={last + 1} to read on]"
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
        resolved = confine(base, path)
        if os.path.isdir(resolved):
            raise IsADirectoryError(f"{path} is a directory")
        parent = os.path.dirname(resolved)
        os.makedirs(parent, exist_ok=True)
        data = content.encode("utf-8")
        with open(resolved, "wb") as handle:
            handle.write(data)
        return f"Wrote {len(data)} bytes to {_display(base, resolved)}"

    return write


def list_dir(root: os.PathLike[str] | str, *, max_entries: int = 500) -> AgentTool:
    """A ``list_dir`` tool: the entries of a directory under ``root``, directories ending in ``/``."""
    base = _root(root)

    @tool(name="list_dir")
    def listing(path: Annotated[str, "Directory path, relative to the working directory."] = ".") -> str:
        """List a directory's entries, sorted; directories end with '/'."""
        resolved = confine(base, path)
        try:
            with os.scandir(resolved) as entries:
                names = sorted(e.name + ("/" if e.is_dir() else "") for e in entries)
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
