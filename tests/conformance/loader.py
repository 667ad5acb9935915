"""The recorded provider traffic, read into ``Recording`` values.

Every cassette under ``<repo>/../shared/fixtures/recorded/`` (ten provider folders; where each
came from is in that folder's SOURCES.md) is read in place, never copied into this repository:
Ruby VCR and vcrpy YAML (``!binary`` scalars, gzipped bodies, the older httpx serialisation),
pydantic-ai's ``parsed_body`` cassettes and the JSON extracts. Each interaction is classified by
its endpoint into a wire and a kind (chat or embed), or given the reason it is not replayed; the
selections the suites parametrize over (``RECORDINGS``, ``STREAMS``, ``SUCCESSES``, ...) and the
strict-xfail table of known discrepancies live here too. When the folder is absent every module
that imports this one skips.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

RECORDED = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "recorded"
if not RECORDED.is_dir():
    pytest.skip(
        f"recorded provider traffic not found at {RECORDED} (expected a shared/ folder beside "
        "the repository, see DESIGN.md §5)",
        allow_module_level=True,
    )

yaml = pytest.importorskip("yaml", reason="PyYAML is needed to read the VCR cassettes")

FOLDERS = (
    "anthropic",
    "azure",
    "deepseek",
    "gemini",
    "groq",
    "mistral",
    "ollama",
    "openai",
    "openrouter",
    "xai",
)
# Hop-by-hop or transport-level headers: MockServer frames the body itself.
DROPPED_HEADERS = frozenset(
    {"transfer-encoding", "content-length", "content-encoding", "connection", "keep-alive"}
)

# Why an interaction is not replayed (the skips, with these reasons).
RESPONSES_API = "OpenAI's Responses API (/v1/responses): not an API the contract covers (DESIGN §5)"
FILE_SEARCH = "Gemini File Search store management (create, upload, delete): not a model call"
MEDIA = "image generation, speech or transcription: replayed by test_media.py"
UNRECOGNISED = "unrecognised endpoint"


class _CassetteLoader(yaml.SafeLoader):
    """SafeLoader that also reads Ruby VCR's ``!binary`` (base64) scalars."""


def _binary(loader: yaml.SafeLoader, node: yaml.Node) -> bytes:
    return base64.b64decode(loader.construct_scalar(node))  # type: ignore[arg-type]


_CassetteLoader.add_constructor("!binary", _binary)


@dataclass(frozen=True)
class Recording:
    """One recorded request/response pair, normalised across the cassette formats."""

    rel: str  # path relative to RECORDED
    index: int  # interaction index inside the file
    folder: str  # top-level folder: the provider family
    method: str  # upper-case
    uri: str
    request_json: Any
    request_header_names: tuple[str, ...]  # lower-cased; empty when the recorder dropped them
    status: int
    headers: tuple[tuple[str, str], ...]  # every recorded header value, names as recorded
    body: bytes  # decoded (gunzipped) body bytes
    wire: str  # "openai", "anthropic", "gemini", "ollama"; "" when not replayed
    kind: str  # "chat" or "embed"; "" when not replayed
    skip: str | None  # why it is not replayed, or None
    streaming: bool  # a streamed answer (SSE / NDJSON), replayed through client.stream()

    @property
    def id(self) -> str:
        return f"{self.rel}#{self.index}"

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    @property
    def playback_headers(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self.headers if k.lower() not in DROPPED_HEADERS]

    @property
    def date(self) -> float | None:
        """The recorded Date header as Unix seconds, or None."""
        value = self.header("date")
        return parsedate_to_datetime(value).timestamp() if value else None

    @property
    def path(self) -> str:
        return urlsplit(self.uri).path

    @property
    def model(self) -> str:
        """The model the recorded request asked for: the body's ``model``, or Gemini's
        ``/models/{model}:method`` path segment."""
        model = (self.request_json or {}).get("model")
        if isinstance(model, str) and model:
            return model
        last = self.path.rsplit("/", 1)[-1]
        if ":" in last:
            return last.split(":", 1)[0]
        return "recorded-model"

    @property
    def body_json(self) -> Any:
        return json.loads(self.body)


def _as_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8")


def _request_json(request: dict[str, Any]) -> Any:
    if "parsed_body" in request:
        return request["parsed_body"]
    body = request.get("body")
    raw = body.get("string") if isinstance(body, dict) else body
    raw = _as_bytes(raw)
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _status(response: dict[str, Any]) -> int:
    if "status_code" in response:  # vcrpy's older httpx serialisation (dd-trace-py's v1/)
        return int(response["status_code"])
    return int(response["status"]["code"])


def _response_body(response: dict[str, Any], headers: list[tuple[str, str]]) -> bytes:
    if "parsed_body" in response:  # pydantic-ai serialiser: JSON rewritten as YAML
        return json.dumps(response["parsed_body"]).encode("utf-8")
    if "content" in response and "body" not in response:  # older httpx: the decoded body
        return _as_bytes(response["content"])
    body = response.get("body")
    raw = _as_bytes(body.get("string") if isinstance(body, dict) else body)
    gzipped = any(k.lower() == "content-encoding" and "gzip" in v.lower() for k, v in headers)
    if gzipped or raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw


def _header_pairs(headers: Any) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for name, values in (headers or {}).items():
        for value in values if isinstance(values, list) else [values]:
            pairs.append((str(name), str(value)))
    return pairs


def _load(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)  # type: ignore[no-any-return]
    return yaml.load(text, Loader=_CassetteLoader)  # type: ignore[no-any-return]


def _is_streaming(uri: str, request_json: Any, headers: list[tuple[str, str]]) -> bool:
    if isinstance(request_json, dict) and request_json.get("stream") is True:
        return True
    if ":streamGenerateContent" in uri:
        return True
    return any(
        k.lower() == "content-type" and ("text/event-stream" in v or "ndjson" in v)
        for k, v in headers
    )


def _classify(folder: str, path: str) -> tuple[str, str, str | None]:
    """(wire, kind, why not replayed) of an interaction, from its endpoint."""
    if folder == "anthropic" and path.endswith("/v1/messages"):
        return "anthropic", "chat", None
    if path.endswith("/chat/completions"):
        return "openai", "chat", None  # also ollama.com's OpenAI-compatible /v1
    if path.endswith("/embeddings"):
        return "openai", "embed", None
    if path.endswith((":generateContent", ":streamGenerateContent")):
        return "gemini", "chat", None
    if path.endswith(":batchEmbedContents"):
        return "gemini", "embed", None
    if path == "/api/chat":
        return "ollama", "chat", None
    if path == "/api/embed":
        return "ollama", "embed", None
    if path.endswith("/v1/responses"):
        return "", "", RESPONSES_API
    if "/images/" in path or "/audio/" in path:
        return "", "", MEDIA
    if "/fileSearchStores" in path:
        return "", "", FILE_SEARCH
    return "", "", UNRECOGNISED


def _mime(blob: dict[str, Any]) -> str:
    return str(blob.get("mimeType") or blob.get("mime_type") or "")


def _gemini_media(request_json: Any) -> bool:
    """A generateContent call that asks for images or speech, or sends audio to transcribe."""
    if not isinstance(request_json, dict):
        return False
    config = request_json.get("generationConfig") or {}
    if {"IMAGE", "AUDIO"} & {str(m).upper() for m in config.get("responseModalities") or []}:
        return True
    return any(
        str(_mime(part.get("inlineData") or part.get("inline_data") or {}))
        .lower()
        .startswith("audio/")
        for content in request_json.get("contents") or []
        for part in (content.get("parts") or [] if isinstance(content, dict) else [])
        if isinstance(part, dict)
    )


def _recordings() -> Iterator[Recording]:
    for path in sorted(RECORDED.rglob("*")):
        if path.suffix not in (".yml", ".yaml", ".json") or not path.is_file():
            continue
        rel = path.relative_to(RECORDED).as_posix()
        folder = rel.split("/", 1)[0]
        if folder not in FOLDERS:
            continue
        data = _load(path)
        interactions = data.get("http_interactions") or data.get("interactions") or []
        for index, interaction in enumerate(interactions):
            request, response = interaction["request"], interaction["response"]
            uri = str(request["uri"])
            headers = _header_pairs(response.get("headers"))
            request_json = _request_json(request)
            wire, kind, skip = _classify(folder, urlsplit(uri).path)
            if wire == "gemini" and _gemini_media(request_json):
                wire, kind, skip = "", "", MEDIA
            yield Recording(
                rel=rel,
                index=index,
                folder=folder,
                method=str(request.get("method", "")).upper(),
                uri=uri,
                request_json=request_json,
                request_header_names=tuple(str(k).lower() for k in request.get("headers") or {}),
                status=_status(response),
                headers=tuple(headers),
                body=_response_body(response, headers),
                wire=wire,
                kind=kind,
                skip=skip,
                streaming=_is_streaming(uri, request_json, headers),
            )


ALL = list(_recordings())
RECORDINGS = [r for r in ALL if r.skip is None and not r.streaming]
STREAMS = [r for r in ALL if r.skip is None and r.streaming]
NOT_REPLAYED = [r for r in ALL if r.skip is not None]

SUCCESSES = [r for r in RECORDINGS if r.kind == "chat" and r.status == 200]
EMBEDDINGS = [r for r in RECORDINGS if r.kind == "embed" and r.status == 200]
ERRORS = [r for r in RECORDINGS if r.status != 200]

# The aspects a test checks, for KNOWN_DISCREPANCIES.
ASPECTS = (
    "request",
    "response",
    "usage",
    "error",
    "embeddings",
    "vectors",
    "stream-request",
    "stream-response",
    "stream-usage",
    "stream-error",
    "stream-error-class",
    "stream-framing",
)

# Cases where failover's behaviour is wrong per DESIGN.md: (aspect, id) -> reason (strict xfail
# of the tests of that aspect for that recording, so every other aspect is still checked).
KNOWN_DISCREPANCIES: dict[tuple[str, str], str] = {}


def params(recordings: list[Recording], aspect: str) -> list[Any]:
    params = []
    for rec in recordings:
        marks = []
        reason = KNOWN_DISCREPANCIES.get((aspect, rec.id))
        if reason is not None:
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        params.append(pytest.param(rec, id=rec.id, marks=marks))
    return params
