"""AgentOptions: every option defined once (docs/architecture.md#adding-an-agent-option)."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from piagent import Agent, AgentOptions, UserMessage
from piagent._options import Option
from piagent.ai import StreamOptions
from piagent.testing import faux_message, register_faux_provider


def test_agent_options_validate_on_their_own_like_the_agent() -> None:
    options = AgentOptions(model=None, max_turns=3, tools=())
    assert (options.max_turns, options.tools, options.model.api) == (3, [], "unknown")
    with pytest.raises(ValueError, match="max_turns"):
        AgentOptions(max_turns=0)
    with pytest.raises(ValueError, match="steering_mode"):
        options.steering_mode = "some"  # type: ignore[assignment]  # the point: a bad value
    assert options.steering_mode == "one-at-a-time"  # the previous value stays
    with pytest.raises(TypeError, match="AgentOptions\\(\\) got an unexpected keyword argument 'nope'"):
        AgentOptions(nope=1)  # type: ignore[call-arg]  # the point: not an option


def test_every_option_is_an_agent_keyword_and_attribute_with_its_documented_default() -> None:
    agent = Agent()
    for name, option in AgentOptions.options().items():
        assert option.__doc__, f"{name} has no doc"
        assert getattr(agent, name) == option.check(name, option.default)
    assert len(AgentOptions.options()) >= 30


def test_options_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        Agent("a system prompt")  # type: ignore[misc]  # the point: positional


def test_a_snapshot_copies_lists_and_dicts_and_does_not_follow_later_changes() -> None:
    agent = Agent(thinking_budgets={"low": 10}, tool_choice={"name": "t"})
    snapshot = agent.snapshot()
    assert type(snapshot) is AgentOptions
    assert snapshot.messages is not agent.messages and snapshot.thinking_budgets is not agent.thinking_budgets
    agent.messages.append(UserMessage("later"))
    agent.max_turns = 7
    assert snapshot.messages == [] and snapshot.max_turns is None


def test_adding_an_option_is_one_line_and_a_loop_field_of_that_name_receives_it() -> None:
    """``metadata`` is a StreamOptions field that Agent has no option for: one Option line on a
    subclass makes it a validated keyword whose value reaches the model call."""

    def dict_or_none(name: str, value: Any) -> Optional[dict[str, Any]]:
        if value is not None and not isinstance(value, dict):
            raise TypeError(f"{name} must be a dict or None")
        return value

    class TaggedAgent(Agent):
        metadata: Option[Optional[dict[str, Any]], Optional[dict[str, Any]]] = Option(
            default=None, check=dict_or_none, doc="Sent with every model call."
        )

    faux = register_faux_provider()
    seen: list[StreamOptions] = []
    try:

        def stream_fn(model: Any, context: Any, options: StreamOptions) -> Any:
            seen.append(options)
            return faux.stream(model, context, options)

        faux.set_responses([faux_message("hi")])
        agent = TaggedAgent(model=faux.get_model(), metadata={"user_id": "u-1"}, stream_fn=stream_fn)
        with pytest.raises(TypeError, match="metadata"):
            agent.metadata = "not a dict"  # type: ignore[assignment]  # the point: a bad value
        assert agent.prompt("Hello").text == "hi"
    finally:
        faux.unregister()
    assert seen[0].metadata == {"user_id": "u-1"}
    assert list(TaggedAgent.options())[-1] == "metadata" and "metadata" not in Agent.options()


def test_the_thinking_level_type_lists_exactly_the_levels_the_agent_accepts() -> None:
    from typing_extensions import get_args

    from piagent.ai.capabilities import THINKING_LEVELS as MODEL_LEVELS
    from piagent.state import THINKING_LEVELS
    from piagent.types import ThinkingLevel

    assert get_args(ThinkingLevel) == THINKING_LEVELS == ("off", *MODEL_LEVELS)
