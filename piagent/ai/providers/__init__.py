"""The built-in HTTP providers; importing this package registers each under its ``api``."""

from . import anthropic, google  # noqa: F401  (register on import)
