# Stubs for the private native module (hand-written, checked by stubtest).
from collections.abc import Awaitable, Callable
from typing import Any, final

__all__ = [
    "NativeClient",
    "NativeMockServer",
    "VirtualClock",
    "__version__",
    "is_credential_header",
    "retry_after",
]

__version__: str

def retry_after(
    headers: list[tuple[str, str]], body: str | None = None, now: float | None = None
) -> float | None: ...
def is_credential_header(name: str) -> bool: ...

_ProviderTuple = tuple[str, str, str, str, str | None, list[tuple[str, str]], list[int], str]
_PolicyTuple = tuple[str, int, int, float, float, tuple[float, float, float, float], float | None]

@final
class NativeClient:
    def __new__(
        cls,
        providers: list[_ProviderTuple],
        connect_timeout: float,
        emit: Callable[[str, tuple[Any, ...]], None],
    ) -> NativeClient: ...
    def prompt(self, args: tuple[Any, ...]) -> tuple[Any, ...]: ...
    def prompt_async(self, args: tuple[Any, ...]) -> Awaitable[tuple[Any, ...]]: ...

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
