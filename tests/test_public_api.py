"""The public API: every public signature resolves under typing.get_type_hints."""

from __future__ import annotations

import typing

import pytest

import failover


def _public_callables() -> list[object]:
    import inspect

    import failover.testing

    found: list[object] = []
    names = [getattr(failover, n) for n in failover.__all__]
    names += [getattr(failover.testing, n) for n in failover.testing.__all__]
    for obj in names:
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if (attr == "__init__" or not attr.startswith("_")) and callable(member):
                    found.append(member)
                if isinstance(member, (classmethod, staticmethod)):
                    found.append(member.__func__)
        elif callable(obj):
            found.append(obj)
    return found


@pytest.mark.parametrize(
    "target", _public_callables(), ids=lambda f: getattr(f, "__qualname__", repr(f))
)
def test_public_signatures_resolve_under_get_type_hints(target):
    # pydantic's validate_call, beartype and Sphinx read them.
    """Found hardening the first slice."""
    typing.get_type_hints(target)


def test_the_signature_check_covers_the_client_and_retry_after():
    """Found hardening the first slice."""
    covered = _public_callables()
    for target in (failover.Client.__init__, failover.Client.prompt, failover.retry_after):
        assert target in covered
    assert "return" in typing.get_type_hints(failover.Client.prompt)
