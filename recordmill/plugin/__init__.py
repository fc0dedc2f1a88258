"""What a plugin author reads: the hooks (``hookspecs``), the options object, finding and loading
plugins (``manager``), and the MindRecord ``mr_api.py`` shim. The built-in plugins are the
repository's top-level ``plugins/`` folder (``recordmill/builtin_plugins/`` in the wheel)."""
