"""Checks of a loader state given to ``load_state_dict()`` (``recordmill.torch``): a saved state is
data, so a damaged or forged one is refused in one line, field by field, before any of it is
taken: what it was saved on must be what this loader reads, and every number must be one it can
be (a whole number in its range: a position within the epoch, rejects no more than the rows
read)."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_EPOCH", "check_identity", "mapping", "whole"]

# The epochs a state may name: 0 to 2**31 - 1 (an epoch's order is drawn from seed + epoch).
MAX_EPOCH = 2**31 - 1


def mapping(state: Any) -> Mapping[str, Any]:
    if not isinstance(state, Mapping):
        raise ValueError(
            f"cannot resume: a state is the dict loader.state_dict() gives, got "
            f"{type(state).__name__}"
        )
    return state


def whole(state: Mapping[str, Any], key: str, lo: int, hi: int | None, default: Any = None) -> int:
    """``state[key]`` (``default`` where it has none), a whole number from ``lo`` to ``hi`` (no
    bound: None)."""
    value = state.get(key, default)
    number = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not number or value < lo or (hi is not None and value > hi):
        upto = "" if hi is None else f" to {hi:,}"
        raise ValueError(
            f"cannot resume: the saved state has {key}={value!r}; expected a whole number from "
            f"{lo:,}{upto}"
        )
    return int(value)


def check_identity(state: Mapping[str, Any], mine: Mapping[str, Any], where: str) -> None:
    """The state is of what this loader reads (``mine``, its own state): one dataset or a
    mixture, the version, the rows (``data``), the seed, shuffle and rows an epoch."""
    if ("mixture" in state) != ("mixture" in mine):
        kinds = ("a mixture", "one dataset")
        then, now = kinds if "mixture" in state else kinds[::-1]
        raise ValueError(f"cannot resume: the saved state is of {then}, this loader reads {now}")
    if "mixture" in state and not isinstance(state["mixture"], Mapping):
        raise ValueError(
            f"cannot resume: the saved state's mixture is {state['mixture']!r}; expected the "
            "dict of its sources and weights that a mixture's state_dict() gives"
        )
    saved = state.get("version")  # states saved before versions existed have none
    if saved is not None and mine["version"] is not None and saved != mine["version"]:
        raise ValueError(
            f"cannot resume: the saved state is of version {saved!r} of the dataset, this one "
            f"reads version {mine['version']}; open version={saved!r} to resume it"
        )
    if state.get("data", mine["data"]) != mine["data"]:  # states from before it have none
        raise ValueError(
            f"cannot resume: the saved state is of other rows than version {mine['version']} "
            f"of {where} holds (data {state['data']!r}, this one {mine['data']}): the "
            "dataset was replaced since the state was saved; start a new epoch instead"
        )
    # A mixture's rows per epoch follow its weights, which a resume may change.
    keys = ("seed", "shuffle") if "mixture" in mine else ("seed", "shuffle", "rows")
    for key in keys:
        saved = state.get(key, mine[key])
        if saved != mine[key] or isinstance(saved, bool) != isinstance(mine[key], bool):
            raise ValueError(
                f"cannot resume: the saved state has {key}={saved!r}, this one "
                f"{mine[key]!r}; resume with the dataset and settings the state was saved with"
            )
