"""The sleeper every client without one of its own uses inside ``fake_sleep()``."""

active: object = None
