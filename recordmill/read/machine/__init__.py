"""What one machine's processes share when they read: the disk cache of datasets on object
storage or in Parquet (``cache``), the user's private cache folder it lives in (``cache_folder``),
the record of what the machine has checked (``checked``), and epoch orders drawn once a machine
(``shared_orders``)."""
