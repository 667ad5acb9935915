"""``Client.from_config``: a ``failover.toml`` file (or a dict of the same shape) builds the
client the Python API builds; unknown keys, bad values and missing variables are
ConfigurationErrors naming where they are; a key read from the environment never shows."""

from __future__ import annotations

import asyncio
import copy
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import failover
from failover import ConfigurationError, Limit, Price
from failover.testing import FakeSleeper, MockServer

from conftest import chat_answer, clear_proxy_variables

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: A key that must never show in a repr or a message.
SECRET = "sk-test-SECRET-12345678"
#: Another provider's key, given in the file itself.
OTHER_KEY = "sk-test-other-87654321"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys, endpoints and proxies of the machine running the tests play no part."""
    clear_proxy_variables(monkeypatch)
    for name in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "AZURE_OPENAI_ENDPOINT",
        "GROQ_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FAILOVER_TEST_KEY", SECRET)


def write(tmp_path: Path, text: str) -> Path:
    """``text`` (dedented) as ``failover.toml`` under ``tmp_path``."""
    path = tmp_path / "failover.toml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def line_of(path: Path, needle: str) -> int:
    """The number of the one line of ``path`` holding ``needle``."""
    numbers = [n for n, line in enumerate(path.read_text().splitlines(), start=1) if needle in line]
    assert len(numbers) == 1, f"{needle!r} is on lines {numbers}"
    return numbers[0]


def refusal(build: Callable[[], object]) -> str:
    """The message of the error the Python API raises for ``build()``: a
    ConfigurationError, or the TypeError of a required argument left out."""
    with pytest.raises((ConfigurationError, TypeError)) as caught:
        build()
    return str(caught.value)


def config_refusal(config: Any) -> str:
    """The message of the ConfigurationError (never another error) ``from_config(config)``
    raises."""
    with pytest.raises(ConfigurationError) as caught:
        failover.Client.from_config(config)
    return str(caught.value)


def same_provider(built: object, expected: object) -> None:
    """``built`` is the provider (or pool) ``expected`` is: same class, same repr, same
    configuration throughout (its limits, prices, quota, headers, params, key...)."""
    assert type(built) is type(expected)
    assert repr(built) == repr(expected)
    assert vars(built) == vars(expected)


def same_client(built: failover.Client, expected: failover.Client) -> None:
    assert repr(built) == repr(expected)
    assert list(built.providers) == list(expected.providers)
    for name, provider in expected.providers.items():
        other = built.providers[name]
        if isinstance(provider, failover.Pool):
            assert isinstance(other, failover.Pool)
            assert (other.name, other.strategy, other.limit) == (
                provider.name,
                provider.strategy,
                provider.limit,
            )
            assert list(other.members) == list(provider.members)
            for member_name, member in provider.members.items():
                same_provider(other.members[member_name], member)
        else:
            same_provider(other, provider)


# The whole shape


FULL = """
# Every table a failover.toml may hold.
[client]
timeout = 20
connect_timeout = 5
deadline = 45.5
http2 = false
max_idle_connections = 16
proxy = "http://proxy.example.com:8080"
verify = true

[retry]
max_retries = 3
max_retries_last = 4
max_retry_after = 7.5
max_retry_after_last = 30
stop_on = ["bad_request", "auth"]
max_cooldown = 12
max_hinted_cooldown = 600
backoff = { initial = 0.25, multiplier = 3, max = 9, jitter = 0.5, spread = 0.1 }
budget = { ratio = 0.4, min_retries_per_second = 2, window = 20 }

[quotas.org]
rpm = 500
concurrency = 12

[quotas.shared]
tpm = 100000

[providers.gpt]
type = "openai"
model = "gpt-4.1-mini"
api_key = "${FAILOVER_TEST_KEY}"
headers = { X-Team = "search", OpenAI-Organization = "org-1" }
params = { service_tier = "flex", metadata = { app = "demo" } }
overloaded_statuses = [520, 521]
embedding_model = "text-embedding-3-small"
limit = { concurrency = 8, rpm = 100 }
embedding_limit = { tpm = 50000 }
price = { input = 0.4, output = 1.6, cache_read = 0.1 }
embedding_price = { input = 0.02, output = 0 }
quota = "org"

[providers.claude]
type = "anthropic"
model = "claude-haiku-4-5"
api_key = "sk-test-other-87654321"
quota = "shared"

[providers.claude.limit]
concurrency = 4

[providers.gemini]
type = "gemini"
model = "gemini-2.5-flash"
api_key = "AIza-test-gemini-key-1234"
base_url = "https://gemini.example.com/v1beta"

[providers.azure]
type = "azure"
deployment = "gpt-prod"
endpoint = "https://contoso.openai.azure.com"
api_version = "2025-04-01-preview"
api_key = "sk-test-other-87654321"
embedding_model = "embed-prod"

[providers.gateway]
type = "openai_compatible"
model = "llama-3.3-70b"
base_url = "https://gateway.example.com/v1"
api_key_env = "FAILOVER_TEST_KEY"
allow_insecure = false

[providers.groq]
type = "groq"
model = "llama-3.1-8b-instant"
api_key = "sk-test-other-87654321"
overloaded_statuses = [503]

[providers.local]
type = "ollama"
model = "llama3.2"
base_url = "http://localhost:11434"

[providers.spread]
type = "pool"
strategy = "least_busy"
limit = { rpm = 60 }
members = [
  { type = "openai", model = "gpt-4.1", api_key = "sk-test-other-87654321" },
{ type = "azure", deployment = "gpt-41", endpoint = "https://w.openai.azure.com", api_key = "k-1" },
]

[providers.keys]
type = "pool"

[providers.keys.members.first]
type = "openai"
model = "gpt-4.1-nano"
api_key = "sk-test-other-87654321"

[providers.keys.members.second]
type = "openai"
model = "gpt-4.1-nano"
api_key = "${FAILOVER_TEST_KEY}"
limit = { concurrency = 2 }
"""


def full_by_hand() -> failover.Client:
    """What FULL says, written with the Python API."""
    return failover.Client(
        {
            "gpt": failover.OpenAI(
                model="gpt-4.1-mini",
                api_key=SECRET,
                headers={"X-Team": "search", "OpenAI-Organization": "org-1"},
                params={"service_tier": "flex", "metadata": {"app": "demo"}},
                overloaded_statuses=[520, 521],
                embedding_model="text-embedding-3-small",
                limit=Limit(concurrency=8, rpm=100),
                embedding_limit=Limit(tpm=50000),
                price=Price(input=0.4, output=1.6, cache_read=0.1),
                embedding_price=Price(input=0.02, output=0),
                quota="org",
            ),
            "claude": failover.Anthropic(
                model="claude-haiku-4-5",
                api_key=OTHER_KEY,
                quota="shared",
                limit=Limit(concurrency=4),
            ),
            "gemini": failover.Gemini(
                model="gemini-2.5-flash",
                api_key="AIza-test-gemini-key-1234",
                base_url="https://gemini.example.com/v1beta",
            ),
            "azure": failover.Azure(
                deployment="gpt-prod",
                endpoint="https://contoso.openai.azure.com",
                api_version="2025-04-01-preview",
                api_key=OTHER_KEY,
                embedding_model="embed-prod",
            ),
            "gateway": failover.OpenAICompatible(
                model="llama-3.3-70b",
                base_url="https://gateway.example.com/v1",
                api_key_env="FAILOVER_TEST_KEY",
                allow_insecure=False,
            ),
            "groq": failover.Groq(
                model="llama-3.1-8b-instant", api_key=OTHER_KEY, overloaded_statuses=[503]
            ),
            "local": failover.Ollama(model="llama3.2", base_url="http://localhost:11434"),
            "spread": failover.Pool(
                "spread",
                [
                    failover.OpenAI(model="gpt-4.1", api_key=OTHER_KEY),
                    failover.Azure(
                        deployment="gpt-41",
                        endpoint="https://w.openai.azure.com",
                        api_key="k-1",
                    ),
                ],
                strategy="least_busy",
                limit=Limit(rpm=60),
            ),
            "keys": failover.Pool(
                "keys",
                {
                    "first": failover.OpenAI(model="gpt-4.1-nano", api_key=OTHER_KEY),
                    "second": failover.OpenAI(
                        model="gpt-4.1-nano", api_key=SECRET, limit=Limit(concurrency=2)
                    ),
                },
            ),
        },
        retry=failover.RetryPolicy(
            max_retries=3,
            max_retries_last=4,
            max_retry_after=7.5,
            max_retry_after_last=30,
            stop_on=["bad_request", "auth"],
            max_cooldown=12,
            max_hinted_cooldown=600,
            backoff=failover.Backoff(initial=0.25, multiplier=3, max=9, jitter=0.5, spread=0.1),
            budget=failover.RetryBudget(ratio=0.4, min_retries_per_second=2, window=20),
        ),
        timeout=20,
        connect_timeout=5,
        deadline=45.5,
        http2=False,
        max_idle_connections=16,
        proxy="http://proxy.example.com:8080",
        verify=True,
        quotas={"org": Limit(rpm=500, concurrency=12), "shared": Limit(tpm=100000)},
    )


def test_a_file_builds_the_client_the_python_api_builds(tmp_path: Path) -> None:
    path = write(tmp_path, FULL)
    with failover.Client.from_config(path) as client, full_by_hand() as expected:
        same_client(client, expected)
        # The chain is in the file's order, pools flattened under their members' names.
        assert list(client.providers) == [
            "gpt",
            "claude",
            "gemini",
            "azure",
            "gateway",
            "groq",
            "local",
            "spread",
            "keys",
        ]
        spread = client.providers["spread"]
        assert isinstance(spread, failover.Pool)
        assert list(spread.members) == ["spread/0", "spread/1"]
        keys = client.providers["keys"]
        assert isinstance(keys, failover.Pool)
        assert list(keys.members) == ["first", "second"]
        gpt = client.providers["gpt"]
        assert isinstance(gpt, failover.OpenAI)
        assert gpt.headers == {"X-Team": "search", "OpenAI-Organization": "org-1"}
        assert gpt.params == {"service_tier": "flex", "metadata": {"app": "demo"}}
        assert {520, 521} <= set(gpt.overloaded_statuses)
        azure = client.providers["azure"]
        assert isinstance(azure, failover.Azure)
        assert (azure.deployment, azure.endpoint, azure.api_version) == (
            "gpt-prod",
            "https://contoso.openai.azure.com",
            "2025-04-01-preview",
        )
        assert "deadline=45.5" in repr(client) and "timeout=20" in repr(client)
        assert "proxy='http://proxy.example.com:8080'" in repr(client)
    assert client.is_closed


def test_a_str_path_builds_the_same_client_as_a_path_object(tmp_path: Path) -> None:
    path = write(tmp_path, FULL)
    with failover.Client.from_config(str(path)) as a, failover.Client.from_config(path) as b:
        same_client(a, b)


def test_a_dict_of_the_same_shape_builds_the_same_client(tmp_path: Path) -> None:
    path = write(tmp_path, FULL)
    tables = tomllib.loads(path.read_text())
    given = copy.deepcopy(tables)
    with failover.Client.from_config(tables) as client, full_by_hand() as expected:
        same_client(client, expected)
    # The dict is read, not consumed: it is unchanged and builds the client again.
    assert tables == given
    with failover.Client.from_config(tables) as again, full_by_hand() as expected:
        same_client(again, expected)


def test_a_dict_written_by_hand_builds_the_client_it_describes() -> None:
    config = {
        "client": {"deadline": 10},
        "retry": {"max_retries": 0, "budget": False},
        "providers": {
            "main": {"type": "anthropic", "model": "claude-haiku-4-5", "api_key": OTHER_KEY},
            "backup": {
                "type": "pool",
                "members": [
                    {"type": "groq", "model": "llama-3.1-8b-instant", "api_key": OTHER_KEY},
                    {"type": "gemini", "model": "gemini-2.5-flash", "api_key": OTHER_KEY},
                ],
            },
        },
    }
    expected = failover.Client(
        {
            "main": failover.Anthropic(model="claude-haiku-4-5", api_key=OTHER_KEY),
            "backup": failover.Pool(
                "backup",
                [
                    failover.Groq(model="llama-3.1-8b-instant", api_key=OTHER_KEY),
                    failover.Gemini(model="gemini-2.5-flash", api_key=OTHER_KEY),
                ],
            ),
        },
        deadline=10,
        retry=failover.RetryPolicy(max_retries=0, budget=None),
    )
    with failover.Client.from_config(config) as client, expected:
        same_client(client, expected)
        assert "budget=None" in repr(client)


def test_defaults_are_the_python_apis_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [providers.main]
        type = "openai"
        model = "gpt-4.1-mini"
        api_key = "sk-test-other-87654321"
        """,
    )
    expected = failover.Client({"main": failover.OpenAI(model="gpt-4.1-mini", api_key=OTHER_KEY)})
    with failover.Client.from_config(path) as client, expected:
        same_client(client, expected)
        assert f"retry={failover.RetryPolicy()!r}" in repr(client)


@pytest.mark.parametrize(
    ("table", "options"),
    [
        (
            {"proxy": "http://user:${FAILOVER_TEST_KEY}@proxy.example.com:8080"},
            {"proxy": f"http://user:{SECRET}@proxy.example.com:8080"},
        ),
        ({"verify": False, "http2": True}, {"verify": False, "http2": True}),
        ({"telemetry": False}, {"telemetry": None}),
        ({"telemetry": True}, {"telemetry": failover.OpenTelemetry()}),
        (
            {"telemetry": {"capture_content": True}},
            {"telemetry": failover.OpenTelemetry(capture_content=True)},
        ),
        ({"prices": "genai-prices"}, {"prices": "genai-prices"}),
        ({"prices": {"m": {"input": 1, "output": 2}}}, {"prices": {"m": Price(1, 2)}}),
        (
            {"state": "redis://localhost:1/0"},
            {"state": failover.RedisState("redis://localhost:1/0")},
        ),
        (
            {"state": {"url": "redis://localhost:1/0", "prefix": "team"}},
            {"state": failover.RedisState("redis://localhost:1/0", prefix="team")},
        ),
    ],
)
def test_client_options_build_what_the_python_api_builds(
    table: dict[str, Any], options: dict[str, Any]
) -> None:
    config = {
        "client": table,
        "providers": {"a": {"type": "openai", "model": "m", "api_key": OTHER_KEY}},
    }
    by_hand = failover.Client({"a": failover.OpenAI(model="m", api_key=OTHER_KEY)}, **options)
    with failover.Client.from_config(config) as client, by_hand:
        assert repr(client) == repr(by_hand)
        assert SECRET not in repr(client)


# Retry


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({"preset": "openai"}, failover.RetryPolicy.openai()),
        ({"preset": "laravel"}, failover.RetryPolicy.laravel()),
        ({"preset": "ruby_llm"}, failover.RetryPolicy.ruby_llm()),
        (
            {"preset": "ruby_llm", "max_interval": 30},
            failover.RetryPolicy.ruby_llm(max_interval=30),
        ),
        ({"budget": False}, failover.RetryPolicy(budget=None)),
        ({"budget": True}, failover.RetryPolicy(budget=failover.RetryBudget())),
        (
            {"budget": {"ratio": 0.5, "window": 30}},
            failover.RetryPolicy(budget=failover.RetryBudget(ratio=0.5, window=30)),
        ),
        (
            {"backoff": {"initial": 1, "max": 4}},
            failover.RetryPolicy(backoff=failover.Backoff(initial=1, max=4)),
        ),
        ({"backoff": {}}, failover.RetryPolicy(backoff=failover.Backoff())),
        ({"stop_on": []}, failover.RetryPolicy(stop_on=[])),
        ({}, failover.RetryPolicy()),
    ],
)
def test_a_retry_table_builds_the_policy_the_python_api_builds(
    table: dict[str, Any], expected: failover.RetryPolicy
) -> None:
    provider = {"type": "openai", "model": "m", "api_key": OTHER_KEY}
    config = {"retry": table, "providers": {"a": provider}}
    by_hand = failover.Client({"a": failover.OpenAI(model="m", api_key=OTHER_KEY)}, retry=expected)
    with failover.Client.from_config(config) as client, by_hand:
        assert repr(client) == repr(by_hand)
        assert f"retry={expected!r}," in repr(client)


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        ('preset = "openai"', failover.RetryPolicy.openai()),
        ('preset = "laravel"', failover.RetryPolicy.laravel()),
        ('preset = "ruby_llm"\nmax_interval = 30', failover.RetryPolicy.ruby_llm(max_interval=30)),
        ('preset = "ruby_llm"', failover.RetryPolicy.ruby_llm()),
    ],
)
def test_a_retry_preset_in_a_file(
    tmp_path: Path, preset: str, expected: failover.RetryPolicy
) -> None:
    path = write(
        tmp_path,
        f'[retry]\n{preset}\n\n[providers.a]\ntype = "openai"\nmodel = "m"\napi_key = "k-123"\n',
    )
    by_hand = failover.Client({"a": failover.OpenAI(model="m", api_key="k-123")}, retry=expected)
    with failover.Client.from_config(path) as client, by_hand:
        assert repr(client) == repr(by_hand)
        assert f"retry={expected!r}," in repr(client)


def test_an_unknown_preset_is_named_with_the_presets(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [retry]
        preset = "opneai"

        [providers.a]
        type = "openai"
        model = "m"
        api_key = "k-123"
        """,
    )
    message = config_refusal(path)
    assert f"failover.toml, line {line_of(path, 'opneai')}, retry.preset:" in message
    assert "preset is one of openai, laravel, ruby_llm, not 'opneai'" in message


def test_a_preset_takes_only_its_own_options(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [retry]
        preset = "openai"
        max_interval = 30

        [providers.a]
        type = "openai"
        model = "m"
        api_key = "k-123"
        """,
    )
    message = config_refusal(path)
    line = line_of(path, "max_interval")
    assert (
        f"failover.toml, line {line}, retry.max_interval: the openai preset is used as it is "
        "(it has no options); for max_interval, describe the policy without preset"
    ) in message


# ${VAR}


def test_variables_are_read_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_HOST", "gw.example.com")
    monkeypatch.setenv("TEAM", "ml")
    path = write(
        tmp_path,
        """
        [providers.gw]
        type = "openai_compatible"
        model = "m"
        base_url = "https://${GATEWAY_HOST}/v1"
        api_key = "${FAILOVER_TEST_KEY}"
        headers = { X-Team = "${TEAM}-${TEAM}", X-Price = "$$5 and $${TEAM}", X-Lone = "a $ b" }
        params = { user = "${TEAM}", tags = ["${TEAM}", "x"] }
        """,
    )
    expected = failover.OpenAICompatible(
        model="m",
        base_url="https://gw.example.com/v1",
        api_key=SECRET,
        headers={"X-Team": "ml-ml", "X-Price": "$5 and ${TEAM}", "X-Lone": "a $ b"},
        params={"user": "ml", "tags": ["ml", "x"]},
    )
    with failover.Client.from_config(path) as client:
        same_provider(client.providers["gw"], expected)


def test_a_variable_read_for_a_key_is_the_key_sent(
    mock_server: MockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MOCK_URL", mock_server.url)
    mock_server.push_text("ok")
    config = {
        "providers": {
            "a": {
                "type": "openai_compatible",
                "model": "m",
                "base_url": "${MOCK_URL}",
                "api_key": "${FAILOVER_TEST_KEY}",
            }
        }
    }
    with failover.Client.from_config(config) as client:
        assert client.prompt("Hi").text == "ok"
    assert mock_server.requests[0].headers["authorization"] == f"Bearer {SECRET}"


def test_a_missing_variable_is_named_with_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [client]
        deadline = 30

        [providers.claude]
        type = "anthropic"
        model = "claude-haiku-4-5"
        api_key = "${FAILOVER_TEST_UNSET_KEY}"
        """,
    )
    message = config_refusal(path)
    line = line_of(path, "FAILOVER_TEST_UNSET_KEY")
    assert line == 7
    assert message.startswith(str(path))
    assert (
        f"failover.toml, line {line}, providers.claude.api_key: "
        "the environment variable FAILOVER_TEST_UNSET_KEY is not set"
    ) in message


def test_a_missing_variable_in_a_dict_is_named_with_its_key_path() -> None:
    config = {
        "providers": {
            "a": {"type": "openai", "model": "m", "headers": {"X-Team": "${FAILOVER_TEST_NOPE}"}}
        }
    }
    message = config_refusal(config)
    assert message == (
        "providers.a.headers.X-Team: the environment variable FAILOVER_TEST_NOPE is not set"
    )


def test_an_empty_variable_is_used_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAILOVER_TEST_EMPTY", "")
    config = {
        "providers": {
            "a": {
                "type": "openai",
                "model": "m",
                "api_key": OTHER_KEY,
                "headers": {"X-Suffix": "a${FAILOVER_TEST_EMPTY}b"},
            }
        }
    }
    with failover.Client.from_config(config) as client:
        provider = client.providers["a"]
        assert isinstance(provider, failover.OpenAI)
        assert provider.headers == {"X-Suffix": "ab"}


@pytest.mark.parametrize("bad", ["${}", "${1ABC}", "${A-B}", "${A B}"])
def test_what_is_not_a_variable_name_is_refused(bad: str) -> None:
    config = {"providers": {"a": {"type": "openai", "model": "m", "api_key": bad}}}
    message = config_refusal(config)
    assert message.startswith("providers.a.api_key: ")
    assert message.endswith(f"{bad} is not a variable name")


# Secret hygiene


def test_a_key_from_the_environment_shows_in_no_repr(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [providers.a]
        type = "openai"
        model = "gpt-4.1-mini"
        api_key = "${FAILOVER_TEST_KEY}"

        [providers.p]
        type = "pool"

        [providers.p.members.one]
        type = "anthropic"
        model = "claude"
        api_key = "${FAILOVER_TEST_KEY}"
        """,
    )
    with failover.Client.from_config(path) as client:
        shown = [repr(client), str(client), *map(repr, client.providers.values())]
        assert all(SECRET not in text for text in shown)
        assert "gpt-4.1-mini" in repr(client)
    assert SECRET not in repr(client)


@pytest.mark.parametrize(
    "extra",
    [
        'modle = "x"',  # an unknown key
        "limit = { concurrency = 0 }",  # a bad value
        'base_url = "http://api.example.com/v1"',  # a key bound for plain http
        'base_url = "not a url"',
        'headers = { "bad name" = "x" }',
        'quota = ""',
        'headers = { Authorization = "Bearer ${FAILOVER_TEST_KEY_NL}" }',  # a line break
        'base_url = "https://user:${FAILOVER_TEST_KEY}@gw.example.com/v1"\nmodle = 1',
    ],
)
def test_a_key_from_the_environment_shows_in_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str
) -> None:
    monkeypatch.setenv("FAILOVER_TEST_KEY_NL", SECRET + "\n")
    path = write(
        tmp_path,
        '[providers.a]\ntype = "openai_compatible"\nmodel = "m"\n'
        'api_key = "${FAILOVER_TEST_KEY}"\n' + extra + "\n",
    )
    message = config_refusal(path)
    assert "providers.a" in message
    assert SECRET not in message
    assert "SECRET" not in message


def test_a_key_shows_in_no_client_level_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [client]
        deadline = -1

        [providers.a]
        type = "openai"
        model = "m"
        api_key = "${FAILOVER_TEST_KEY}"
        """,
    )
    message = config_refusal(path)
    assert "deadline" in message
    assert SECRET not in message


# Unknown keys


UNKNOWN_KEYS = [
    # (the file, the misspelt key's line holds this, its dotted path, the key, the hint)
    (
        """
        retyr = 1

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "retyr",
        "retyr",
        "retyr",
        "retry",
    ),
    (
        """
        [client]
        deadline = 3

        [qoutas]
        org = { rpm = 1 }

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "[qoutas]",
        "qoutas",
        "qoutas",
        "quotas",
    ),
    (
        """
        [client]
        timeout = 3
        deadlin = 30

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "deadlin",
        "client.deadlin",
        "deadlin",
        "deadline",
    ),
    (
        """
        [retry]
        max_retries = 1
        max_retires_last = 3

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "max_retires_last",
        "retry.max_retires_last",
        "max_retires_last",
        "max_retries_last",
    ),
    (
        """
        [retry.backoff]
        initial = 1
        multiplyer = 3

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "multiplyer",
        "retry.backoff.multiplyer",
        "multiplyer",
        "multiplier",
    ),
    (
        """
        [retry]
        backoff = { inital = 1 }

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "inital",
        "retry.backoff.inital",
        "inital",
        "initial",
    ),
    (
        """
        [retry]
        budget = { ratoi = 0.5 }

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "ratoi",
        "retry.budget.ratoi",
        "ratoi",
        "ratio",
    ),
    (
        """
        [quotas.org]
        rpm = 5
        tmp = 100

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "tmp",
        "quotas.org.tmp",
        "tmp",
        "tpm",
    ),
    (
        """
        [providers.a]
        type = "openai"
        api_key = "k-123"
        modle = "gpt-4.1-mini"
        """,
        "modle",
        "providers.a.modle",
        "modle",
        "model",
    ),
    (
        """
        [providers.a]
        type = "openai"
        model = "m"

        [providers.b]
        type = "openai_compatible"
        model = "m"
        base_ulr = "https://x.example.com"
        """,
        "base_ulr",
        "providers.b.base_ulr",
        "base_ulr",
        "base_url",
    ),
    (
        """
        [providers.p]
        type = "pool"
        stratgy = "least_busy"
        members = [ { type = "openai", model = "m" } ]
        """,
        "stratgy",
        "providers.p.stratgy",
        "stratgy",
        "strategy",
    ),
    (
        """
        [providers.p]
        type = "pool"
        members = [ { type = "openai", model = "m" }, { type = "openai", modl = "m" } ]
        """,
        "modl",
        "providers.p.members.1.modl",
        "modl",
        "model",
    ),
    (
        """
        [providers.p]
        type = "pool"

        [providers.p.members.east]
        type = "openai"
        model = "m"
        qouta = "org"
        """,
        "qouta",
        "providers.p.members.east.qouta",
        "qouta",
        "quota",
    ),
    (
        """
        [providers.a]
        type = "openai"
        model = "m"
        limit = { concurency = 4 }
        """,
        "concurency",
        "providers.a.limit.concurency",
        "concurency",
        "concurrency",
    ),
    (
        """
        [providers.a]
        type = "openai"
        model = "m"

        [providers.a.embedding_limit]
        rpm = 4
        tpmm = 4
        """,
        "tpmm",
        "providers.a.embedding_limit.tpmm",
        "tpmm",
        "tpm",
    ),
    (
        """
        [providers.a]
        type = "openai"
        model = "m"
        price = { input = 1, ouput = 2 }
        """,
        "ouput",
        "providers.a.price.ouput",
        "ouput",
        "output",
    ),
    (
        """
        [client.prices."gpt-4.1"]
        input = 1
        output = 2
        cache_reed = 0.5

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "cache_reed",
        "client.prices.gpt-4.1.cache_reed",
        "cache_reed",
        "cache_read",
    ),
    (
        """
        [client]
        state = { url = "redis://localhost:6379/0", prefx = "x" }

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "prefx",
        "client.state.prefx",
        "prefx",
        "prefix",
    ),
    (
        """
        [client.telemetry]
        capture_contnet = true

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "capture_contnet",
        "client.telemetry.capture_contnet",
        "capture_contnet",
        "capture_content",
    ),
]


@pytest.mark.parametrize(
    ("text", "needle", "dotted", "key", "hint"),
    UNKNOWN_KEYS,
    ids=[case[2] for case in UNKNOWN_KEYS],
)
def test_an_unknown_key_is_named_on_its_line_with_the_close_match(
    tmp_path: Path, text: str, needle: str, dotted: str, key: str, hint: str
) -> None:
    path = write(tmp_path, text)
    message = config_refusal(path)
    line = line_of(path, needle)
    assert (
        f"failover.toml, line {line}, {dotted}: unknown key {key!r} (did you mean {hint!r}?)"
    ) in message
    assert "known keys: " in message and hint in message.split("known keys: ")[1]


def test_an_unknown_key_in_a_dict_is_named_by_its_path() -> None:
    config = {
        "providers": {"a": {"type": "openai", "model": "m", "limit": {"rmp": 5}}},
    }
    message = config_refusal(config)
    assert message.startswith(
        "providers.a.limit.rmp: unknown key 'rmp' (did you mean 'rpm'?); known keys: "
    )


def test_a_key_with_no_close_match_lists_the_known_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [providers.a]
        type = "anthropic"
        model = "m"
        zzzzzz = 1
        """,
    )
    message = config_refusal(path)
    assert f"line {line_of(path, 'zzzzzz')}, providers.a.zzzzzz: unknown key 'zzzzzz';" in message
    assert "did you mean" not in message
    assert "known keys: model, api_key, base_url" in message


@pytest.mark.parametrize(
    ("key", "value", "where"),
    [
        ("providers", "{}", "[providers.NAME] tables"),
        ("retry", "{}", "a [retry] table"),
        ("quotas", "{}", "[quotas.NAME] tables"),
    ],
)
def test_client_options_given_elsewhere_say_where(
    tmp_path: Path, key: str, value: str, where: str
) -> None:
    path = write(
        tmp_path,
        f'[client]\n{key} = {value}\n\n[providers.a]\ntype = "openai"\nmodel = "m"\n',
    )
    message = config_refusal(path)
    assert f"failover.toml, line 2, client.{key}: {key} is given as {where}" in message


@pytest.mark.parametrize("hook", ["sleeper", "on_event"])
def test_a_sleeper_or_hook_in_the_file_is_refused_for_from_config(
    tmp_path: Path, hook: str
) -> None:
    path = write(
        tmp_path,
        f'[client]\ndeadline = 3\n{hook} = "fake"\n\n[providers.a]\ntype = "openai"\nmodel = "m"\n',
    )
    message = config_refusal(path)
    assert f"failover.toml, line 3, client.{hook}: {hook} is given as " in message
    assert f"Client.from_config(..., {hook}=)" in message


# Bad values: the Python API's own message, prefixed with where it is


def _member() -> failover.OpenAI:
    return failover.OpenAI(model="m", api_key=OTHER_KEY)


BAD_VALUES: list[tuple[str, str, str, Callable[[], object]]] = [
    # (the file, the line the prefix names holds this, the dotted path, the Python API call)
    (
        """
        [client]
        deadline = -1

        [providers.a]
        type = "openai"
        model = "m"
        api_key = "k-123"
        """,
        "deadline",
        "client.deadline",
        lambda: failover.Client({"a": _member()}, deadline=-1),
    ),
    (
        """
        [client]
        timeout = 0

        [providers.a]
        type = "openai"
        model = "m"
        api_key = "k-123"
        """,
        "timeout",
        "client.timeout",
        lambda: failover.Client({"a": _member()}, timeout=0),
    ),
    (
        """
        [client]
        http2 = "yes"

        [providers.a]
        type = "openai"
        model = "m"
        api_key = "k-123"
        """,
        "http2",
        "client.http2",
        lambda: failover.Client({"a": _member()}, http2="yes"),  # type: ignore[arg-type]
    ),
    (
        """
        [retry]
        max_retries = -1

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "max_retries",
        "retry.max_retries",
        lambda: failover.RetryPolicy(max_retries=-1),
    ),
    (
        """
        [retry]
        stop_on = ["rate_limit"]

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "stop_on",
        "retry.stop_on",
        lambda: failover.RetryPolicy(stop_on=["rate_limit"]),
    ),
    (
        """
        [retry]
        backoff = { multiplier = 0.5 }

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "multiplier",
        "retry.backoff.multiplier",
        lambda: failover.Backoff(multiplier=0.5),
    ),
    (
        """
        [retry]
        budget = { window = 0 }

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "window",
        "retry.budget.window",
        lambda: failover.RetryBudget(window=0),
    ),
    (
        """
        [retry]
        preset = "ruby_llm"
        max_interval = -5

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "max_interval",
        "retry.max_interval",
        lambda: failover.RetryPolicy.ruby_llm(max_interval=-5),
    ),
    (
        """
        [quotas.org]
        rpm = 0

        [providers.a]
        type = "openai"
        model = "m"
        """,
        "rpm",
        "quotas.org.rpm",
        lambda: Limit(rpm=0),
    ),
    (
        """
        [providers.a]
        type = "openai"
        model = "m"
        limit = { concurrency = 0 }
        """,
        "concurrency",
        "providers.a.limit.concurrency",
        lambda: Limit(concurrency=0),
    ),
    (
        """
        [providers.a]
        type = "openai"
        model = "m"

        [providers.a.limit]
        """,
        "[providers.a.limit]",
        "providers.a.limit",
        lambda: Limit(),
    ),
    (
        """
        [providers.a]
        type = "openai"
        model = "m"
        limit = { rpm = 1.5 }
        """,
        "rpm",
        "providers.a.limit.rpm",
        lambda: Limit(rpm=1.5),  # type: ignore[arg-type]
    ),
    (
        """
        [providers.a]
        type = "openai"
        model = "m"
        price = { input = -1, output = 1 }
        """,
        "input",
        "providers.a.price.input",
        lambda: Price(input=-1, output=1),
    ),
    (
        """
        [providers.a]
        type = "openai"
        model = "m"
        price = { input = 1 }
        """,
        "price",
        "providers.a.price",
        lambda: Price(input=1),  # type: ignore[call-arg]
    ),
    (
        """
        [providers.a]
        type = "openai_compatible"
        model = "m"
        base_url = "not a url"
        """,
        "base_url",
        "providers.a.base_url",
        lambda: failover.OpenAICompatible(model="m", base_url="not a url"),
    ),
    (
        """
        [providers.a]
        type = "openai_compatible"
        model = "m"
        base_url = "ftp://host/v1"
        """,
        "base_url",
        "providers.a.base_url",
        lambda: failover.OpenAICompatible(model="m", base_url="ftp://host/v1"),
    ),
    (
        """
        [providers.a]
        type = "openai"
        model = " "
        """,
        "model",
        "providers.a.model",
        lambda: failover.OpenAI(model=" "),
    ),
    (
        """
        [providers.a]
        type = "gemini"
        model = "a/b/c"
        """,
        "model",
        "providers.a.model",
        lambda: failover.Gemini(model="a/b/c"),
    ),
    (
        """
        [providers.a]
        type = "openai"
        model = "m"
        overloaded_statuses = [429]
        """,
        "overloaded_statuses",
        "providers.a.overloaded_statuses",
        lambda: failover.OpenAI(model="m", overloaded_statuses=[429]),
    ),
    (
        """
        [providers.a]
        type = "openai"
        model = "m"
        headers = { "bad name" = "x" }
        """,
        "headers",
        "providers.a.headers",
        lambda: failover.OpenAI(model="m", headers={"bad name": "x"}),
    ),
    (
        """
        [providers.a]
        type = "openai"
        model = "m"
        allow_insecure = "no"
        """,
        "allow_insecure",
        "providers.a.allow_insecure",
        lambda: failover.OpenAI(model="m", allow_insecure="no"),  # type: ignore[arg-type]
    ),
    (
        """
        [providers.a]
        type = "azure"
        deployment = "gpt"
        endpoint = "https://x.openai.azure.com/openai"
        """,
        "endpoint",
        "providers.a.endpoint",
        lambda: failover.Azure("gpt", endpoint="https://x.openai.azure.com/openai"),
    ),
    (
        """
        [providers.a]
        type = "azure"
        deployment = "gpt"
        """,
        "[providers.a]",
        "providers.a",
        lambda: failover.Azure("gpt"),
    ),
    (
        """
        [providers.a]
        type = "azure"
        endpoint = "https://x.openai.azure.com"
        """,
        "[providers.a]",
        "providers.a",
        lambda: failover.Azure(endpoint="https://x.openai.azure.com"),  # type: ignore[call-arg]
    ),
    (
        """
        [providers.a]
        type = "anthropic"
        model = "m"
        embedding_model = "e"
        """,
        "embedding_model",
        "providers.a.embedding_model",
        lambda: failover.Anthropic(model="m", embedding_model="e"),
    ),
    (
        """
        [providers.gpt]
        type = "pool"
        members = []
        """,
        "[providers.gpt]",
        "providers.gpt",
        lambda: failover.Pool("gpt", []),
    ),
    (
        """
        [providers.gpt]
        type = "pool"
        strategy = "fastest"
        members = [ { type = "openai", model = "m", api_key = "k-123" } ]
        """,
        "strategy",
        "providers.gpt.strategy",
        lambda: failover.Pool("gpt", [_member()], strategy="fastest"),
    ),
    (
        """
        [providers.gpt]
        type = "pool"
        members = "openai"
        """,
        "members",
        "providers.gpt.members",
        lambda: failover.Pool("gpt", "openai"),  # type: ignore[arg-type]
    ),
    (
        """
        [providers.gpt]
        type = "pool"
        limit = { tpm = 0 }
        members = [ { type = "openai", model = "m", api_key = "k-123" } ]
        """,
        "tpm",
        "providers.gpt.limit.tpm",
        lambda: Limit(tpm=0),
    ),
    (
        """
        [providers.gpt]
        type = "pool"
        members = [ { type = "openai", model = "m", limit = { concurrency = -2 } } ]
        """,
        "concurrency",
        "providers.gpt.members.0.limit.concurrency",
        lambda: Limit(concurrency=-2),
    ),
]


@pytest.mark.parametrize(
    ("text", "needle", "dotted", "python_api"),
    BAD_VALUES,
    ids=[f"{i}-{case[2]}" for i, case in enumerate(BAD_VALUES)],
)
def test_a_bad_value_gets_the_python_apis_message_prefixed_with_where_it_is(
    tmp_path: Path, text: str, needle: str, dotted: str, python_api: Callable[[], object]
) -> None:
    expected = refusal(python_api)
    path = write(tmp_path, text)
    message = config_refusal(path)
    assert message == f"{path}, line {line_of(path, needle)}, {dotted}: {expected}"


def test_a_bad_value_in_a_dict_is_prefixed_with_its_key_path() -> None:
    expected = refusal(lambda: Limit(concurrency=0))
    config = {"providers": {"a": {"type": "openai", "model": "m", "limit": {"concurrency": 0}}}}
    assert config_refusal(config) == f"providers.a.limit.concurrency: {expected}"


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ('"antropic"', "type 'antropic' (did you mean 'anthropic'?)"),
        ('"open_ai"', "type 'open_ai' (did you mean 'openai'?)"),
        ('"openai-compatible"', "type 'openai-compatible' (did you mean 'openai_compatible'?)"),
        ('"pol"', "type 'pol' (did you mean 'pool'?)"),
        ("3", "type 3"),
    ],
)
def test_an_unknown_provider_type_is_named_with_the_close_match(
    tmp_path: Path, value: str, said: str
) -> None:
    path = write(tmp_path, f'[providers.a]\nmodel = "m"\ntype = {value}\n')
    message = config_refusal(path)
    assert f"failover.toml, line 3, providers.a.type: {said}; type is one of openai, " in message
    assert "openai_compatible" in message and "pool" in message


def test_a_provider_without_a_type_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[providers.a]\nmodel = "m"\n')
    message = config_refusal(path)
    assert "failover.toml, line 1, providers.a.type: no type; type is one of openai, " in message


def test_a_pool_member_cannot_be_a_pool(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [providers.p]
        type = "pool"
        members = { inner = { type = "pool", members = [] } }
        """,
    )
    message = config_refusal(path)
    assert "providers.p.members.inner.type: type 'pool'" in message
    types = message.split("type is one of ")[1]
    assert "openai" in types and "pool" not in types


def test_a_pool_without_members_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[providers.gpt]\ntype = "pool"\nstrategy = "round_robin"\n')
    message = config_refusal(path)
    assert message == f"{path}, line 1, providers.gpt: a pool needs members"


def test_a_table_where_a_value_is_expected_and_the_reverse_are_refused() -> None:
    provider = {"type": "openai", "model": "m"}
    message = config_refusal({"providers": {"a": {**provider, "limit": 5}}})
    assert message == "providers.a.limit: must be a table, got int 5"
    message = config_refusal({"providers": {"a": "openai"}})
    assert message == "providers.a: must be a table, got str 'openai'"
    message = config_refusal({"client": [], "providers": {"a": provider}})
    assert message == "client: must be a table, got list"


def test_providers_written_as_a_list_never_show_their_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a new-user trial: `[[providers]]` printed the list, key and all."""
    monkeypatch.setenv("TRIAL_KEY", "sk-SECRETKEY-abcdef0123456789")
    path = write(
        tmp_path, '[[providers]]\ntype = "openai"\nmodel = "m"\napi_key = "${TRIAL_KEY}"\n'
    )
    message = config_refusal(path)
    assert message == f"{path}, line 1, providers: must be a table, got list"


# sleeper= and on_event=


def test_sleeper_and_on_event_given_to_from_config_are_used(
    mock_server: MockServer, tmp_path: Path
) -> None:
    mock_server.push(429, headers={"retry-after": "1"}, json={"error": {"message": "slow down"}})
    mock_server.push_text("ok", wire="openai")
    path = write(
        tmp_path,
        f"""
        [providers.main]
        type = "openai_compatible"
        model = "gpt-4.1-mini"
        base_url = "{mock_server.url}"
        api_key = "${{FAILOVER_TEST_KEY}}"
        """,
    )
    sleeper = FakeSleeper()
    events: list[object] = []
    with failover.Client.from_config(path, sleeper=sleeper, on_event=events.append) as client:
        response = client.prompt("Hi")
    assert response.text == "ok"
    assert response.provider == "main"
    assert sleeper.sleeps == [1.0]
    assert len(mock_server.requests) == 2
    scheduled = [e for e in events if isinstance(e, failover.RetryScheduled)]
    assert [(e.provider, e.delay, e.status) for e in scheduled] == [("main", 1.0, 429)]


def test_from_config_refuses_a_bad_sleeper_as_the_client_does() -> None:
    config = {"providers": {"a": {"type": "openai", "model": "m", "api_key": OTHER_KEY}}}
    expected = refusal(lambda: failover.Client({"a": _member()}, on_event="oops"))  # type: ignore[arg-type]
    message = refusal(
        lambda: failover.Client.from_config(config, on_event="oops")  # type: ignore[arg-type]
    )
    assert message.endswith(expected)


# The config itself


def test_a_path_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "failover.toml"
    message = config_refusal(missing)
    assert message.startswith(f"config file {str(missing)!r} cannot be read: ")
    assert "No such file" in message


def test_a_directory_is_refused(tmp_path: Path) -> None:
    message = config_refusal(tmp_path)
    assert message.startswith(f"config file {str(tmp_path)!r} cannot be read: ")


def test_a_file_that_is_not_toml_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[providers.a]\ntype = "openai"\nmodel = gpt-4.1\n')
    message = config_refusal(path)
    assert message.startswith(f"config file {str(path)!r} is not valid TOML: ")
    assert "line 3" in message


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "failover.toml"
    path.write_bytes(b'[providers.a]\ntype = "openai"\nmodel = "caf\xe9"\n')
    message = config_refusal(path)
    assert message == f"config file {str(path)!r} is not UTF-8 text"


@pytest.mark.parametrize(
    ("config", "kind"),
    [(42, "int"), (b"failover.toml", "bytes"), (["providers"], "list"), (None, "NoneType")],
)
def test_what_is_neither_a_path_nor_a_dict_is_refused(config: object, kind: str) -> None:
    message = config_refusal(config)
    assert message == f"from_config takes a path to a TOML file or a dict, got {kind}"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "# nothing yet\n",
        "[client]\ndeadline = 3\n",
        "[providers]\n",
    ],
)
def test_a_file_without_providers_is_refused(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    message = config_refusal(path)
    assert "no providers; add a [providers.NAME] table" in message
    assert message.startswith(str(path))


@pytest.mark.parametrize("config", [{}, {"providers": {}}, {"client": {"deadline": 3}}])
def test_a_dict_without_providers_is_refused(config: dict[str, Any]) -> None:
    message = config_refusal(config)
    assert message.startswith("providers: no providers; add a [providers.NAME] table")


# End to end


def test_a_call_through_a_file_client_works_end_to_end(
    mock_server: MockServer,
    backup_server: MockServer,
    tmp_path: Path,
    call: Callable[..., failover.Response],
) -> None:
    mock_server.push(503, json={"error": {"message": "down"}})
    backup_server.push(200, json=chat_answer(1000, 500))
    path = write(
        tmp_path,
        f"""
        [client]
        deadline = 30

        [client.prices."gpt-4.1-mini"]
        input = 1
        output = 2

        [retry]
        max_retries = 0
        max_retries_last = 0

        [providers.first]
        type = "anthropic"
        model = "claude-haiku-4-5"
        base_url = "{mock_server.url}"
        api_key = "${{FAILOVER_TEST_KEY}}"

        [providers.second]
        type = "openai_compatible"
        model = "gpt-4.1-mini"
        base_url = "{backup_server.url}"
        api_key = "sk-test-other-87654321"
        headers = {{ X-Team = "search" }}
        params = {{ service_tier = "flex" }}
        """,
    )
    with failover.Client.from_config(path, sleeper=FakeSleeper()) as client:
        response = call(client)
    assert response.text == "Hello"
    assert response.provider == "second"
    assert [a.provider for a in response.attempts] == ["first", "second"]
    # The client's price table was read: 1000 in at $1/M, 500 out at $2/M.
    assert response.cost == pytest.approx(0.002)
    first, second = mock_server.requests[0], backup_server.requests[0]
    assert first.headers["x-api-key"] == SECRET
    assert second.headers["authorization"] == f"Bearer {OTHER_KEY}"
    assert second.headers["x-team"] == "search"
    assert second.json["service_tier"] == "flex"
    assert second.json["model"] == "gpt-4.1-mini"


def test_sync_and_async_calls_through_a_dict_client(mock_server: MockServer) -> None:
    mock_server.push_text("sync", wire="openai")
    mock_server.push_text("async", wire="openai")
    config = {
        "providers": {
            "main": {"type": "openai_compatible", "model": "m", "base_url": mock_server.url}
        }
    }
    with failover.Client.from_config(config) as client:
        assert client.prompt("Hi").text == "sync"
        assert asyncio.run(client.prompt_async("Hi")).text == "async"
    assert [r.json["messages"] for r in mock_server.requests] == [
        [{"role": "user", "content": "Hi"}]
    ] * 2


def test_a_pool_of_named_members_spreads_calls(
    mock_server: MockServer, backup_server: MockServer, tmp_path: Path
) -> None:
    mock_server.push_text("east")
    backup_server.push_text("west")
    path = write(
        tmp_path,
        f"""
        [providers.gpt]
        type = "pool"
        strategy = "round_robin"

        [providers.gpt.members.east]
        type = "openai_compatible"
        model = "m"
        base_url = "{mock_server.url}"

        [providers.gpt.members.west]
        type = "openai_compatible"
        model = "m"
        base_url = "{backup_server.url}"
        """,
    )
    with failover.Client.from_config(path) as client:
        answers = [client.prompt("Hi") for _ in range(2)]
    assert sorted((r.provider, r.text) for r in answers) == [("east", "east"), ("west", "west")]


def test_limits_and_quotas_from_a_file_bound_the_calls(tmp_path: Path) -> None:
    with MockServer() as a, MockServer() as b, MockServer() as c:
        path = write(
            tmp_path,
            f"""
            [quotas.org]
            rpm = 1

            [providers.a]
            type = "openai_compatible"
            model = "m"
            base_url = "{a.url}"
            quota = "org"

            [providers.b]
            type = "openai_compatible"
            model = "m"
            base_url = "{b.url}"
            quota = "org"

            [providers.c]
            type = "openai_compatible"
            model = "m"
            base_url = "{c.url}"
            limit = {{ rpm = 1 }}
            """,
        )
        a.push_text("a")
        c.push_text("c")
        with failover.Client.from_config(path, sleeper=FakeSleeper()) as client:
            assert client.prompt("Hi").provider == "a"
            second = client.prompt("Hi")
            assert second.provider == "c"
            skipped = [x.provider for x in second.attempts if x.skipped is not None]
            assert skipped == ["a", "b"]
            # c's own limit has no room left either: the call finds none before its deadline.
            with pytest.raises(failover.DeadlineExceeded, match="capacity"):
                client.prompt("Hi", deadline=0.5)
        assert len(b.requests) == 0


# Lines, blame and hints in the harder cases.


def test_an_unknown_key_in_a_multi_line_members_array_is_named_on_its_line(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path,
        """
        [providers.gpt]
        type = "pool"
        members = [ { type = "openai", model = "gpt-4.1-mini" },
                    { type = "openai", modle = "gpt-4.1" } ]
        """,
    )
    message = config_refusal(path)
    assert f"line {line_of(path, 'modle')}, providers.gpt.members.1.modle:" in message


def test_an_unknown_key_in_an_array_of_member_tables_is_named_on_its_line(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path,
        """
        [providers.gpt]
        type = "pool"

        [[providers.gpt.members]]
        type = "openai"
        model = "gpt-4.1-mini"

        [[providers.gpt.members]]
        type = "openai"
        modle = "gpt-4.1"
        """,
    )
    message = config_refusal(path)
    assert f"line {line_of(path, 'modle')}, providers.gpt.members.1.modle:" in message


def test_a_missing_api_key_is_reported_at_the_providers_table(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [client]
        deadline = 30

        [providers.gpt]
        type = "openai"
        model = "gpt-4.1-mini"
        """,
    )
    expected = refusal(
        lambda: failover.Client({"gpt": failover.OpenAI(model="gpt-4.1-mini")}).close()
    )
    message = config_refusal(path)
    assert message.endswith(expected)
    assert f"line {line_of(path, '[providers.gpt]')}, providers.gpt" in message


def test_a_member_name_used_twice_is_reported_at_the_providers() -> None:
    provider = {"type": "openai", "model": "m", "api_key": OTHER_KEY}
    config = {
        "providers": {"a": provider, "p": {"type": "pool", "members": {"a": provider}}},
    }
    message = config_refusal(config)
    assert "is used twice" in message
    assert message.startswith("providers")


def test_a_preset_that_is_a_list_is_a_configuration_error() -> None:
    config = {
        "retry": {"preset": ["openai"]},
        "providers": {"a": {"type": "openai", "model": "m", "api_key": OTHER_KEY}},
    }
    message = config_refusal(config)
    assert "retry.preset: preset is one of openai, laravel, ruby_llm" in message


def test_a_dict_key_that_is_not_a_string_is_a_configuration_error() -> None:
    config: dict[Any, Any] = {
        1: {},
        "providers": {"a": {"type": "openai", "model": "m", "api_key": OTHER_KEY}},
    }
    message = config_refusal(config)
    assert "1" in message


def test_an_unknown_top_level_table_header_is_named_on_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [client]
        deadline = 3

        [provders.a]
        type = "openai"
        model = "m"
        """,
    )
    message = config_refusal(path)
    assert "unknown key 'provders' (did you mean 'providers'?)" in message
    assert f"failover.toml, line {line_of(path, '[provders.a]')}, provders:" in message


def test_a_type_written_as_its_class_name_gets_the_hint() -> None:
    message = config_refusal({"providers": {"a": {"type": "OpenAI", "model": "m"}}})
    assert "type 'OpenAI' (did you mean 'openai'?)" in message


def test_azure_api_version_false_asks_for_the_v1_api() -> None:
    # TOML has no null: false stands for api_version=None.
    azure = {
        "type": "azure",
        "deployment": "gpt",
        "endpoint": "https://x.openai.azure.com",
        "api_key": OTHER_KEY,
        "api_version": False,
    }
    with failover.Client.from_config({"providers": {"az": azure}}) as client:
        built = client.providers["az"]
        assert isinstance(built, failover.Azure)
        assert built.api_version is None
        assert built.base_url == "https://x.openai.azure.com/openai/v1"


def test_a_variable_without_its_closing_brace_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [providers.a]
        type = "openai"
        model = "m"
        api_key = "${KEY_A"
        """,
    )
    message = config_refusal(path)
    assert f"line {line_of(path, 'api_key')}, providers.a.api_key: a ${{ without its" in message


def test_a_key_pasted_into_another_value_is_not_echoed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
        [providers.a]
        type = "openai_compatible"
        model = "m"
        api_key = "{SECRET}"
        base_url = "htp://gw/{SECRET}"
        """,
    )
    message = config_refusal(path)
    assert SECRET not in message
    assert "providers.a.base_url" in message


def test_a_key_pasted_into_any_value_is_not_echoed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
        [client]
        deadline = "{SECRET}"

        [providers.a]
        type = "openai"
        model = "m"
        api_key = "{SECRET}"
        """,
    )
    message = config_refusal(path)
    assert SECRET not in message
    assert "client.deadline" in message and "<redacted>" in message


def test_a_key_over_plain_http_points_at_the_base_url(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [providers.a]
        type = "openai_compatible"
        model = "m"
        api_key = "k-1234567890"
        base_url = "http://gateway.example/v1"
        """,
    )
    message = config_refusal(path)
    assert f"line {line_of(path, 'base_url')}, providers.a.base_url:" in message


def test_a_hedge_table_builds_the_hedge(tmp_path: Path) -> None:
    with MockServer() as slow, MockServer() as fast:
        slow.push_text("slow", delay=3.0)
        fast.push_text("fast")
        path = write(
            tmp_path,
            f"""
            [client]
            hedge = {{ after = 0.2, max_extra = 1.0 }}

            [providers.a]
            type = "openai_compatible"
            model = "m"
            base_url = "{slow.url}"

            [providers.b]
            type = "openai_compatible"
            model = "m"
            base_url = "{fast.url}"
            """,
        )
        with failover.Client.from_config(path) as client:
            r = client.prompt("Hi")
        assert r.provider == "b" and r.attempts[0].hedged
    path.write_text(path.read_text().replace("after = 0.2", "after = -1"))
    message = config_refusal(path)
    assert f"line {line_of(path, 'hedge')}, client.hedge.after: Hedge(after=) is seconds" in message


def test_a_refusal_naming_two_keys_points_at_the_one_it_names_first(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [providers.gpt]
        type = "openai"
        model = "m"
        api_key = "k-1234567890"
        speech_model = ""
        """,
    )
    message = config_refusal(path)
    assert f"line {line_of(path, 'speech_model')}, providers.gpt.speech_model:" in message
