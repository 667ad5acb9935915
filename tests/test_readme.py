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
