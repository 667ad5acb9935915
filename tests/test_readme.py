"""The README's and the docs' code: every Python block compiles, the ones that can run
against MockServers run as written, the README is a front page whose links resolve, and the
docs site builds strict."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))


def blocks(language: str) -> list[tuple[Path, str]]:
    """Every fenced block of ``language`` in the README and the docs, with its file."""
    found = []
    for path in (README, *DOCS):
        for block in re.findall(rf"```{language}\n(.*?)```", path.read_text(), flags=re.S):
            found.append((path, block))
    return found


def test_the_readme_testing_example_passes(mock_server, fake_sleep):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    example = next(b for b in blocks if "def test_my_app_waits_out_a_rate_limit" in b)
    namespace: dict[str, object] = {}
    exec(compile(example, str(README), "exec"), namespace)
    namespace["test_my_app_waits_out_a_rate_limit"](mock_server, fake_sleep)  # type: ignore[operator]
    assert fake_sleep.sleeps == [3.0]


def test_every_python_block_of_the_readme_and_the_docs_compiles():
    # Not run (they call real providers), but each is valid Python as written:
    # no `await` outside an async function, no stray syntax.
    # A block inside a list item is indented with it.
    found = blocks("python")
    assert len(found) >= 20
    for path, block in found:
        compile(textwrap.dedent(block), str(path), "exec")


def test_the_readme_stands_alone():
    """Found hardening the first slice."""

    for path in (README, *DOCS):
        text = path.read_text()
        assert "../shared" not in text and "DESIGN" not in text, path


def test_the_readme_batch_example_keeps_to_its_limits(mock_server, backup_server):
    """The README's embed_corpus, run on two mock providers whose limits pace it: one with room
    for 5 requests a minute, the other for 3; 12 requests in all."""
    import asyncio

    import failover
    from failover.testing import FakeSleeper

    example = next(b for _, b in blocks("python") if "async def embed_corpus" in b)
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
    [(_, block)] = [(p, b) for p, b in blocks("toml") if "[providers.claude]" in b]
    path = tmp_path / "failover.toml"
    path.write_text(block)
    for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY"):
        monkeypatch.setenv(variable, f"sk-test-{variable.lower()}-0123456789")
    import failover

    with failover.Client.from_config(path) as client:
        assert list(client.providers) == ["claude", "gpt"]
        pool = client.providers["gpt"]
        assert isinstance(pool, failover.Pool) and pool.strategy == "least_busy"


def test_the_readme_is_a_front_page_whose_links_resolve():
    text = README.read_text()
    assert len(text.splitlines()) < 200
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert "docs/index.md" in local
    for link in local:
        assert (ROOT / link).exists(), link


def test_the_docs_site_builds_strict(tmp_path):
    import subprocess
    import sys

    pytest.importorskip("mkdocs", reason="make installs the docs tools (`make docs`)")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    # The API reference is generated from the docstrings.
    assert 'id="failover.Client.prompt"' in (tmp_path / "site/reference/index.html").read_text()
