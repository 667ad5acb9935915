# Stubs for the private native module (hand-written, checked by stubtest).
# The seam: failover._seam's classes go in (read by attribute), the classes
# below come out.
from collections.abc import Awaitable, Callable
from typing import Any, final

from ._seam import CallArgs, ProviderSpec, TransportSpec

__all__ = [
    "DEFAULT_STOP_ON",
    "ERROR_KINDS",
    "MAX_SECONDS",
    "PROXY_VARIABLES",
    "AttemptData",
    "NativeClient",
    "NativeMockServer",
    "NativePolicy",
    "ResponseData",
    "ToolCallData",
    "VirtualClock",
    "__version__",
    "check_base_url",
    "check_header",
    "is_credential_header",
    "retry_after",
    "url_parts",
]

__version__: str
MAX_SECONDS: float
ERROR_KINDS: tuple[str, ...]
DEFAULT_STOP_ON: tuple[str, ...]
PROXY_VARIABLES: tuple[str, ...]

def retry_after(
    headers: list[tuple[str, str]], body: str | None = None, now: float | None = None
) -> float | None: ...
def is_credential_header(name: str) -> bool: ...
def check_base_url(url: str) -> str | None: ...
def check_header(name: str, value: str) -> str | None: ...
def url_parts(url: str) -> tuple[str, str, int | None, str, bool, bool] | None: ...

@final
class NativePolicy:
    def __new__(
        cls,
        *,
        preset: str,
        max_retries: int,
        max_retries_last: int,
        max_retry_after: float,
        max_retry_after_last: float,
        backoff_initial: float,
        backoff_multiplier: float,
        backoff_max: float,
        backoff_jitter: float,
        max_interval: float | None,
        stop_on: list[str],
    ) -> NativePolicy: ...
    @property
    def stop_on(self) -> list[str]: ...

@final
class AttemptData:
    @property
    def provider(self) -> str: ...
    @property
    def status(self) -> int | None: ...
    @property
    def kind(self) -> str | None: ...
    @property
    def waited(self) -> float: ...
    @property
    def duration(self) -> float: ...
    @property
    def skipped(self) -> str | None: ...

@final
class ToolCallData:
    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def arguments_json(self) -> str: ...

@final
class ResponseData:
    @property
    def text(self) -> str: ...
    @property
    def provider(self) -> str: ...
    @property
    def model(self) -> str | None: ...
    @property
    def finish_reason(self) -> str | None: ...
    @property
    def input_tokens(self) -> int | None: ...
    @property
    def output_tokens(self) -> int | None: ...
    @property
    def cache_read_tokens(self) -> int | None: ...
    @property
    def cache_write_tokens(self) -> int | None: ...
    @property
    def reasoning_tokens(self) -> int | None: ...
    @property
    def attempts(self) -> list[AttemptData]: ...
    @property
    def tool_calls(self) -> list[ToolCallData]: ...
    @property
    def request_id(self) -> str | None: ...
    @property
    def raw(self) -> str: ...
    @property
    def call_id(self) -> str: ...

@final
class NativeClient:
    def __new__(
        cls,
        *,
        providers: list[ProviderSpec],
        transport: TransportSpec,
        emit: Callable[[str, dict[str, Any]], None],
    ) -> NativeClient: ...
    def prompt(self, args: CallArgs) -> ResponseData: ...
    def prompt_async(self, args: CallArgs) -> Awaitable[ResponseData]: ...
    def close(self) -> None: ...
    @property
    def is_closed(self) -> bool: ...

@final
class VirtualClock:
    def __new__(cls) -> VirtualClock: ...
    @property
    def sleeps(self) -> list[float]: ...
    def time(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...
    def clear(self) -> None: ...

@final
class NativeMockServer:
    def __new__(cls) -> NativeMockServer: ...
    @property
    def url(self) -> str: ...
    def push(
        self,
        status: int,
        headers: list[tuple[str, str]],
        body: bytes,
        sse: list[str] | None,
        delay: float,
        fault: str | None,
    ) -> None: ...
    def requests(self) -> list[tuple[str, str, list[tuple[str, str]], bytes]]: ...
    @property
    def pending(self) -> int: ...
    def pending_statuses(self) -> list[int]: ...
    def close(self) -> None: ...
