"""What ``mix()`` makes of its arguments, checked: the sources' names, their columns (the same
in every source), and the weights as a schedule of normalised steps."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from recordmill.errors import ColumnError
from recordmill.read.dataset import Dataset

# A weight schedule: (the epoch's row it starts at, each source's weight), the first at row 0.
Steps = tuple[tuple[int, tuple[float, ...]], ...]


def named(sources: Sequence[Any] | Mapping[str, Any]) -> tuple[list[str], list[Any]]:
    """The sources' names (the dict's keys, else each path's last part) and the sources."""
    if isinstance(sources, Mapping):
        return [str(k) for k in sources], list(sources.values())
    if isinstance(sources, (str, os.PathLike, Dataset)):
        raise TypeError("give mix() a list (or dict) of sources, not one")
    names = []
    for k, s in enumerate(sources):
        where = s._groups.files.store.root if isinstance(s, Dataset) else os.fspath(s)
        names.append(os.path.basename(str(where).rstrip("/")) or str(k))
    return names, list(sources)


def same_columns(datasets: list[Dataset], names: list[str]) -> None:
    """One line naming the first field where a source's columns differ from the first's."""
    first = datasets[0].schema
    for name, ds in zip(names[1:], datasets[1:], strict=True):
        for field in first:
            if field.name not in ds.schema.names:
                raise ColumnError(
                    f"source {name!r} has no column {field.name!r}, which {names[0]!r} has; "
                    f"give columns= the ones every source has"
                )
            other = ds.schema.field(field.name)
            if other.type != field.type:
                raise ColumnError(
                    f"column {field.name!r} is {other.type} in source {name!r} and {field.type} "
                    f"in {names[0]!r}; a mixture's sources hold the same columns"
                )
        extra = [c for c in ds.schema.names if c not in first.names]
        if extra:
            raise ColumnError(
                f"source {name!r} has a column {extra[0]!r} that {names[0]!r} has not; give "
                "columns= the ones every source has"
            )


def schedule(weights: Any, names: list[str], sizes: list[int]) -> Steps:
    """``weights`` as a schedule of normalised steps, checked."""
    if weights is None:
        weights = sizes
    if isinstance(weights, Mapping):
        unknown = [k for k in weights if k not in names]
        if unknown:
            raise ValueError(f"weights names no source {unknown[0]!r}; sources: {names}")
        weights = [weights.get(n, 0) for n in names]
    pairs = list(weights)
    if not pairs or not isinstance(pairs[0], (tuple, list)):
        pairs = [(0, pairs)]
    steps: list[tuple[int, tuple[float, ...]]] = []
    for start, w in pairs:
        if type(start) is not int or start < (steps[-1][0] + 1 if steps else 0):
            raise ValueError(
                f"a weight schedule's rows start at 0 and increase, got {[p[0] for p in pairs]}"
            )
        steps.append((start, _normalised(w, names)))
    if steps[0][0] != 0:
        raise ValueError(f"a weight schedule starts at row 0, got {steps[0][0]}")
    return tuple(steps)


def _normalised(weights: Any, names: list[str]) -> tuple[float, ...]:
    w = [float(x) for x in weights]
    if len(w) != len(names):
        raise ValueError(f"weights has {len(w)} numbers for {len(names)} sources ({names})")
    if any(not np.isfinite(x) or x < 0 for x in w) or not sum(w) > 0:
        raise ValueError(f"weights must be finite, at least 0 and not all 0; got {w}")
    total = math.fsum(w)
    return tuple(x / total for x in w)
