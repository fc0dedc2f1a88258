"""What a plugin author reads: the hooks (``hookspecs``), the options object, finding and loading
plugins (``manager``), the MindRecord ``mr_api.py`` shim, and the built-in plugins (``builtin/``)."""
