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


class Image(Record):
    """One generated image: its bytes (``None`` when only its URL was asked
    for), its media type as the bytes show it, the provider's URL if it gave
    one, and the prompt the model actually used, where it rewrote it."""

    __slots__ = ("data", "media_type", "url", "revised_prompt")
    data: bytes | None
    media_type: str | None
    url: str | None
    revised_prompt: str | None

    def __init__(
        self,
        data: bytes | None,
        media_type: str | None = None,
        url: str | None = None,
        revised_prompt: str | None = None,
    ) -> None:
        self._init(data=data, media_type=media_type, url=url, revised_prompt=revised_prompt)

    def __repr__(self) -> str:
        size = "None" if self.data is None else f"<{len(self.data)} bytes>"
        return f"Image(data={size}, media_type={self.media_type!r}, url={self.url!r})"


class _MediaResult(_Costs):
    """What every media result has: where it came from and what it cost."""

    __slots__ = ("attempts", "call_id", "model", "provider", "request_id", "usage")

    provider: str
    """The configured name of the provider that answered."""
    model: str | None
    """The model the provider reports, else the one asked for."""
    usage: Usage
    attempts: tuple[Attempt, ...]
    request_id: str | None
    call_id: str

    def _read(self, data: typing.Any, pricing: typing.Any) -> None:
        self.provider = data.provider
        self.model = data.model
        self.usage = Usage(data.input_tokens, data.output_tokens)
        attempts = _attempts(data.attempts)
        self.attempts = attempts if pricing is None else pricing.attempts(attempts, False)
        self.request_id = data.request_id
        self.call_id = data.call_id


class ImageResponse(_MediaResult):
    """The images of a ``generate_image()`` call, in order; ``data`` is the
    first one's bytes."""

    __slots__ = ("images",)
    images: list[Image]

    def __init__(self, data: typing.Any, pricing: typing.Any = None) -> None:
        """Built from the engine's ``_native.MediaData``, priced by ``pricing``."""
        self.images = [Image(b, t, u, r) for b, u, t, r in data.images]
        self._read(data, pricing)

    @property
    def data(self) -> bytes | None:
        """The first image's bytes."""
        return self.images[0].data

    def __repr__(self) -> str:
        return (
            f"ImageResponse(provider={self.provider!r}, model={self.model!r}, "
            f"images={len(self.images)}, attempts={len(self.attempts)})"
        )


class SpeechResponse(_MediaResult):
    """The audio of a ``speak()`` call, whole, and its media type
    (``audio/mpeg`` for ``format="mp3"``)."""

    __slots__ = ("data", "media_type")
    data: bytes
    media_type: str

    def __init__(self, data: typing.Any, pricing: typing.Any = None) -> None:
        """Built from the engine's ``_native.MediaData``, priced by ``pricing``."""
        self.data = data.audio
        self.media_type = data.media_type
        self._read(data, pricing)

    def __repr__(self) -> str:
        return (
            f"SpeechResponse(provider={self.provider!r}, model={self.model!r}, "
            f"data=<{len(self.data)} bytes>, media_type={self.media_type!r})"
        )


class Segment(Record):
    """A piece of a transcript and when it is said, in seconds from the start."""

    __slots__ = ("start", "end", "text")
    start: float
    end: float
    text: str

    def __init__(self, start: float, end: float, text: str) -> None:
        self._init(start=start, end=end, text=text)


class Transcription(_MediaResult):
    """The text of a ``transcribe()`` call; ``language``, ``duration``
    (seconds) and ``segments`` where the provider reports them (OpenAI's
    ``whisper-1`` with ``response_format="verbose_json"``), else ``None`` and
    ``[]``. With ``"text"``, ``"srt"`` or ``"vtt"``, ``text`` is the body as
    the provider wrote it."""

    __slots__ = ("duration", "language", "segments", "text")
    text: str
    language: str | None
    duration: float | None
    segments: list[Segment]

    def __init__(self, data: typing.Any, pricing: typing.Any = None) -> None:
        """Built from the engine's ``_native.MediaData``, priced by ``pricing``."""
        self.text = data.text
        self.language = data.language
        self.duration = data.duration
        self.segments = [Segment(*s) for s in data.segments]
        self._read(data, pricing)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return (
            f"Transcription(provider={self.provider!r}, model={self.model!r}, "
            f"text={self.text[:40]!r}, attempts={len(self.attempts)})"
        )
