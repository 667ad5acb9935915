"""A base for small immutable values, lighter to import than dataclasses
(which pulls in ``inspect``): ``import failover`` stays cheap."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (5 ms)

if TYPE_CHECKING:
    from typing import Any


class Record:
    """Immutable, compared and hashed by its ``__slots__`` fields, with a repr."""

    __slots__ = ()

    def _init(self, **fields: Any) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def _fields(self) -> tuple[Any, ...]:
        names: tuple[str, ...] = self.__slots__
        return tuple(getattr(self, name) for name in names)

    def __reduce__(self) -> tuple[Any, ...]:
        # Unpickling and copying build a new value through __init__
        # (setattr is refused), by keyword, whatever the field order.
        names: tuple[str, ...] = self.__slots__
        return (_rebuild, (type(self), dict(zip(names, self._fields()))))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._fields()))

    def __repr__(self) -> str:
        names: tuple[str, ...] = self.__slots__
        body = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__name__}({body})"


def _rebuild(cls: type[Record], fields: dict[str, Any]) -> Record:
    return cls(**fields)
