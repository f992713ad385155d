"""The built-in HTTP providers; importing this package registers each under its ``api``."""

from . import anthropic, google  # noqa: F401  (register on import)
from . import openai_completions  # noqa: F401
from . import openai_responses  # noqa: F401
