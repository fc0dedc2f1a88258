"""recordmill's own format, shared by the read and the write side and importing neither: where
files go (``layout``), the manifest, schemas and how values are stored (``schema``, ``columns``),
checksums, the global row order (``rows``), folders on any filesystem (``storage``) and the
rejects list."""
