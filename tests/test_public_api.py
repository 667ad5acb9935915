"""The public API: `__all__` complete and sorted, public names reporting the package, every
public signature resolving under typing.get_type_hints, and a cheap `import failover`."""

from __future__ import annotations

import subprocess
import sys
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
    client = failover.Client
    calls = (client.prompt, client.stream, client.embed)
    calls += (client.prompt_async, client.stream_async, client.embed_async)
    for target in (client.__init__, client.with_options, *calls, failover.retry_after):
        assert target in covered, target
    for call in calls:
        assert "return" in typing.get_type_hints(call), call
    # Every public class's constructor, failover's and failover.testing's.
    from failover import testing

    for module in (failover, testing):
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type) and "__init__" in vars(value):
                assert vars(value)["__init__"] in covered, name


@pytest.mark.parametrize(
    "cls", [c for c in vars(failover).values() if isinstance(c, type)], ids=lambda c: c.__name__
)
def test_public_classes_type_hints_list_no_private_fields(cls):
    # What pydantic, cattrs and documentation tools build a schema from: a
    # private slot (RetryPolicy's compiled policy) is not a field.
    private = [name for name in typing.get_type_hints(cls) if name.startswith("_")]
    assert not private, f"{cls.__name__} lists {private}"


def test_import_failover_stays_cheap():
    # Measured by bench/ (issue 17: at most 5 ms), guarded here by what it must
    # not pull in. Not even typing: annotations are strings, and the names they
    # read from typing come through failover._typing when a hint is resolved
    # (test_type_hints_resolve_in_a_fresh_interpreter).
    code = "import sys, failover; print(' '.join(sorted(sys.modules)))"
    loaded = set(subprocess.check_output([sys.executable, "-c", code], text=True).split())
    heavy = {"logging", "dataclasses", "inspect", "json", "asyncio", "urllib.parse", "ipaddress"}
    heavy |= {"typing", "re", "collections", "contextlib", "functools", "enum", "math"}
    # Optional integrations, imported only when a client asks for them.
    heavy |= {"genai_prices", "datetime", "opentelemetry"}
    assert not heavy & loaded, heavy & loaded


# Run in a fresh interpreter: there typing is first imported by get_type_hints
# itself, after failover, so a name failover reads lazily is really resolved
# then (in this process pytest imported typing long before).
_FRESH_HINTS = """
import sys
import failover

assert "typing" not in sys.modules, "import failover imported typing"
sys.path.insert(0, TESTS)
import test_public_api

import collections.abc
import typing

import failover.testing

targets = test_public_api._public_callables()
targets += [getattr(m, n) for m in (failover, failover.testing) for n in m.__all__]
resolved = 0
for target in targets:
    if callable(target):
        hints = typing.get_type_hints(target)
        for hint in hints.values():
            assert not isinstance(hint, (str, typing.ForwardRef)), (target, hint)
        resolved += 1
assert resolved > 100, resolved

# What the lazy names became: typing's own objects, the aliases as written.
Any = typing.Any
assert typing.get_type_hints(failover.retry_after)["body"] is Any
assert typing.get_type_hints(failover.ToolCall)["arguments"] == typing.Optional[Any]
assert typing.get_type_hints(failover.Tool)["parameters"] == dict[str, Any] | None
assert typing.get_type_hints(failover.OpenAI)["wire"] == typing.ClassVar[str]
abc = collections.abc
prompt = typing.get_type_hints(failover.Client.prompt)
assert prompt["prompt"] == str | abc.Sequence[abc.Mapping[str, object]], prompt["prompt"]
assert prompt["return"] is failover.Response
hook = typing.get_type_hints(failover.Client.__init__)["on_event"]
event = (
    failover.RetryScheduled
    | failover.FailedOver
    | failover.CallFailed
    | failover.HedgeStarted
    | failover.HedgeWon
)
assert hook == abc.Callable[[event], object] | None, hook
print(resolved)
"""


def test_type_hints_resolve_in_a_fresh_interpreter():
    import pathlib

    tests = str(pathlib.Path(__file__).parent)
    code = f"TESTS = {tests!r}\n" + _FRESH_HINTS
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 100


def test_all_lists_every_public_name_sorted_as_ruff_sorts_it():
    import ast
    import pathlib

    source = pathlib.Path(failover.__file__).read_text()
    imported = {
        alias.asname or alias.name
        for node in ast.parse(source).body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert imported == set(failover.__all__)

    # ruff's RUF022 order: SCREAMING_CASE, then CamelCase, then the rest.
    def order(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert failover.__all__ == sorted(failover.__all__, key=order)


def test_public_names_report_the_package_and_still_pickle_and_resolve():
    import pickle

    for name in failover.__all__:
        value = getattr(failover, name)
        if callable(value):
            assert value.__module__ == "failover", name
            assert pickle.loads(pickle.dumps(value)) is value, name
        if isinstance(value, type):
            typing.get_type_hints(value)  # resolved where they were written
    assert repr(failover.RateLimited) == "<class 'failover.RateLimited'>"


def test_the_version_is_cargos_and_the_cli_says_it():
    import subprocess
    import sys
    from pathlib import Path

    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    cargo = tomllib.loads((Path(__file__).resolve().parents[1] / "Cargo.toml").read_text())
    assert failover.__version__ == cargo["package"]["version"]
    shown = subprocess.run(
        [sys.executable, "-m", "failover", "--version"], capture_output=True, text=True, check=True
    )
    assert shown.stdout.strip() == f"failover {failover.__version__}"
