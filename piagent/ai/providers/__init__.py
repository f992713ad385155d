"""The built-in providers; importing this package registers each under its ``api``.

The in-process ``llama-cpp`` provider is registered only when llama-cpp-python is installed
(it is imported on its first call, not here)."""

from . import anthropic, google, openai_completions, openai_responses  # noqa: F401 -- imported to register
from .llama_cpp import register as _register_llama_cpp

_register_llama_cpp()
