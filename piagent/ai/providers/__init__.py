"""The built-in HTTP providers; importing this package registers each under its ``api``."""

from . import anthropic  # noqa: F401  (registers on import)
