"""Writes the TFRecord files beside it with TensorFlow itself (tests/test_tfrecord_plugin.py reads
them; TensorFlow is not needed to run the tests). Run again with tensorflow-cpu installed:

    python tests/data/tfrecord/make.py

The rows are ``EXPECTED`` in the test: record i has ``label`` i, ``image`` bytes of i, ``score``
with one value in record 0 and two after, and ``extra`` only from record 3 on.
"""

from pathlib import Path

import tensorflow as tf

HERE = Path(__file__).resolve().parent
COUNT = 12


def example(i: int) -> bytes:
    feature = {
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[bytes([i]) * i])),
        "score": tf.train.Feature(
            float_list=tf.train.FloatList(value=[i / 2] if i == 0 else [i / 2, -i])
        ),
    }
    if i >= 3:
        feature["extra"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[7, i]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


# The names say nothing of the compression: the reader must tell it from the bytes.
for kind in ("", "GZIP", "ZLIB"):
    options = tf.io.TFRecordOptions(compression_type=kind)
    with tf.io.TFRecordWriter(str(HERE / f"tf-{kind.lower() or 'none'}.tfrecord"), options) as w:
        for i in range(COUNT):
            w.write(example(i))
