"""Conformance against REAL recorded provider traffic (DESIGN §5).

Every model call recorded in ``<repo>/../shared/fixtures/recorded/`` (ten provider folders, see
its SOURCES.md) is played back byte for byte through ``failover.testing.MockServer`` and called
through the public API with the provider class of its folder, a single provider, no retries and
a FakeSleeper. The recordings are read from the shared folder at test time and never copied into
this repository; when the folder is absent the suites skip.

- ``loader``: reads the cassettes into ``Recording`` values and says which are replayed and why
  the others are not;
- ``oracle``: what each recording says, decoded from its own bytes (never through failover), and
  the error classes and wait hints read from each error recording by hand;
- ``replay``: plays a recording back and calls it through the public API;
- ``test_recordings``: every interaction is replayed or skipped with its reason;
- ``test_chat``: the non-streaming recordings (chat, errors, embeddings);
- ``test_streams``: the streamed recordings (SSE and NDJSON).
"""
