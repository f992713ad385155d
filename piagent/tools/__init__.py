"""A small kit of ready-made tools. Every name here is a factory returning an ``AgentTool``.

    from piagent.tools import calculator, file_tools, run_command

    tools = [*file_tools("./workspace"), run_command(cwd="./workspace"), calculator()]

* ``read_file(root)``, ``write_file(root)``, ``list_dir(root)``: text files under ``root``;
  paths escaping it (``..``, absolute paths, symlinks) are refused. ``file_tools(root,
  read_only=False)`` gives all three (or the two readers).
* ``run_command(cwd=None, timeout=120, max_output_bytes=50_000, inherit=(), max_processes=64)``:
  a shell command, killed (its whole process group) on abort, timeout or too many processes,
  output truncated to its tail, in an allowlisted environment.
* ``calculator()``: arithmetic via the ``ast`` module, never ``eval``.
"""

from __future__ import annotations

from .calculator import calculator
from .command import run_command
from .files import file_tools, list_dir, read_file, write_file

__all__ = ["calculator", "file_tools", "list_dir", "read_file", "run_command", "write_file"]
