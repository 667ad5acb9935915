"""The README's pytest example runs as written."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_testing_example_passes(mock_server, fake_sleep):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    example = next(b for b in blocks if "def test_my_app_waits_out_a_rate_limit" in b)
    namespace: dict[str, object] = {}
    exec(compile(example, str(README), "exec"), namespace)
    namespace["test_my_app_waits_out_a_rate_limit"](mock_server, fake_sleep)  # type: ignore[operator]
    assert fake_sleep.sleeps == [3.0]


def test_every_python_block_in_the_readme_compiles():
    # Not run (they call real providers), but each is valid Python as written:
    # no `await` outside an async function, no stray syntax.
    # A block inside a list item is indented with it.
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 3
    for block in blocks:
        compile(textwrap.dedent(block), str(README), "exec")


def test_the_readme_stands_alone():
    """Found hardening the first slice."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "../shared" not in readme and "DESIGN" not in readme


def test_the_readme_batch_example_keeps_to_its_limits(mock_server, backup_server):
    """The README's embed_corpus, run on two mock providers whose limits pace it: one with room
    for 5 requests a minute, the other for 3; 12 requests in all."""
    import asyncio

    import failover
    from failover.testing import FakeSleeper

    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    example = next(b for b in blocks if "async def embed_corpus" in b)
    namespace: dict[str, object] = {}
    exec(compile(example, str(README), "exec"), namespace)
    fake = FakeSleeper()
    start = fake.time()

    def provider(server, rpm):
        return failover.OpenAICompatible(
            "m",
            base_url=server.url,
            embedding_model="e",
            embedding_limit=failover.Limit(rpm=rpm),
        )

    client = failover.Client(
        {"openai": provider(mock_server, 5), "azure": provider(backup_server, 3)}, sleeper=fake
    )
    for server, requests in ((mock_server, 9), (backup_server, 3)):
        for _ in range(requests):
            server.push_embeddings([[0.5], [0.5]])
    texts = [f"text {i}" for i in range(24)]
    vectors = asyncio.run(namespace["embed_corpus"](client, texts, batch=2))  # type: ignore[operator]
    assert len(vectors) == 24
    # 5 to openai and 3 to azure at once; the other 4 waited a minute for a window.
    assert fake.time() - start == 60.0
    stats = client.stats()
    assert (stats.providers["openai"].answered, stats.providers["azure"].answered) == (9, 3)


def test_the_readme_config_file_builds_its_client(tmp_path, monkeypatch):
    block = re.search(r"```toml\n(.*?)```", README.read_text(), flags=re.S)
    assert block is not None
    path = tmp_path / "failover.toml"
    path.write_text(block.group(1))
    for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY"):
        monkeypatch.setenv(variable, f"sk-test-{variable.lower()}-0123456789")
    import failover

    with failover.Client.from_config(path) as client:
        assert list(client.providers) == ["claude", "gpt"]
        pool = client.providers["gpt"]
        assert isinstance(pool, failover.Pool) and pool.strategy == "least_busy"
