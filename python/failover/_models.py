"""What a call returns: Response, Usage, Attempt."""

from __future__ import annotations

from . import _native
from ._attempt import Attempt, _attempts, _Totals, answering_cost
from ._checks import utf8_text
from ._exceptions import ConfigurationError
from ._record import Record
from ._usage import Usage

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    import typing
else:
    from . import _typing as typing


class _Costs(_Totals):
    """What a result's attempts used and cost, and the answering attempt's cost."""

    __slots__ = ()

    @property
    def cost(self) -> float | None:
        """USD of the attempt that answered (``None`` without a price or usage)."""
        return answering_cost(self.attempts)


class Tool(Record):
    """A tool the model may call: ``parameters`` is a JSON schema of its
    arguments (an object schema; ``None``: no arguments)."""

    __slots__ = ("name", "description", "parameters")
    name: str
    description: str | None
    parameters: dict[str, typing.Any] | None

    def __init__(
        self,
        name: str,
        description: str | None = None,
        parameters: dict[str, typing.Any] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"a Tool needs a name (a non-empty str), got {name!r}")
        utf8_text("a Tool's name", name)
        problem = _native.tool_name_problem(name)
        if problem is not None:
            raise ConfigurationError(problem)
        if description is not None and not isinstance(description, str):
            raise ConfigurationError(f"Tool {name!r}: description must be a str")
        if parameters is not None and not isinstance(parameters, dict):
            raise ConfigurationError(
                f"Tool {name!r}: parameters must be a JSON schema (a dict), got {parameters!r}"
            )
        problem = _native.json_problem(parameters) if parameters is not None else None
        if problem is not None:
            raise ConfigurationError(f"Tool {name!r}: parameters cannot be sent as JSON: {problem}")
        self._init(name=name, description=description, parameters=parameters)

    def _wire(self) -> dict[str, typing.Any]:
        tool: dict[str, typing.Any] = {"name": self.name}
        if self.description is not None:
            tool["description"] = self.description
        if self.parameters is not None:
            tool["parameters"] = self.parameters
        return tool


class ToolCall(Record):
    """A call the model made: ``arguments`` parsed (``None`` when the model
    wrote arguments that are not JSON; ``arguments_json`` keeps them as
    written)."""

    __slots__ = ("id", "name", "arguments", "arguments_json")
    id: str
    name: str
    arguments: typing.Any | None
    arguments_json: str

    def __init__(
        self, id: str, name: str, arguments: typing.Any | None, arguments_json: str
    ) -> None:
        self._init(id=id, name=name, arguments=arguments, arguments_json=arguments_json)

    def __hash__(self) -> int:  # arguments may be a dict
        return hash((self.id, self.name, self.arguments_json))


def _tool_calls(raw: typing.Any) -> tuple[ToolCall, ...]:
    """``_native.ToolCallData`` objects -> ``ToolCall`` values."""
    if not raw:
        return ()
    import json

    calls = []
    for c in raw:
        try:
            arguments = json.loads(c.arguments_json)
        except ValueError:
            arguments = None
        calls.append(ToolCall(c.id, c.name, arguments, c.arguments_json))
    return tuple(calls)


class Response(_Costs):
    """The answer of a call, with where it came from and what it took (and,
    with prices, what it cost: ``cost``, ``total_cost``, ``total_usage``)."""

    __slots__ = (
        "_provider_data",
        "_raw_body",
        "_raw_json",
        "attempts",
        "call_id",
        "finish_reason",
        "model",
        "provider",
        "request_id",
        "text",
        "time_to_first_token",
        "tool_calls",
        "usage",
    )

    text: str
    provider: str
    """The configured name of the provider that answered."""
    model: str | None
    """The model the provider reports."""
    finish_reason: str | None
    usage: Usage
    attempts: tuple[Attempt, ...]
    request_id: str | None
    call_id: str
    tool_calls: tuple[ToolCall, ...]
    """The calls the model made, in order (``finish_reason == "tool_calls"``)."""
    time_to_first_token: float | None
    """Seconds from the call to its first content chunk (streams only)."""

    def __init__(self, data: typing.Any, pricing: typing.Any = None) -> None:
        """Built from the engine's ``_native.ResponseData``, priced by ``pricing``."""
        self.text = data.text
        self.provider = data.provider
        self.model = data.model
        self.finish_reason = data.finish_reason
        self.usage = Usage(
            data.input_tokens,
            data.output_tokens,
            data.cache_read_tokens,
            data.cache_write_tokens,
            data.reasoning_tokens,
        )
        attempts = _attempts(data.attempts)
        self.attempts = attempts if pricing is None else pricing.attempts(attempts, False)
        self.tool_calls = _tool_calls(data.tool_calls)
        self._provider_data: str | None = data.provider_data
        self.request_id = data.request_id
        self._raw_body = data.raw
        self.call_id = data.call_id
        self._raw_json: typing.Any = None
        self.time_to_first_token = None

    @property
    def raw(self) -> typing.Any:
        """The provider's response body, parsed (on first access)."""
        if self._raw_json is None:
            import json

            self._raw_json = json.loads(self._raw_body)
        return self._raw_json

    @property
    def message(self) -> dict[str, typing.Any]:
        """The assistant's turn as an OpenAI-style message, to append to the
        history as it is, whichever provider answered."""
        message: dict[str, typing.Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments_json},
                }
                for c in self.tool_calls
            ]
        elif message["content"] is None:
            message["content"] = ""
        if self._provider_data is not None:
            # Opaque extras the same provider needs back (Anthropic's signed
            # thinking blocks); other providers ignore them.
            import json

            message["provider_data"] = json.loads(self._provider_data)
        return message

    def json(self) -> typing.Any:
        """``text`` parsed as JSON (after asking for JSON output)."""
        import json

        return json.loads(self.text)

    def __repr__(self) -> str:
        text = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return (
            f"Response(provider={self.provider!r}, model={self.model!r}, text={text!r}, "
            f"finish_reason={self.finish_reason!r}, attempts={len(self.attempts)})"
        )


class Embeddings(_Costs):
    """The vectors of an ``embed()`` call, one per text in input order, with
    where they came from. Vectors of different models differ in length and
    meaning: ``model`` says which answered."""

    __slots__ = ("attempts", "call_id", "model", "provider", "request_id", "usage", "vectors")

    vectors: list[list[float]]
    provider: str
    """The configured name of the provider that answered."""
    model: str | None
    """The model the provider reports, else the one asked for."""
    usage: Usage
    attempts: tuple[Attempt, ...]
    request_id: str | None
    call_id: str

    def __init__(self, data: typing.Any, pricing: typing.Any = None) -> None:
        """Built from the engine's ``_native.EmbeddingsData``, priced by ``pricing``."""
        self.vectors = data.vectors
        self.provider = data.provider
        self.model = data.model
        self.usage = Usage(data.input_tokens)
        attempts = _attempts(data.attempts)
        self.attempts = attempts if pricing is None else pricing.attempts(attempts, True)
        self.request_id = data.request_id
        self.call_id = data.call_id

    def __len__(self) -> int:
        return len(self.vectors)

    def __repr__(self) -> str:
        width = len(self.vectors[0]) if self.vectors else 0
        return (
            f"Embeddings(provider={self.provider!r}, model={self.model!r}, "
            f"vectors={len(self.vectors)}x{width}, attempts={len(self.attempts)})"
        )
