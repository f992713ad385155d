""":class:`MCPClient`: a synchronous MCP client whose tools are piagent :class:`~piagent.AgentTool`s.

    with MCPClient.stdio("npx", ["-y", "@modelcontextprotocol/server-everything"]) as server:
        agent = Agent(model=..., tools=server.tools(), prepare_next_turn=server.prepare_next_turn)

Both protocol eras are spoken (docs/mcp.md#revisions): the handshake era (``initialize``;
2024-11-05 to 2025-11-25) and the stateless era (2026-07-28: ``server/discover`` and
``_meta`` on every request). ``protocol="auto"`` probes ``server/discover`` and falls back
to ``initialize`` on anything that is not positive evidence of a stateless server.
"""

from __future__ import annotations

import atexit
import logging
import re
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, Union

from .._output_turns import OUTPUT_TOOL_NAME
from ..abort import AbortSignal
from ..ai.types import TextContent
from ..types import AgentContext, AgentToolResult, TurnContext, TurnUpdate
from ._connection import Connection, not_supported
from ._content import MCPTool, OutputCheck, content_from_result
from ._errors import (
    MCPConnectionError,
    MCPError,
    MCPProtocolError,
    MCPRemoteError,
    MCPTimeoutError,
    UnsupportedProtocolVersionError,
)
from ._http import LISTEN_WAIT, HttpTransport, SessionExpiredError, StreamBrokenError
from ._protocol import (
    HANDSHAKE_VERSIONS,
    HEADER_MISMATCH,
    INVALID_PARAMS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_STATELESS_VERSION,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_SUBSCRIPTION_ID,
    META_VERSION,
    NAMED_METHODS,
    STATELESS_ERROR_CODES,
    STATELESS_VERSIONS,
    SUPPORTED_VERSIONS,
    UNSUPPORTED_VERSION,
    at_least,
    fill_elicitation_defaults,
    header_params,
    header_value,
    param_headers,
    x_mcp_header_problem,
)
from ._stdio import StdioTransport

__all__ = ["MCPClient", "Root"]

logger = logging.getLogger("piagent.mcp")
server_log = logging.getLogger("piagent.mcp.server")

DEFAULT_TIMEOUT = 300.0
"""Seconds any one request may take (a tool call included) before it is cancelled."""
CONNECT_TIMEOUT = 30.0
"""Seconds connecting may take in all: server start-up, the ``server/discover`` probe and the handshake."""
DISCOVER_TIMEOUT = 10.0
"""Seconds ``protocol="auto"`` waits for ``server/discover`` before treating the server as handshake-era."""
MAX_INPUT_ROUNDS = 8
"""How many input-required rounds one stateless request may take before it fails."""
MAX_LIST_PAGES = 100
"""A ``tools/list`` with more pages than this fails (a server cycling cursors cannot loop us)."""
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
"""MCP's rule for a tool name (2025-11-25); a tool whose name (prefix included) breaks it is left out."""

Root = Mapping[str, Any]
"""A root: ``{"uri": "file:///...", "name": "..."}`` (a plain path string is accepted too)."""
SamplingCallback = Callable[[dict], dict]
"""``callback(params) -> CreateMessageResult`` for ``sampling/createMessage`` (MCP's JSON shapes)."""
ElicitationCallback = Callable[[dict], dict]
"""``callback(params) -> {"action": "accept"|"decline"|"cancel", "content": {...}}``."""

_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
_open_clients: weakref.WeakSet[MCPClient] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:  # the interpreter is exiting: reap every server we started
    for client in list(_open_clients):
        client.close()


class MCPClient:
    """A connection to one MCP server (see the module docstring); thread-safe.

    Build one with :meth:`stdio` or :meth:`http`: they connect at once (a failure raises an
    :class:`~piagent.mcp.MCPError` naming the cause). Options, all keyword-only:

    * ``protocol``: "auto", a handshake revision (offered in ``initialize``) or "2026-07-28".
    * ``prefix``: put before every tool name (to keep two servers' tools apart).
    * ``roots``: answer ``roots/list`` with these (a path or ``{"uri", "name"}`` each).
    * ``sampling`` / ``elicitation``: callbacks for those server requests; without one the
      capability is not declared and such a request gets a "not supported" error.
    * ``timeout`` (``DEFAULT_TIMEOUT``), ``connect_timeout`` (``CONNECT_TIMEOUT``),
      ``discover_timeout`` (``DISCOVER_TIMEOUT``), ``max_input_rounds`` (``MAX_INPUT_ROUNDS``).
    """

    def __init__(
        self,
        transport_factory: Callable[[], Any],
        *,
        protocol: str = "auto",
        prefix: str = "",
        roots: Optional[Sequence[Union[str, Root]]] = None,
        sampling: Optional[SamplingCallback] = None,
        elicitation: Optional[ElicitationCallback] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
        discover_timeout: float = DISCOVER_TIMEOUT,
        max_input_rounds: int = MAX_INPUT_ROUNDS,
        client_info: Optional[dict] = None,
    ) -> None:
        if protocol != "auto" and protocol not in SUPPORTED_VERSIONS:
            raise UnsupportedProtocolVersionError(
                f"protocol {protocol!r} is unknown; use 'auto' or one of {', '.join(SUPPORTED_VERSIONS)}"
            )
        self._factory = transport_factory
        self.requested_protocol = protocol
        self.prefix = prefix
        self.roots = None if roots is None else [_root(r) for r in roots]
        self.sampling = sampling
        self.elicitation = elicitation
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.discover_timeout = discover_timeout
        self.max_input_rounds = max_input_rounds
        self.client_info = client_info or {"name": "piagent", "version": _version()}
        self.protocol_version: Optional[str] = None
        self.server_info: dict = {}
        self.server_capabilities: dict = {}
        self.instructions: Optional[str] = None
        self._lock = threading.RLock()
        self._connection: Optional[Connection] = None
        self._tools: Optional[list[MCPTool]] = None
        self._tools_expire: Optional[float] = None  # monotonic time; None: until a list change
        self._tools_stale = False
        self._subscription_id: Any = None
        self._header_params: Optional[dict[str, list]] = None  # by tool name, from the last listing
        self._closed = False
        self._connect_deadline = 0.0  # monotonic; connecting (probe included) must end by then
        self._connect()
        _open_clients.add(self)

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        protocol: str = "auto",
        **options: Any,
    ) -> MCPClient:
        """Start ``command args`` as a server subprocess (it inherits only ``INHERITED_ENV`` plus ``env``)."""
        return cls(lambda: StdioTransport(command, args, env, cwd), protocol=protocol, **options)

    @classmethod
    def http(
        cls, url: str, headers: Optional[Mapping[str, str]] = None, protocol: str = "auto", **options: Any
    ) -> MCPClient:
        """Connect to a Streamable HTTP endpoint; ``headers`` (an API key, a bearer token) go on every request."""
        return cls(lambda: HttpTransport(url, dict(headers or {})), protocol=protocol, **options)

    def __enter__(self) -> MCPClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<MCPClient {self.server_info.get('name', '?')} protocol={self.protocol_version}>"

    @property
    def stateless(self) -> bool:
        return self.protocol_version in STATELESS_VERSIONS

    @property
    def _mirrors_params(self) -> bool:
        """Whether ``x-mcp-header`` annotations apply (the stateless era over HTTP)."""
        return self.stateless and isinstance(self._transport, HttpTransport)

    # -- connecting ----------------------------------------------------------------------------

    def _connect(self) -> None:
        """Open the transport and agree on a revision (see the module docstring)."""
        transport = self._factory()
        connection = Connection(transport, self._on_notification, self._on_request)
        self._connection = connection
        self._transport = transport
        self._connect_deadline = time.monotonic() + self.connect_timeout
        try:
            if self.requested_protocol in HANDSHAKE_VERSIONS:
                self._initialize(self.requested_protocol)
            elif self.requested_protocol in STATELESS_VERSIONS:
                self._discover(self.requested_protocol, probing=False)
            else:
                self._auto()
        except BaseException as exc:
            connection.close()
            if isinstance(exc, MCPTimeoutError):
                raise MCPTimeoutError(f"MCP server {transport.describe()!r} did not answer: {exc}") from exc
            raise
        logger.info(
            "MCP server %s speaks %s", self.server_info.get("name", transport.describe()), self.protocol_version
        )

    def _connect_left(self) -> float:
        """Seconds left of ``connect_timeout`` for this connection's handshake (or discovery)."""
        return max(0.0, self._connect_deadline - time.monotonic())

    def _auto(self) -> None:
        version = LATEST_STATELESS_VERSION
        for attempt in range(2):
            try:
                if self._discover(version, probing=True):
                    return
            except MCPRemoteError as exc:
                if exc.code in STATELESS_ERROR_CODES and exc.code != UNSUPPORTED_VERSION:
                    raise  # a stateless server that refused the probe itself: initialize would not help
                supported = _supported(exc)
                if exc.code == UNSUPPORTED_VERSION and supported is not None:
                    mutual = [v for v in STATELESS_VERSIONS if v in supported]
                    if mutual and attempt == 0:
                        version = mutual[-1]
                        continue
                    if not any(v in HANDSHAKE_VERSIONS for v in supported):
                        raise UnsupportedProtocolVersionError(
                            f"the server speaks {', '.join(supported)}; piagent speaks {', '.join(SUPPORTED_VERSIONS)}"
                        ) from exc
            except MCPTimeoutError:
                pass  # a silent handshake-era server (the probe was cancelled)
            try:
                self._initialize(LATEST_HANDSHAKE_VERSION)
                return
            except MCPRemoteError as exc:  # a slow server that did answer the probe after all
                mutual = [v for v in STATELESS_VERSIONS if v in (_supported(exc) or ())]
                if exc.code != UNSUPPORTED_VERSION or not mutual or attempt:
                    raise
                version = mutual[-1]
        raise MCPProtocolError("the server's protocol era could not be settled")

    def _discover(self, version: str, probing: bool) -> bool:
        """``server/discover`` at ``version``; True when it proves a stateless server we can speak to."""
        self.protocol_version = version
        assert self._connection is not None
        self._connection.cancel_by_notification = not isinstance(self._transport, HttpTransport)
        left = self._connect_left()
        result = self._rpc("server/discover", {}, timeout=min(self.discover_timeout, left) if probing else left)
        supported = result.get("supportedVersions")
        mutual = [v for v in STATELESS_VERSIONS if isinstance(supported, list) and v in supported]
        if not mutual:
            if probing:
                self.protocol_version = None
                self._connection.cancel_by_notification = True
                return False
            raise UnsupportedProtocolVersionError(
                f"the server supports {supported}; piagent speaks {', '.join(STATELESS_VERSIONS)} statelessly"
            )
        self.protocol_version = mutual[-1]
        self.server_capabilities = _dict(result.get("capabilities"))
        meta = _dict(result.get("_meta"))
        self.server_info = meta.get("io.modelcontextprotocol/serverInfo") or {}
        self.instructions = result.get("instructions")
        if (self.server_capabilities.get("tools") or {}).get("listChanged"):
            self._subscribe()
        return True

    def _initialize(self, offered: str) -> None:
        assert self._connection is not None
        self.protocol_version = None
        self._connection.cancel_by_notification = True
        params = {
            "protocolVersion": offered,
            "capabilities": self._capabilities(offered),
            "clientInfo": self.client_info,
        }
        result = self._connection.request("initialize", params, timeout=self._connect_left())
        version = result.get("protocolVersion")
        if version not in HANDSHAKE_VERSIONS:
            raise UnsupportedProtocolVersionError(
                f"the server answered initialize with protocol revision {version!r}; "
                f"piagent supports {', '.join(HANDSHAKE_VERSIONS)} by handshake"
            )
        self.protocol_version = version
        self.server_capabilities = _dict(result.get("capabilities"))
        self.server_info = _dict(result.get("serverInfo"))
        self.instructions = result.get("instructions")
        if isinstance(self._transport, HttpTransport) and at_least(version, "2025-06-18"):
            self._transport.protocol_header = version
        self._connection.notify("notifications/initialized")
        if isinstance(self._transport, HttpTransport):
            self._transport.listen(min(self._connect_left(), LISTEN_WAIT))

    def _capabilities(self, version: str) -> dict:
        capabilities: dict = {}
        if self.roots is not None:
            capabilities["roots"] = {} if version in STATELESS_VERSIONS else {"listChanged": False}
        if self.sampling is not None:
            capabilities["sampling"] = {}
        if self.elicitation is not None and at_least(version, "2025-06-18"):
            capabilities["elicitation"] = {"form": {}} if at_least(version, "2025-11-25") else {}
        return capabilities

    def _subscribe(self) -> None:
        """Open ``subscriptions/listen`` for tool-list changes (stateless era) on a thread of its own."""

        def listen() -> None:
            try:
                params = {"notifications": {"toolsListChanged": True}}
                self._rpc("subscriptions/listen", params, timeout=None)
            except MCPError as exc:
                logger.debug("the MCP subscription ended: %s", exc)

        threading.Thread(target=listen, name="mcp-subscription", daemon=True).start()

    # -- requests ------------------------------------------------------------------------------

    def _live(self) -> Connection:
        """The connection, reconnecting first if the last one broke (a crashed server is restarted)."""
        with self._lock:
            if self._closed:
                raise MCPConnectionError("the MCP client is closed")
            connection = self._connection
            if connection is None or connection.closed is not None:
                logger.info("MCP connection lost (%s): reconnecting", connection.closed if connection else "none")
                if connection is not None:
                    connection.close()
                self._tools_stale = True
                self._connect()
                connection = self._connection
            assert connection is not None
            return connection

    def _rpc(
        self,
        method: str,
        params: dict,
        *,
        timeout: Optional[float],
        signal: Optional[AbortSignal] = None,
        on_progress: Optional[Callable[[dict], None]] = None,
    ) -> dict:
        """One request in the agreed era (``_meta`` and headers when stateless); no retries."""
        connection = self._connection
        assert connection is not None and self.protocol_version is not None
        headers: Optional[dict] = None
        if self.stateless:
            params = dict(params)
            meta = dict(params.get("_meta") or {})
            meta[META_VERSION] = self.protocol_version
            meta[META_CLIENT_INFO] = self.client_info
            meta[META_CLIENT_CAPABILITIES] = self._capabilities(self.protocol_version)
            params["_meta"] = meta
            if isinstance(self._transport, HttpTransport):
                headers = {"MCP-Protocol-Version": self.protocol_version, "Mcp-Method": method}
                name_key = NAMED_METHODS.get(method)
                if name_key is not None and isinstance(params.get(name_key), str):
                    headers["Mcp-Name"] = header_value(params[name_key])
                if method == "tools/call" and self._header_params is not None:
                    mirrored = self._header_params.get(str(params.get("name")), [])
                    headers.update(param_headers(mirrored, _dict(params.get("arguments"))))
        return connection.request(
            method,
            params,
            timeout=timeout,
            signal=signal,
            on_progress=on_progress,
            headers=headers,
        )

    def request(
        self,
        method: str,
        params: Optional[dict] = None,
        *,
        timeout: Optional[float] = None,
        signal: Optional[AbortSignal] = None,
        on_progress: Optional[Callable[[dict], None]] = None,
    ) -> dict:
        """Send ``method`` and return its result, in whichever era was agreed.

        Reconnects first if the connection broke; re-initialises once if an HTTP session
        expired; in the stateless era re-issues once a request whose stream broke, and
        fulfils input-required results (elicitation, sampling, roots) through the callbacks,
        at most ``max_input_rounds`` times.
        """
        params = dict(params or {})
        limit = self.timeout if timeout is None else timeout
        for attempt in range(2):
            self._live()
            try:
                return self._fulfil(method, params, limit, signal, on_progress)
            except SessionExpiredError:
                if attempt:
                    raise
                logger.info("MCP session expired: starting a new one")
                with self._lock:
                    assert isinstance(self._transport, HttpTransport)
                    self._transport.session_id = None
                    self._transport.protocol_header = None
                    self._connect_deadline = time.monotonic() + self.connect_timeout
                    self._initialize(LATEST_HANDSHAKE_VERSION)
                    self._tools_stale = True
            except StreamBrokenError:
                if attempt or not self.stateless:
                    raise
        raise AssertionError("unreachable")

    def _fulfil(
        self,
        method: str,
        params: dict,
        timeout: Optional[float],
        signal: Optional[AbortSignal],
        on_progress: Optional[Callable[[dict], None]],
    ) -> dict:
        for _ in range(self.max_input_rounds + 1):
            result = self._rpc(method, params, timeout=timeout, signal=signal, on_progress=on_progress)
            if result.get("resultType", "complete") != "input_required" or not self.stateless:
                return result
            params = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
            requests_ = result.get("inputRequests")
            if isinstance(requests_, dict):
                params["inputResponses"] = {key: self._input(value) for key, value in requests_.items()}
            if isinstance(result.get("requestState"), str):
                params["requestState"] = result["requestState"]
        raise MCPProtocolError(f"{method}: the server still wanted input after {self.max_input_rounds} rounds")

    def _input(self, request: Any) -> dict:
        """Answer one input request of an input-required result (as a server request would be)."""
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            raise MCPProtocolError(f"malformed input request: {request!r:.200}")
        params = _dict(request.get("params"))
        return self._on_request(request["method"], params)

    # -- what the server sends us --------------------------------------------------------------

    def _on_request(self, method: str, params: dict) -> dict:
        if method == "ping":
            return {}
        if method == "roots/list":
            if self.roots is None:
                raise not_supported(method, "pass roots=[...] to MCPClient")
            return {"roots": list(self.roots)}
        if method == "sampling/createMessage":
            if self.sampling is None:
                raise not_supported(method, "pass sampling=callback to MCPClient")
            return self.sampling(params)
        if method == "elicitation/create":
            if self.elicitation is None:
                raise not_supported(method, "pass elicitation=callback to MCPClient")
            answer = dict(self.elicitation(params))
            if answer.get("action") == "accept" and params.get("mode", "form") == "form":
                answer["content"] = fill_elicitation_defaults(answer.get("content"), params.get("requestedSchema"))
            return answer
        raise not_supported(method, "unknown method")

    def _on_notification(self, method: str, params: dict) -> None:
        if method == "notifications/tools/list_changed":
            meta = _dict(params.get("_meta"))
            if self.stateless and meta.get(META_SUBSCRIPTION_ID) is None:
                return  # stateless list changes only come on our subscription
            self._tools_stale = True
        elif method == "notifications/message":
            level = _LOG_LEVELS.get(str(params.get("level")), logging.INFO)
            server_log.log(
                level, "%s: %s", params.get("logger") or self.server_info.get("name", "server"), params.get("data")
            )
        else:
            logger.debug("MCP notification %s", method)

    # -- tools ---------------------------------------------------------------------------------

    def list_tools(self) -> list[dict]:
        """Every tool definition the server lists (all pages), as MCP dicts."""
        definitions: list[dict] = []
        cursor = None
        ttl: Any = None
        for _ in range(MAX_LIST_PAGES):
            result = self.request("tools/list", {} if cursor is None else {"cursor": cursor}, timeout=self.timeout)
            page = result.get("tools")
            if not isinstance(page, list):
                raise MCPProtocolError("tools/list: the result has no tools list")
            definitions.extend(t for t in page if isinstance(t, dict) and isinstance(t.get("name"), str))
            ttl = result.get("ttlMs") if ttl is None else ttl
            cursor = result.get("nextCursor")
            if not cursor:
                break
        else:
            raise MCPProtocolError(f"tools/list: more than {MAX_LIST_PAGES} pages")
        if self._mirrors_params:
            definitions = [d for d in definitions if _valid_header_annotations(d)]
            self._header_params = {d["name"]: header_params(d.get("inputSchema")) for d in definitions}
        if self.stateless:  # cacheable results: fresh for ttlMs (absent or negative: stale at once)
            ms = ttl if isinstance(ttl, (int, float)) and ttl > 0 else 0
            self._tools_expire = time.monotonic() + ms / 1000.0
        else:
            self._tools_expire = None
        return definitions

    def tools_changed(self) -> bool:
        """Whether :meth:`tools` would list again (a list change, an expired TTL, a reconnect)."""
        if self._tools is None or self._tools_stale:
            return True
        return self._tools_expire is not None and time.monotonic() >= self._tools_expire

    def tools(self) -> list[MCPTool]:
        """The server's tools as :class:`AgentTool`s (listed again only when :meth:`tools_changed`).

        A tool whose name (``prefix`` included) breaks MCP's rule (:data:`TOOL_NAME`), is
        ``final_answer`` (structured output's tool) or was listed before is left out with a warning.
        """
        with self._lock:
            if self.tools_changed():
                self._tools_stale = False
                seen: set[str] = set()
                self._tools = [
                    self._agent_tool(d) for d in self.list_tools() if _usable_name(self.prefix + d["name"], seen)
                ]
            assert self._tools is not None
            return list(self._tools)

    def _agent_tool(self, definition: dict) -> MCPTool:
        name = definition["name"]
        schema = definition.get("inputSchema")
        annotations = _dict(definition.get("annotations"))
        output_schema = definition.get("outputSchema") if isinstance(definition.get("outputSchema"), dict) else None
        output_check = None if output_schema is None else OutputCheck(output_schema)  # compiled once, per tool

        def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
            def progress(params: dict) -> None:
                done, total, note = params.get("progress"), params.get("total"), params.get("message")
                text = f"progress {done}" + (f"/{total}" if total is not None else "") + (f": {note}" if note else "")
                on_update(AgentToolResult([TextContent(text)], details=params))

            result = self.call_tool(name, args, signal=signal, on_progress=progress)
            structured = at_least(self.protocol_version or HANDSHAKE_VERSIONS[0], "2025-06-18")
            content = content_from_result(result, output_check, structured)
            return AgentToolResult(content, details=result)

        return MCPTool(
            name=self.prefix + name,
            description=str(definition.get("description") or definition.get("title") or name),
            parameters=schema if isinstance(schema, dict) else {"type": "object", "properties": {}},
            execute=execute,
            label=str(definition.get("title") or annotations.get("title") or name),
            mcp_name=name,
            annotations=annotations,
            output_schema=output_schema,
            definition=definition,
            client=self,
        )

    def call_tool(
        self,
        name: str,
        arguments: Optional[dict] = None,
        *,
        signal: Optional[AbortSignal] = None,
        on_progress: Optional[Callable[[dict], None]] = None,
        timeout: Optional[float] = None,
    ) -> dict:
        """``tools/call``: the raw MCP result (protocol errors raise :class:`MCPRemoteError`).

        In the stateless era over HTTP the arguments annotated with ``x-mcp-header`` in the
        tool's last listed ``inputSchema`` go in ``Mcp-Param-*`` headers; a header mismatch
        (-32020) lists the tools again and retries once (docs/mcp.md#parameter-headers). The
        tools are listed first if they never were.
        """
        params = {"name": name, "arguments": dict(arguments or {})}
        if self._mirrors_params and self._header_params is None:
            self.list_tools()  # the schemas say which arguments become headers
        for attempt in range(2):
            try:
                return self.request("tools/call", params, timeout=timeout, signal=signal, on_progress=on_progress)
            except MCPRemoteError as exc:
                if exc.code == HEADER_MISMATCH and self._mirrors_params and not attempt:
                    logger.info("MCP server refused the headers of a %s call: listing the tools again", name)
                    self.list_tools()
                    self._tools_stale = True
                    continue
                if exc.code == INVALID_PARAMS:
                    self._tools_stale = True  # the tool may be gone or changed: list again next turn
                raise
        raise AssertionError("unreachable")

    def prepare_next_turn(self, context: TurnContext, signal: AbortSignal) -> Optional[TurnUpdate]:
        """An ``Agent(prepare_next_turn=...)`` hook: swap in this server's new tools between turns.

        Only this client's tools are replaced (others are kept, in order); returns None when
        nothing changed. To combine it with a hook of your own, call it from yours.
        """
        if not self.tools_changed():
            return None
        old = [t for t in context.context.tools if isinstance(t, MCPTool) and t.client is self]
        try:
            new = self.tools()
        except MCPError as exc:
            logger.warning("could not list the MCP server's tools again: %s", exc)
            return None
        if [t.definition for t in old] == [t.definition for t in new]:
            return None
        run = context.context
        kept = [t for t in run.tools if not any(t is o for o in old)]
        return TurnUpdate(context=AgentContext(run.system_prompt, run.messages, kept + list(new)))

    def close(self) -> None:
        """End the connection: the subprocess is reaped (or the HTTP session deleted), threads joined."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
        _open_clients.discard(self)


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _valid_header_annotations(definition: dict) -> bool:
    """False (with a warning) for a tool whose ``x-mcp-header`` annotations break the rules."""
    problem = x_mcp_header_problem(definition.get("inputSchema"))
    if problem is not None:
        logger.warning("MCP tool %r left out: %s", definition["name"], problem)
    return problem is None


def _usable_name(name: str, seen: set[str]) -> bool:
    """False (with a warning quoting it escaped) for a name outside :data:`TOOL_NAME`, piagent's
    own or one in ``seen`` (the names kept so far, to which a usable one is added)."""
    if not TOOL_NAME.fullmatch(name):
        logger.warning("MCP tool %.80r left out: a tool name is 1 to 128 of A-Z, a-z, 0-9, '_', '-' and '.'", name)
        return False
    if name == OUTPUT_TOOL_NAME:
        logger.warning("MCP tool %r left out: structured output uses that name (a prefix= keeps it)", name)
        return False
    if name in seen:
        logger.warning("MCP tool %r left out: the server listed that name more than once (the first is kept)", name)
        return False
    seen.add(name)
    return True


def _supported(exc: MCPRemoteError) -> Optional[list[str]]:
    data = exc.data
    supported = data.get("supported") if isinstance(data, dict) else None
    return [v for v in supported if isinstance(v, str)] if isinstance(supported, list) else None


def _root(root: Union[str, Root]) -> dict:
    if isinstance(root, str):
        import pathlib

        return {"uri": pathlib.Path(root).resolve().as_uri(), "name": pathlib.Path(root).name or root}
    return dict(root)


def _version() -> str:
    from .. import __version__

    return __version__
