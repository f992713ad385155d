"""The command that installs one of piagent's extras, for the copy of piagent that is running.

piagent is installed from its checkout (it is not on a package index), so the command names
the checkout's path when piagent runs from one: ``pip install -e '/path/to/piagent[local]'``
works from any directory, where ``pip install 'piagent[local]'`` finds nothing.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["install_command", "missing_extra"]


def install_command(extra: str) -> str:
    """``pip install -e '<checkout>[extra]'``, or ``pip install 'piagent[extra]'`` outside a checkout."""
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "setup.cfg").is_file() and (checkout / "setup.py").is_file():
        return f"pip install -e '{checkout}[{extra}]'"
    return f"pip install 'piagent[{extra}]'"


def missing_extra(exc: ModuleNotFoundError, what: str, extra: str) -> ModuleNotFoundError:
    """The error to raise (``from exc``) when ``what`` is used without ``extra``: it names the
    missing module, as ``exc`` did, and the command that installs the extra."""
    return ModuleNotFoundError(
        f"{what} needs the {extra} extra (No module named {exc.name!r}): {install_command(extra)}", name=exc.name
    )
