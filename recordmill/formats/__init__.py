"""Helpers for the data formats that built-in plugins read (and that any plugin may use): the image
pipeline (``images``), im2rec/TorchRecord list files (``filelists``), MNIST idx files (``idx``),
TFRecord files (``tfrecord``), and the demo inputs of every built-in plugin (``demo``)."""
