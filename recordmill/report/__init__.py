"""See a dataset: ``recordmill show PATH`` / ``recordmill.show(path)`` writes one self-contained
HTML page with its header, schema and column statistics, label distribution, sample rows as
thumbnails, rejects and partitions.

A layer above ``read/``: it imports only ``read/`` and ``dataset/`` of recordmill, and matplotlib
(the ``show`` extra) only when a page is made. ``build`` makes the page from ``scan`` (one pass
over the small columns), ``stats`` (their summaries), ``sample`` (the rows shown), ``images``
(thumbnails), ``charts`` (matplotlib), ``summary`` (the words) and ``page`` (the HTML).
"""

from recordmill.report.build import Report, show

__all__ = ["Report", "show"]
