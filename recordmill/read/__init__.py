"""Reading a dataset back: :func:`open` gives a :class:`Dataset` (views, ``ds[i]``, passes);
``files`` holds the open partition files and their checks, ``groups`` the decoded row groups,
``gather`` takes rows in any order; ``verify``, ``decode`` and ``torch`` build on them. Imports
nothing of the write side."""

from recordmill.read.dataset import Dataset, ReadStats, group_rows, open, open_partition, to_numpy

__all__ = ["Dataset", "ReadStats", "group_rows", "open", "open_partition", "to_numpy"]
