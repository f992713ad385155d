"""The hand-written half of the model catalogue: how each family is driven.

Read by ``scripts/generate_catalogue.py`` (``make catalogue``). Model ids, dates and prices
come from the official SDKs and genai-prices; what no machine-readable source states -- the
thinking control, accepted effort values, what a model rejects -- is written here, each
family citing the documentation page it was taken from (as read in December 2026).
A family's ``match`` prefixes assign SDK-listed ids to it (longest prefix wins); ``models``
adds ids no SDK lists (Gemini and DeepSeek publish no model list in their SDKs).
"""

from __future__ import annotations

from typing import Any

ALL_LEVELS = ["minimal", "low", "medium", "high", "xhigh", "max"]

# Mid-conversation system messages and tool changes (system_messages_in_place,
# tool_changes_in_place). Anthropic: platform.claude.com/docs/en/build-with-claude/
# mid-conversation-system-messages (read 2026-12-05): role "system" messages inside `messages`
# on Fable 5.1, Mythos 5.1, Fable 5, Mythos 5, Opus 5.5, Opus 4.8, Opus 5, Sonnet 5.5 and Haiku
# 5.5, no beta header, not on Sonnet 5; tool changes (`tool_addition` / `tool_removal` blocks in
# such a message, a `tool_definition` by value under the inline-tools-2026-09-15 beta: the SDK's
# BetaSystemMessageParam, anthropic 2.17.0). Fable 5.2 (not on that page yet) as pi-ai 1.6.0's
# catalogue sets it; Mythos 5.2 is named nowhere and stays folded. OpenAI and DeepSeek: no page
# of theirs in reach states it per model; the models pi-ai 1.6.0's catalogue sets
# supportsMidConvoSystemMessages for (GPT-5.4, 5.4-mini, 5.5, 5.6, 6.x; deepseek-v4-pro), with
# supportsAdditionalTools (the SDK's `additional_tools` input item, openai 3.63.0) for 5.6 and 6.x.
IN_PLACE = {"system_messages_in_place": True, "tool_changes_in_place": True}

# Anthropic: platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting
# ("Thinking support, defaults, and rejected configurations by model"), .../adaptive-thinking,
# .../effort, and models/fable-5/migration-guide (Fable/Mythos: thinking always on, both
# "disabled" and budget_tokens rejected). Forced tool_choice is rejected while thinking is on.
ANTHROPIC: dict[str, dict[str, Any]] = {
    "claude-budget": {
        "doc": "Claude 4.5 and earlier: budget_tokens is the only thinking mode; off unless enabled",
        "match": ["claude-opus-4-5", "claude-haiku-4-5", "claude-sonnet-4-5", "claude-opus-4-1", "claude-sonnet-4-"],
        "max_tokens": 64000,
        "capabilities": {
            "thinking": "budget",
            "efforts": ALL_LEVELS,
            "thinking_off": "omit",
            "sampling": "without_thinking",
            "interleaved_thinking_beta": True,
        },
    },
    "claude-4.6": {
        "doc": "Claude 4.6: adaptive (budget_tokens deprecated); thinking.type disabled accepted; "
        "effort low..max, 128K output (models/sonnet-4-6/overview, read 2026-12-04)",
        "match": ["claude-opus-4-6", "claude-sonnet-4-6"],
        "max_tokens": 128000,
        "capabilities": {
            "thinking": "adaptive",
            "efforts": ["low", "medium", "high", "max"],
            "thinking_off": "disabled",
            "sampling": "without_thinking",
            "thinking_display": True,
        },
    },
    "claude-adaptive": {
        "doc": "Claude Opus 4.7+, Sonnet/Opus/Haiku 5.x: adaptive only (budget_tokens -> 400), "
        "thinking can be disabled, sampling parameters removed, display defaults to omitted",
        "match": ["claude-opus-4-7", "claude-opus-4-8", "claude-opus-5", "claude-sonnet-5", "claude-haiku-5"],
        "max_tokens": 128000,
        "capabilities": {
            "thinking": "adaptive",
            "efforts": ["low", "medium", "high", "xhigh", "max"],
            "thinking_off": "disabled",
            "sampling": "never",
            "thinking_display": True,
        },
        # models/opus-5-5/overview and models/sonnet-5-5/whats-new-sonnet-5-5 (read 2026-12-04):
        # Opus 5.5 cannot turn thinking off; Sonnet 5.5's lowest setting is between_tools (with
        # effort low..high: piagent sends no effort with it); both refuse forced tool use.
        "overrides": {
            "claude-opus-5-5": {"thinking_off": None, "forced_tool_choice": False, **IN_PLACE},
            "claude-sonnet-5-5": {"thinking_off": "between_tools", "forced_tool_choice": False, **IN_PLACE},
            "claude-opus-4-8": IN_PLACE,
            "claude-opus-5": IN_PLACE,
            "claude-haiku-5-5": IN_PLACE,
        },
    },
    "claude-always-thinking": {
        "doc": "Claude Fable and Mythos: adaptive thinking always on (disabled and budget_tokens -> 400), "
        "so a forced tool choice is refused",
        "match": ["claude-fable-", "claude-mythos-"],
        "max_tokens": 128000,
        "capabilities": {
            "thinking": "adaptive",
            "efforts": ["low", "medium", "high", "xhigh", "max"],
            "thinking_off": None,
            "sampling": "never",
            "thinking_display": True,
            "forced_tool_choice": False,
        },
        "overrides": {
            "claude-fable-5": IN_PLACE,
            "claude-fable-5-1": IN_PLACE,
            "claude-fable-5-2": IN_PLACE,
            "claude-mythos-5": IN_PLACE,
            "claude-mythos-5-1": IN_PLACE,
        },
    },
}

# OpenAI: the SDK's ReasoningEffort docstring, developers.openai.com/api/docs/guides/reasoning
# and each model's page ("reasoning_options"): gpt-5 has minimal..high and cannot turn reasoning
# off; gpt-5.1 adds "none" and drops "minimal"; gpt-5.2..5.5 add "xhigh"; gpt-5.6 and gpt-6 add
# "max". Reasoning models reject temperature. prompt_cache_options (mode, ttl) is "Supported for
# gpt-5.6 and later models" (the SDK's CompletionCreateParams / ResponseCreateParams, openai 3.63).
OPENAI: dict[str, dict[str, Any]] = {
    "gpt-4": {
        "doc": "GPT-4.1 / GPT-4o: no reasoning",
        "match": ["gpt-4.1", "gpt-4o"],
        "max_tokens": 32768,
        "capabilities": {"thinking": "none", "max_tokens_field": "max_completion_tokens"},
        "overrides": {"gpt-4o": {"max_tokens": 16384}, "gpt-4o-mini": {"max_tokens": 16384}},
    },
    "o-series": {
        "doc": "o3 / o4-mini: effort low..high, always reasons",
        "match": ["o3", "o4-mini", "o1"],
        "max_tokens": 100000,
        "capabilities": {
            "thinking": "effort",
            "efforts": ["low", "medium", "high"],
            "thinking_off": None,
            "sampling": "never",
            "max_tokens_field": "max_completion_tokens",
        },
    },
    "gpt-5": {
        "doc": "GPT-5 (mini, nano): effort minimal..high, always reasons",
        "match": ["gpt-5-", "gpt-5"],
        "max_tokens": 128000,
        "capabilities": {
            "thinking": "effort",
            "efforts": ["minimal", "low", "medium", "high"],
            "thinking_off": None,
            "sampling": "never",
            "max_tokens_field": "max_completion_tokens",
        },
    },
    "gpt-5.1": {
        "doc": "GPT-5.1: effort none..high (no minimal)",
        "match": ["gpt-5.1"],
        "max_tokens": 128000,
        "capabilities": {
            "thinking": "effort",
            "efforts": ["none", "low", "medium", "high"],
            "thinking_off": "none",
            "sampling": "never",
            "max_tokens_field": "max_completion_tokens",
        },
    },
    "gpt-5.2": {
        "doc": "GPT-5.2 to 5.5: effort none..xhigh",
        "match": ["gpt-5.2", "gpt-5.3", "gpt-5.4", "gpt-5.5"],
        "max_tokens": 128000,
        "capabilities": {
            "thinking": "effort",
            "efforts": ["none", "low", "medium", "high", "xhigh"],
            "thinking_off": "none",
            "sampling": "never",
            "max_tokens_field": "max_completion_tokens",
        },
        "overrides": {
            "gpt-5.4": {"system_messages_in_place": True},
            "gpt-5.4-mini": {"system_messages_in_place": True},
            "gpt-5.5": {"system_messages_in_place": True},
        },
    },
    "gpt-5.6": {
        "doc": "GPT-5.6 and GPT-6: effort none..max; Chat Completions refuses function tools with "
        "reasoning (Responses API recommended)",
        "match": ["gpt-5.6", "gpt-6"],
        "max_tokens": 128000,
        "capabilities": {
            "thinking": "effort",
            "efforts": ["none", "low", "medium", "high", "xhigh", "max"],
            "thinking_off": "none",
            "sampling": "never",
            "max_tokens_field": "max_completion_tokens",
            "chat_tools_with_reasoning": False,
            "prompt_cache_options": True,
            **IN_PLACE,
        },
        # developers.openai.com/api/docs/models/gpt-6.2-sol (read 2026-12-04): "The API rejects
        # requests that set reasoning effort to none"; the same for gpt-6-astra, gpt-6.1-sol and
        # gpt-6.2-astra is taken from the issue report (their pages were not in reach). Always
        # reasoning + no tools with reasoning on Chat Completions = tools need the Responses API.
        "overrides": {
            "gpt-6-astra": {"efforts": ["low", "medium", "high", "xhigh", "max"], "thinking_off": None},
            "gpt-6.1-sol": {"efforts": ["low", "medium", "high", "xhigh", "max"], "thinking_off": None},
            "gpt-6.2-astra": {"efforts": ["low", "medium", "high", "xhigh", "max"], "thinking_off": None},
            "gpt-6.2-sol": {"efforts": ["low", "medium", "high", "xhigh", "max"], "thinking_off": None},
        },
    },
}

# SDK-listed OpenAI ids left out of the catalogue, with the reason (the completeness test
# skips them too): special-purpose models that are not chat/agent models, or that need
# request fields piagent does not send.
OPENAI_EXCLUDED_PREFIXES = {
    "gpt-audio": "audio model",
    "gpt-4o-audio": "audio model",
    "gpt-4o-mini-audio": "audio model",
    "gpt-4o-search": "search model (web search is built in; no tools)",
    "gpt-4o-mini-search": "search model (web search is built in; no tools)",
    "computer-use": "computer-use tool model",
    "o3-deep-research": "deep-research model (background mode)",
    "o4-mini-deep-research": "deep-research model (background mode)",
    "gpt-rosalind": "research model",
    "gpt-daybreak": "preview alias without published controls",
    "gpt-6-rosalind": "research model",
    "gpt-5.6-cyber": "restricted-access model",
    "gpt-6-cyber": "restricted-access model",
    "gpt-6.2-astra-law": "restricted-access model",
    # openai 3.60: Responses-only variants for OpenAI for Healthcare organisations (a BAA);
    # not verified against an OpenAI page (none was in reach on 2026-12-04).
    "gpt-6-astra-healthcare": "restricted-access model (healthcare organisations)",
    "gpt-6.1-sol-healthcare": "restricted-access model (healthcare organisations)",
    "gpt-6.2-astra-healthcare": "restricted-access model (healthcare organisations)",
    "gpt-6.2-sol-healthcare": "restricted-access model (healthcare organisations)",
    "o1-pro": "pro model (background mode, high effort only)",
    "o3-pro": "pro model (background mode, high effort only)",
    "gpt-5-pro": "pro model (high effort only)",
    "gpt-5.5-pro": "pro model (reasoning.mode pro)",
    "gpt-5.2-pro": "pro model (medium effort and up only)",
    "gpt-5.4-pro": "pro model (medium effort and up only)",
    "gpt-5-codex": "Codex model (Responses only, no none/minimal)",
    "gpt-5.1-codex": "Codex model (Responses only, no none/minimal)",
    "gpt-5.1-mini": "not a supported model id (the SDK says so)",
    "gpt-3.5": "legacy model",
    "gpt-4-": "legacy model",
    "chatgpt-": "ChatGPT alias",
    "codex-mini": "Codex model",
}

# Gemini: ai.google.dev/gemini-api/docs/thinking: 2.5 models take thinkingBudget (Flash and
# Flash-Lite accept 0 = off and at most 24576; Pro cannot turn thinking off and takes at most
# 32768: a larger budget is a 400 "thinking_budget is out of range", so their efforts stop at
# the level whose default budget fits); Gemini 3+ take thinkingLevel and cannot turn thinking
# off ("minimal" is the lowest where offered; not on 3.1 Pro, nor on 3.7 / 3.8 Flash, which
# reject it with a 400); 3.5+ reject thinkingBudget. Gemini 3+ require the thought signature of
# a function call in the current turn (ai.google.dev/gemini-api/docs/thought-signatures).
GOOGLE: dict[str, dict[str, Any]] = {
    "gemini-4": {
        "doc": "Gemini 4: thinkingLevel low..xhigh (the SDK's ThinkingLevel has XHIGH), Argon low..high",
        # gemini-4-hydrogen (released 2026-11-12): thinking levels LOW..XHIGH (default HIGH), a
        # 65,536-token segment per request (Google's developer's guide to Gemini 4 Hydrogen,
        # docs.cloud.google.com/gemini-enterprise-agent-platform/models/guides/gemini-4-hydrogen,
        # read 2026-12-04); prices and window: genai-prices 0.2.5. gemini-4-argon: LOW, MEDIUM
        # (default), HIGH only (.../models/guides/gemini-4-argon and ai.google.dev's "latest
        # model" page, read 2026-12-04).
        "models": {"gemini-4-hydrogen": {}, "gemini-4-argon": {"efforts": ["low", "medium", "high"]}},
        "max_tokens": 65536,
        "capabilities": {
            "thinking": "level",
            "efforts": ["low", "medium", "high", "xhigh"],
            "thinking_off": None,
            "thought_signatures": True,
        },
    },
    "gemini-3": {
        "doc": "Gemini 3.x: thinkingLevel, thinking cannot be turned off, thought signatures required",
        "models": {
            "gemini-3.8-flash": {"efforts": ["low", "medium", "high"]},
            "gemini-3.7-flash": {"efforts": ["low", "medium", "high"]},
            "gemini-3.6-flash": {},
            "gemini-3.5-flash": {},
            "gemini-3.5-flash-lite": {},
            "gemini-3.1-pro-preview": {"efforts": ["low", "medium", "high"]},
            "gemini-3.1-flash-lite": {},
            "gemini-3-flash-preview": {},
        },
        "max_tokens": 65536,
        "capabilities": {
            "thinking": "level",
            "efforts": ["minimal", "low", "medium", "high"],
            "thinking_off": None,
            "thought_signatures": True,
        },
    },
    "gemini-2.5": {
        "doc": "Gemini 2.5: thinkingBudget, at most 24576 (Flash, Flash-Lite) or 32768 (Pro)",
        "models": {
            # Shut down on 2026-12-01 (ai.google.dev/gemini-api/docs/deprecations as quoted on
            # 2026-11-10 by aideprecations.com; Google's page itself was not in reach).
            "gemini-2.5-pro": {"shutdown": "2026-12-01"},
            "gemini-2.5-flash": {"shutdown": "2026-12-01"},
            "gemini-2.5-flash-lite": {},
        },
        "max_tokens": 65536,
        "capabilities": {
            "thinking": "budget",
            "efforts": ["minimal", "low", "medium", "high"],
            "thinking_off": "zero_budget",
        },
    },
}

# DeepSeek: api-docs.deepseek.com/guides/thinking_mode (read 2026-12-04): {"thinking": {"type":
# "enabled"|"disabled"}} plus reasoning_effort low/high/max; its own table maps minimal->low,
# medium->high, xhigh->high (not max: effort_map), max->max;
# thinking mode ignores temperature; the API takes max_tokens.
DEEPSEEK: dict[str, dict[str, Any]] = {
    "deepseek-v4": {
        "doc": "DeepSeek V4: thinking switch + reasoning_effort",
        "models": {"deepseek-v4-pro": {"system_messages_in_place": True}, "deepseek-v4-flash": {}},
        "max_tokens": 65536,
        "capabilities": {
            "thinking": "toggle",
            "efforts": ["low", "high", "max"],
            "effort_map": {"xhigh": "high"},
            "thinking_off": "disabled",
            "sampling": "without_thinking",
            "max_tokens_field": "max_tokens",
        },
    },
    "deepseek-legacy": {
        "doc": "deepseek-chat (no thinking) and deepseek-reasoner (always thinks), kept for compatibility",
        "models": {
            "deepseek-chat": {
                "thinking": "none",
                "efforts": [],
                "effort_map": {},
                "sampling": "always",
                "max_tokens": 8192,
            },
            "deepseek-reasoner": {"thinking_off": None},
        },
        "max_tokens": 65536,
        "capabilities": {
            "thinking": "toggle",
            "efforts": ["low", "high", "max"],
            "effort_map": {"xhigh": "high"},
            "thinking_off": "disabled",
            "sampling": "without_thinking",
            "max_tokens_field": "max_tokens",
        },
    },
}

#: Successors named in deprecation warnings (model -> replacement), from each provider's
#: deprecations page (platform.claude.com/docs/en/about-claude/model-deprecations,
#: developers.openai.com/api/docs/deprecations).
SUCCESSORS = {
    "gemini-2.5-pro": "gemini-3.8-flash",
    "gemini-2.5-flash": "gemini-3.5-flash-lite",
    "claude-mythos-preview": "claude-mythos-5",
    "claude-opus-4-5": "claude-opus-4-8",
    "gpt-5": "gpt-5.6-sol",
    "gpt-5-mini": "gpt-5.4-mini",
    "gpt-5-nano": "gpt-5.4-nano",
    "o3": "gpt-5.6-sol",
    "gpt-4.1": "gpt-5.4",
    "gpt-4.1-mini": "gpt-5.4-mini",
    "gpt-4o": "gpt-5.4",
    "gpt-4o-mini": "gpt-5.4-mini",
    "gpt-5.1": "gpt-5.5",
    "gpt-5.4-nano": "gpt-6-luna",
}


#: Prices (USD per million tokens) and windows of models genai-prices lacks (or prices without
#: a window), from the provider's own pages (cited, with the day they were read). ``tiers``: the rates of a request
#: whose input tokens (cached ones included) exceed ``input_tokens_above``, for all its tokens.
PUBLISHED: dict[str, dict[str, Any]] = {
    # platform.claude.com/docs/en/about-claude/pricing (read 2026-12-04): Mythos 5 and 5.1
    # share Fable's prices; models/fable-5/overview: 1M window.
    "claude-mythos-5-1": {
        "cost": {"input": 10.0, "output": 50.0, "cache_read": 0.25, "cache_write": 12.5, "cache_write_1h": 20.0},
        "context_window": 1000000,
    },
    "claude-mythos-5": {
        "cost": {"input": 10.0, "output": 50.0, "cache_read": 1.0, "cache_write": 12.5, "cache_write_1h": 20.0},
        "context_window": 1000000,
    },
    # ai.google.dev/gemini-api/docs/models/gemini-3.1-pro-preview (read 2026-12-04): input token
    # limit 1,048,576 (genai-prices 0.2.5 prices it, with its 200K tier, but gives no window).
    "gemini-3.1-pro-preview": {"context_window": 1048576},
}


# Other providers (OpenAI-compatible servers): kept by hand, no SDK lists them. Each row:
# (id, name, context_window, max_tokens, (input, output, cache_read, cache_write) USD per
# million tokens, reasoning, vision). Their models are driven by ``model.compat`` and the
# server's defaults (no capabilities table).
OTHER_PROVIDERS = {
    "groq": [
        ("llama-3.3-70b-versatile", "Llama 3.3 70B Versatile", 131072, 32768, (0.59, 0.79, 0.0, 0.0), False, False),
        ("llama-3.1-8b-instant", "Llama 3.1 8B Instant", 131072, 8192, (0.05, 0.08, 0.0, 0.0), False, False),
        ("openai/gpt-oss-120b", "GPT OSS 120B", 131072, 65536, (0.15, 0.75, 0.0, 0.0), True, False),
        ("openai/gpt-oss-20b", "GPT OSS 20B", 131072, 65536, (0.1, 0.5, 0.0, 0.0), True, False),
        ("qwen/qwen3-32b", "Qwen3 32B", 131072, 40960, (0.29, 0.59, 0.0, 0.0), True, False),
        ("moonshotai/kimi-k2-instruct", "Kimi K2 Instruct", 131072, 16384, (1.0, 3.0, 0.0, 0.0), False, False),
    ],
    "openrouter": [
        ("openai/gpt-4o-mini", "OpenAI: GPT-4o mini", 128000, 16384, (0.15, 0.6, 0.075, 0.0), False, True),
        ("openai/gpt-4.1", "OpenAI: GPT-4.1", 1047576, 32768, (2.0, 8.0, 0.5, 0.0), False, True),
        ("anthropic/claude-sonnet-4", "Anthropic: Claude Sonnet 4", 200000, 64000, (3.0, 15.0, 0.3, 3.75), True, True),
        ("google/gemini-2.5-flash", "Google: Gemini 2.5 Flash", 1048576, 65536, (0.3, 2.5, 0.075, 0.0), True, True),
        ("google/gemini-2.5-pro", "Google: Gemini 2.5 Pro", 1048576, 65536, (1.25, 10.0, 0.31, 0.0), True, True),
        ("deepseek/deepseek-chat", "DeepSeek: DeepSeek V3", 128000, 8192, (0.3, 0.85, 0.0, 0.0), False, False),
        (
            "meta-llama/llama-3.3-70b-instruct",
            "Meta: Llama 3.3 70B Instruct",
            131072,
            16384,
            (0.13, 0.4, 0.0, 0.0),
            False,
            False,
        ),
    ],
    "xai": [
        ("grok-4", "Grok 4", 256000, 64000, (3.0, 15.0, 0.75, 0.0), True, True),
        ("grok-code-fast-1", "Grok Code Fast 1", 256000, 10000, (0.2, 1.5, 0.02, 0.0), True, False),
        ("grok-3", "Grok 3", 131072, 8192, (3.0, 15.0, 0.75, 0.0), False, False),
        ("grok-3-mini", "Grok 3 Mini", 131072, 8192, (0.3, 0.5, 0.075, 0.0), True, False),
    ],
    "mistral": [
        ("mistral-large-latest", "Mistral Large", 131072, 16384, (2.0, 6.0, 0.0, 0.0), False, False),
        ("mistral-medium-latest", "Mistral Medium", 131072, 16384, (0.4, 2.0, 0.0, 0.0), False, True),
        ("mistral-small-latest", "Mistral Small", 131072, 16384, (0.1, 0.3, 0.0, 0.0), False, True),
        ("codestral-latest", "Codestral", 256000, 16384, (0.3, 0.9, 0.0, 0.0), False, False),
        ("magistral-medium-latest", "Magistral Medium", 40000, 16384, (2.0, 5.0, 0.0, 0.0), True, False),
    ],
    "cerebras": [
        ("gpt-oss-120b", "GPT OSS 120B", 131072, 32768, (0.25, 0.69, 0.0, 0.0), True, False),
        ("llama-3.3-70b", "Llama 3.3 70B", 128000, 8192, (0.85, 1.2, 0.0, 0.0), False, False),
    ],
    "local": [
        ("smollm2-135m", "SmolLM2 135M Instruct (embedded)", 8192, 512, (0.0, 0.0, 0.0, 0.0), False, False),
    ],
}
