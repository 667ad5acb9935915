"""The sleeper every client without one of its own uses inside ``fake_sleep()``."""

from __future__ import annotations

from typing import Any

active: Any = None
