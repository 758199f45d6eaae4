"""A point as text: one spelling (`steps=4,cfg=true`) for commands, messages, tables and records."""

from __future__ import annotations

from collections.abc import Mapping


def param_value(value: object) -> str:
    """`true`/`false` for a bool, as a `.wf` file and `NAME=VALUE` options spell them; else str."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def point_text(params: Mapping[str, object], sep: str = ",", eq: str = "=") -> str:
    """`steps=4,cfg=true`: NAME `eq` VALUE per param, joined by `sep`, in the mapping's order."""
    return sep.join(f"{name}{eq}{param_value(value)}" for name, value in params.items())
