"""``typing``, imported the first time one of its names is read.

``import typing`` costs more than the rest of ``import failover`` (on 3.11 it
pulls in ``re``, ``collections``, ``contextlib`` and ``functools``), yet the
package needs its names only when something resolves an annotation: the
annotations are strings (``from __future__ import annotations``), and
``typing.get_type_hints`` reads ``typing.Any`` in them through this module,
which imports ``typing`` then. A module binds it as ``typing`` at runtime and
the real module under ``TYPE_CHECKING``::

    TYPE_CHECKING = False
    if TYPE_CHECKING:
        import typing
    else:
        from . import _typing as typing
"""

from __future__ import annotations


def __getattr__(name: str) -> object:
    import typing

    return getattr(typing, name)
