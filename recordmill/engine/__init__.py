"""The write engine: settings -> plan -> tasks (rows checked and staged) -> partitions -> commit.

``pipeline`` runs the phases; ``tasks`` and ``convert`` turn a plugin's rows into checked Arrow
batches in the workers; ``partitions``, ``fragments`` and ``writers`` make the partition files
(``direct`` straight from the rows when the plugin announces its counts); ``output``, ``commit``
and ``lease`` are the output folder's life: lock, staging, the commit steps, release."""
