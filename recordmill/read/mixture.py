"""A mixture of datasets: ``recordmill.mix(sources, weights=...)`` reads several datasets as one,
each row drawn from source ``i`` with probability ``weights[i]``.

An epoch of a mixture is :mod:`~recordmill.read.mixing`'s draw of sources, each source giving its
rows in its own seeded order (a shuffle, shard-aware where it is read through a disk cache, or its
stored order). It ends as ``until`` says: at the first draw from a source that has no rows left
this epoch (``"first_exhausted"``), once every source was read whole, those that ran out
starting over (``"all_exhausted"``), or when every row was read once, a source that runs out
leaving the draw to the others (``"all_exhausted_without_replacement"``); or after ``rows`` rows,
every source starting over as often as it must. Rows are numbered across the sources (source
``i``'s row ``r`` is ``offsets[i] + r``): an epoch's order is an array of those numbers, and the
PyTorch loaders deal it out to ranks and workers as they deal a single dataset's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from recordmill.dataset.versions import fingerprint
from recordmill.read import mix_arguments, mixing
from recordmill.read.dataset import Dataset, undecoded
from recordmill.read.dataset import open as open_dataset
from recordmill.read.formats import check_format
from recordmill.read.formats import columns as batch_columns
from recordmill.read.machine.shared_orders import shared_order
from recordmill.read.mix_arguments import Steps
from recordmill.read.options import CacheLimit

__all__ = ["Mixture", "mix"]


def mix(
    sources: Sequence[Any] | Mapping[str, Any],
    weights: Any = None,
    *,
    seed: int = 0,
    until: str = "first_exhausted",
    rows: int | None = None,
    shuffle: bool = True,
    source_column: str | None = None,
    columns: Sequence[str] | None = None,
    decode: Mapping[str, Callable[[Any], Any]] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    cache_limit: CacheLimit = None,
) -> Mixture:
    """Several datasets read as one (see :class:`Mixture`).

    ``sources``: paths/URIs or opened :class:`~recordmill.Dataset`s (each read as opened: its
    version, columns, decode and disk cache), or a dict of them by name. ``weights``: one number
    per source (normalised; by default each source's row count), a dict by name, or a schedule,
    ``[(0, weights), (row, weights), ...]``, weights that change at those rows of each epoch.
    ``until``/``rows``: when an epoch ends (see the module). ``source_column``: a column of that
    name giving each row's source name. ``columns``, ``decode``, ``cache_dir``, ``cache_limit``
    apply to the sources given as paths (``columns`` to all).
    """
    names, given = mix_arguments.named(sources)
    if not given:
        raise ValueError("mix() needs at least one source")
    opened = [
        s
        if isinstance(s, Dataset)
        else open_dataset(os.fspath(s), decode=decode, cache_dir=cache_dir, cache_limit=cache_limit)
        for s in given
    ]
    if columns is not None:
        opened = [ds.select(columns) for ds in opened]
    mix_arguments.same_columns(opened, names)
    if rows is not None and (type(rows) is not int or rows < 1):
        raise ValueError(f"rows must be a whole number from 1 (rows per epoch), got {rows!r}")
    if until not in mixing.UNTIL:
        raise ValueError(f"until must be one of {', '.join(mixing.UNTIL)}; got {until!r}")
    steps = mix_arguments.schedule(weights, names, [len(ds) for ds in opened])
    repeats = rows is not None or until == "all_exhausted"
    for k, ds in enumerate(opened):
        if repeats and not len(ds) and any(w[k] for _, w in steps):
            raise ValueError(
                f"source {names[k]!r} has no rows, so it cannot start over as rows= or "
                f"until='all_exhausted' would have it: give it weight 0, or leave it out"
            )
    return Mixture(opened, names, steps, seed, until, rows, shuffle, source_column)


class Mixture:
    """Rows of several datasets with the same columns, interleaved by weight, epoch by epoch."""

    def __init__(
        self,
        datasets: list[Dataset],
        names: list[str],
        steps: Steps,
        seed: int,
        until: str,
        rows: int | None,
        shuffle: bool,
        source_column: str | None,
    ):
        self.datasets, self.names, self.steps = datasets, names, steps
        self.seed, self.until, self.rows_per_epoch, self.shuffle = seed, until, rows, shuffle
        self.source_column = source_column
        self.sizes = [len(ds) for ds in datasets]
        self.offsets = np.cumsum([0, *self.sizes])
        schema = datasets[0].schema
        if source_column is not None:
            schema = schema.append(pa.field(source_column, pa.string()))
        self.schema = schema
        self.version = None  # each source has its own (``state()`` lists them)
        self.cache = None  # each source has its own disk cache, if any
        self.blocks: list[int] | None = None  # each source's order blocks, once fixed
        self._resumed: tuple[int, Steps] | None = None
        self._order: tuple[Any, np.ndarray] | None = None

    def __repr__(self) -> str:
        weights = ", ".join(f"{w:.4g}" for w in self.steps[0][1])
        return f"<recordmill.Mixture of {', '.join(self.names)}: weights {weights}>"

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_order": None}  # an epoch's order is computed again

    def __len__(self) -> int:
        """The rows of epoch 0 (an epoch may differ by a few where one ends as a source runs out)."""
        return len(self.order(0))

    @property
    def total_rows(self) -> int:
        """Every source's rows, together: the row numbers an order holds are below it."""
        return int(self.offsets[-1])

    def warm(self) -> Mixture:
        for ds in self.datasets:
            ds.warm()
        return self

    def select(self, columns: Sequence[str]) -> Mixture:
        """The same mixture with only ``columns`` (the source column is kept when named)."""
        plain = [c for c in columns if c != self.source_column]
        named = self.source_column if self.source_column in columns else None
        return _like(self, [ds.select(plain) for ds in self.datasets], named)

    def undecoded(self) -> Mixture:
        """The same mixture, its sources read without their ``decode`` functions."""
        return _like(self, [undecoded(ds)[0] for ds in self.datasets], self.source_column)

    # --- the order of an epoch ----------------------------------------------------------------

    def order(self, epoch: int = 0) -> np.ndarray:
        """Epoch ``epoch``'s rows, as numbers across the sources (see the module)."""
        steps = self.epoch_steps(epoch)
        key = (epoch, steps, tuple(self._blocks()))
        if self._order is None or self._order[0] != key:
            self._order = (key, _drawn_once(self, epoch, key))
        return self._order[1]

    def shuffled(self, seed: int, epoch: int = 0, blocks: int | None = None) -> np.ndarray:
        """:meth:`order` (what the PyTorch loaders ask a dataset for; the seed is the mixture's)."""
        return self.order(epoch)

    def order_blocks(self) -> int:
        return 0  # each source's are its own (``state()``)

    def epoch_steps(self, epoch: int) -> Steps:
        """The weights of epoch ``epoch``: the schedule, or those a resumed state gave it."""
        if self._resumed is not None and self._resumed[0] == epoch:
            return self._resumed[1]
        return self.steps

    def _blocks(self) -> list[int]:
        if self.blocks is None:
            self.blocks = [ds.order_blocks() if self.shuffle else 0 for ds in self.datasets]
        return self.blocks

    # --- rows ---------------------------------------------------------------------------------

    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The source of each row number, and the row within it."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.total_rows):
            raise IndexError(f"row numbers of a mixture are 0 to {self.total_rows - 1}")
        source = np.searchsorted(self.offsets, ids, side="right") - 1
        return source, ids - self.offsets[source]

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.rows([index])[0]

    def rows(self, ids: Sequence[int] | np.ndarray) -> list[dict[str, Any]]:
        """The row dicts of these row numbers, in their order (each source's gathered at once)."""
        source, local = self.locate(np.asarray(ids))
        out: list[Any] = [None] * len(source)
        for i in np.unique(source):
            where = np.flatnonzero(source == i)
            for k, row in zip(where, self.datasets[i].rows(local[where]), strict=True):
                if self.source_column is not None:
                    row[self.source_column] = self.names[i]
                out[k] = row
        return out

    def iter_rows(
        self, indices: Sequence[int] | np.ndarray | None = None, batch_size: int = 1024
    ) -> Iterator[dict[str, Any]]:
        """Row dicts of these row numbers (by default epoch 0's order), a batch at a time."""
        ids = self.order(0) if indices is None else np.asarray(indices, dtype=np.int64)
        for lo in range(0, len(ids), batch_size):
            yield from self.rows(ids[lo : lo + batch_size])

    def iter_batches(
        self,
        batch_size: int = 1024,
        columns: Sequence[str] | None = None,
        shuffle: bool | None = None,
        seed: int | None = None,
        format: str = "numpy",
        *,
        epoch: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> Iterator[Any]:
        """As :meth:`Dataset.iter_batches` (``shuffle`` and ``seed``: the mixture's own unless
        given), epoch ``epoch``'s batches for ``rank`` of ``world_size`` (batch b of the epoch
        goes to rank ``b % world_size``, as the PyTorch loaders deal them): dicts of numpy
        arrays and lists, or Arrow record batches (``format="arrow"``, values not decoded)."""
        if type(batch_size) is not int or batch_size < 1:
            raise ValueError(f"batch_size must be a whole number from 1, got {batch_size!r}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in 0..{world_size - 1}, got {rank}")
        check_format(format)
        m = _reordered(self, shuffle, seed)
        m = m.select(columns) if columns is not None else m
        return _batches(m, batch_size, format, epoch, rank, world_size)

    def take(self, ids: Sequence[int] | np.ndarray) -> pa.RecordBatch:
        """These row numbers, in their order, as one Arrow record batch (values not decoded)."""
        return _gather(self, np.asarray(ids))[0]

    # --- resuming -----------------------------------------------------------------------------

    def identity(self) -> list[dict[str, Any]]:
        """What each source is: name, version, rows, and a hash of its files (a state's check)."""
        return [
            {"name": n, "version": ds.version, "rows": len(ds), "data": fingerprint(ds.manifest)}
            for n, ds in zip(self.names, self.datasets, strict=True)
        ]

    def state(self, epoch: int) -> dict[str, Any]:
        """The mixture's part of a loader's state: its sources, and the weights of the epoch."""
        steps = [[start, list(w)] for start, w in self.epoch_steps(epoch)]
        return {"sources": self.identity(), "steps": steps, "blocks": list(self._blocks())}

    def resume(self, saved: Mapping[str, Any], epoch: int, position: int) -> None:
        """Continue epoch ``epoch`` from row ``position`` of a state saved as :meth:`state`
        gives it: the rows before it as they were drawn, this mixture's weights from it on."""
        before = _saved_steps(saved, self.identity())
        self._resumed = (epoch, _continued(before, self.steps, position))
        self.blocks = [int(b) for b in saved.get("blocks", self._blocks())]


def resumed(m: Mixture) -> tuple[Any, Any]:
    """What ``Mixture.resume`` changes of ``m`` (for :func:`resume_as`)."""
    return m._resumed, m.blocks


def resume_as(m: Mixture, resumed: tuple[Any, Any]) -> None:
    """``m`` back to what :func:`resumed` gave (a state refused after ``Mixture.resume``)."""
    m._resumed, m.blocks = resumed


def _drawn_once(m: Mixture, epoch: int, key: tuple[Any, ...]) -> np.ndarray:
    """Epoch ``epoch``'s rows of ``m`` (``key``: what :meth:`Mixture.order` keeps it by), drawn
    once a machine where it is large (read/machine/shared_orders.py), by what it is of."""
    views = [(ds._start, ds._stop) for ds in m.datasets]  # shards share identities
    settings = (m.seed, m.until, m.rows_per_epoch, m.shuffle)
    named = (m.identity(), views, *settings)
    rows = m.rows_per_epoch or m.total_rows
    orders = m.datasets[0]._groups.orders
    return shared_order(orders, rows, ("mixture", *named, *key), lambda: _draw(m, epoch))


def _draw(m: Mixture, epoch: int) -> np.ndarray:
    """Epoch ``epoch``'s rows of ``m``, drawn (see :meth:`Mixture.order`)."""
    plan = mixing.plan_epoch(
        m.sizes, m.epoch_steps(epoch), m.seed, epoch, m.until, m.rows_per_epoch
    )
    ids = np.empty(len(plan), dtype=np.int64)
    for i in range(len(m.datasets)):
        where = np.flatnonzero(plan.source == i)
        ids[where] = m.offsets[i] + _rows_of(m, i, epoch, plan.nth[where])
    return ids


def _gather(m: Mixture, ids: np.ndarray) -> tuple[pa.RecordBatch, np.ndarray]:
    """The rows of ``ids`` as one batch (each source's taken at once), and their sources."""
    source, local = m.locate(ids)
    pieces, where = [], []
    for i in np.unique(source):
        at = np.flatnonzero(source == i)
        table = m.datasets[i].take(local[at])
        if m.source_column is not None:
            names = pa.array([m.names[i]] * len(at), pa.string())
            table = table.append_column(m.source_column, names)
        pieces.append(table.cast(m.schema))
        where.append(at)
    if not pieces:
        return pa.RecordBatch.from_pylist([], schema=m.schema), source
    back = np.argsort(np.concatenate(where), kind="stable")
    table = pa.concat_tables(pieces).take(pa.array(back)).combine_chunks()
    return table.to_batches()[0], source


def _decoded(batch: pa.RecordBatch, source: np.ndarray, datasets: list[Dataset]) -> dict[str, Any]:
    """A batch as numpy columns, each value decoded as its own source decodes it."""
    out = batch_columns(batch, {})
    for name in out:
        decoders = [ds._decode.get(name) for ds in datasets]
        if any(decoders):
            out[name] = [
                f(v) if (f := decoders[s]) is not None else v
                for v, s in zip(out[name], source, strict=True)
            ]
    return out


def _saved_steps(saved: Mapping[str, Any], sources: list[dict[str, Any]]) -> Steps:
    """The weights of a state saved as :meth:`Mixture.state` gives it, once its sources are
    checked to be ``sources`` (what :meth:`Mixture.identity` says of the mixture's)."""
    _check_sources(saved.get("sources", []), sources)
    before = tuple((int(s), tuple(float(x) for x in w)) for s, w in saved["steps"])
    if len(before[0][1]) != len(sources) or before[0][0] != 0:
        raise ValueError(f"cannot resume: the saved state's weights are {saved['steps']!r}")
    return before


def _continued(saved: Steps, mine: Steps, position: int) -> Steps:
    """An epoch's weights when a state saved with ``saved`` resumes at ``position`` on a mixture
    whose own are ``mine``: the saved ones before it, a new step there if the weights differ."""
    kept = [step for step in saved if step[0] < position]
    then = [step for step in saved if step[0] <= position][-1]
    now = [step for step in mine if step[0] <= position][-1]
    if then[1] != now[1]:  # other weights from here: a new segment
        kept.append((position, now[1]))
    elif then[0] == position:
        kept.append(then)
    return tuple(kept + [step for step in mine if step[0] > position])


def _seed(*key: int) -> int:
    return int(np.random.SeedSequence(list(key)).generate_state(1)[0])


def _check_sources(saved: list[Mapping[str, Any]], mine: list[dict[str, Any]]) -> None:
    if len(saved) != len(mine):
        raise ValueError(
            f"cannot resume: the saved state is of a mixture of {len(saved)} sources, this one "
            f"has {len(mine)}; resume with the sources the state was saved with"
        )
    for k, (then, now) in enumerate(zip(saved, mine, strict=True)):
        for key in ("version", "rows", "data"):
            if then.get(key) != now[key]:
                raise ValueError(
                    f"cannot resume: source {k} ({now['name']}) has {key} {now[key]!r}, the "
                    f"saved state's source {k} ({then.get('name')}) had {then.get(key)!r}; "
                    "resume with the sources (and versions) the state was saved with"
                )


def _like(m: Mixture, datasets: list[Dataset], source_column: str | None) -> Mixture:
    """This mixture (its weights, seed and epochs) over other views of its sources."""
    args = (m.steps, m.seed, m.until, m.rows_per_epoch, m.shuffle)
    return Mixture(datasets, m.names, *args, source_column)


def _reordered(m: Mixture, shuffle: bool | None, seed: int | None) -> Mixture:
    """The mixture with another ``shuffle`` or ``seed`` where one is given (the same sources)."""
    if (shuffle is None or shuffle == m.shuffle) and (seed is None or seed == m.seed):
        return m
    seed = m.seed if seed is None else seed
    shuffle = m.shuffle if shuffle is None else shuffle
    args = (m.steps, seed, m.until, m.rows_per_epoch, shuffle, m.source_column)
    return Mixture(m.datasets, m.names, *args)


def _batches(
    m: Mixture, size: int, fmt: str, epoch: int, rank: int, world_size: int
) -> Iterator[Any]:
    """``Mixture.iter_batches``: batch b of the epoch's order for rank ``b % world_size``."""
    order = m.order(epoch)
    for start in range(rank * size, len(order), world_size * size):
        batch, source = _gather(m, order[start : start + size])
        yield batch if fmt == "arrow" else _decoded(batch, source, m.datasets)


def _rows_of(m: Mixture, i: int, epoch: int, nth: np.ndarray) -> np.ndarray:
    """Source ``i``'s rows for its ``nth`` rows drawn in the epoch (pass ``nth // size``)."""
    size = m.sizes[i]
    if not m.shuffle:
        return nth % size
    out = np.empty(len(nth), dtype=np.int64)
    passes = nth // size
    repeats = m.rows_per_epoch is not None or m.until == "all_exhausted"
    for p in np.unique(passes):
        where = passes == p
        if repeats:  # a new shuffle for each pass of each epoch
            seed, pass_ = _seed(m.seed, i, epoch), int(p)
        else:  # one pass an epoch: the epoch's, so a cached order carries over
            seed, pass_ = _seed(m.seed, i), epoch
        order = m.datasets[i].shuffled(seed, pass_, m._blocks()[i])
        out[where] = order[nth[where] % size]
    return out
