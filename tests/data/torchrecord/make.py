"""Writes the TorchRecord databases beside it with TorchRecord's own Writer code and caffe2's
protobuf classes (tests/test_torchrecord_plugin.py reads them; neither protobuf nor caffe2 is
needed to run the tests). Written with lmdb 3.0.0 (LMDB 0.9.36), protobuf 7.36.2 and
grpcio-tools 1.85.1 (its protoc compiled caffe2.proto), Pillow 13.0.0. To run it again:

    python -m venv /tmp/venv-torchrecord
    /tmp/venv-torchrecord/bin/pip install grpcio-tools protobuf lmdb pillow numpy
    /tmp/venv-torchrecord/bin/python tests/data/torchrecord/make.py

``CAFFE2_PROTO`` is ``TensorProto`` and ``TensorProtos`` as pytorch's caffe2/proto/caffe2.proto
declares them at commit 02937903ccab (TorchRecord's own copy, torchrecord/tr.proto, has the same
field numbers and DataType values).
``default_data_process_func`` and ``Writer`` are TorchRecord's torchrecord/writer.py (v0.1.0) as
written (only reformatted); ``Writer`` is given a small ``map_size``. Running it again writes the
same bytes.

- ``rgb/db0``, ``rgb/db1``: the default layout, ``Writer(db_num=2, shuffle=True)`` over 24 RGB
  images of 6 x 4 pixels; image i is ``pixels(i, 6, 4)`` and its label i.
- ``mixed/db0``: images of other sizes, and a label stored as an INT64 tensor (a
  ``data_process_func`` of one's own, as TorchRecord allows).
- ``dtypes/db0``: one record whose TensorProtos holds a tensor of every data type.
- ``expected.json``: every value, as read back from the databases with caffe2's classes.
"""

# ruff: noqa: UP004, UP015, UP032 - TorchRecord's code below is kept as it was written

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from multiprocessing import Pool
from pathlib import Path

import lmdb
import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent

CAFFE2_PROTO = """
syntax = "proto2";
package caffe2;
message TensorProto {
  repeated int64 dims = 1;
  enum DataType {
    UNDEFINED = 0; FLOAT = 1; INT32 = 2; BYTE = 3; STRING = 4; BOOL = 5; UINT8 = 6; INT8 = 7;
    UINT16 = 8; INT16 = 9; INT64 = 10; FLOAT16 = 12; DOUBLE = 13;
  }
  optional DataType data_type = 2 [default = FLOAT];
  repeated float float_data = 3 [packed = true];
  repeated int32 int32_data = 4 [packed = true];
  optional bytes byte_data = 5;
  repeated bytes string_data = 6;
  repeated double double_data = 9 [packed = true];
  repeated int64 int64_data = 10 [packed = true];
  optional string name = 7;
  message Segment {
    required int64 begin = 1;
    required int64 end = 2;
  }
  optional Segment segment = 11;
}
message TensorProtos {
  repeated TensorProto protos = 1;
}
"""

_build = tempfile.mkdtemp()
Path(_build, "caffe2.proto").write_text(CAFFE2_PROTO)
subprocess.run(
    [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{_build}",
        f"--python_out={_build}",
        "caffe2.proto",
    ],
    check=True,
)
sys.path.insert(0, _build)
from caffe2_pb2 import TensorProto, TensorProtos  # noqa: E402

MAP_SIZE = 1 << 20


# ---- TorchRecord's torchrecord/writer.py ----------------------------------------------------
def default_data_process_func(data):
    data = data.split(" ")
    tensor_protos = TensorProtos()

    img = Image.open(data[0]).convert("RGB")
    img_tensor = tensor_protos.protos.add()
    img_tensor.dims.extend(img.size)
    img_tensor.data_type = 3
    img_tensor.byte_data = img.tobytes()

    label_tensor = tensor_protos.protos.add()
    label_data = str.encode(data[1])
    label_tensor.data_type = 3
    label_tensor.byte_data = label_data
    return tensor_protos


class Writer(object):
    def __init__(
        self,
        data_list=None,
        output_dir="./torchrecord",
        map_size=1099511627776,
        db_num=1,
        shuffle=True,
        data_process_func=default_data_process_func,
    ):

        if data_list is None:
            raise ValueError("Parameter needed: data_list.")
        if not data_list.endswith(".txt") and not data_list.endswith(".csv"):
            raise ValueError(
                "Parameter error: data_list must be txt or csv. Found: {}".format(data_list)
            )

        self.data_list = data_list
        self.output_dir = output_dir

        self.data_process_func = data_process_func

        self.map_size = map_size
        self.shuffle = shuffle
        self.db_num = db_num

    def parse_data_list(self):
        with open(self.data_list, "r") as reader:
            data_list = reader.readlines()
        data_list = [x.strip() for x in data_list]
        if self.shuffle:
            random.shuffle(data_list)
        return data_list

    def write(self):
        data_list = self.parse_data_list()

        data_num = len(data_list)

        pool = Pool(self.db_num)
        print("Total: {} data items.".format(data_num))
        print("Start Writing...")
        tik = time.time()
        for i in range(self.db_num):
            pool.apply_async(
                self.write_func,
                args=(
                    data_list[
                        int(i * data_num / self.db_num) : int((i + 1) * data_num / self.db_num)
                    ],
                    i,
                    self.output_dir,
                    self.map_size,
                    self.data_process_func,
                ),
            )
        pool.close()
        pool.join()
        tok = time.time()
        print("All Processes Are Done. Cost:{}s".format(tok - tik))

    @staticmethod
    def write_func(data_list, db_idx, output_dir, map_size, data_process_func):
        db_path = os.path.join(output_dir, "db{}".format(db_idx))
        if not os.path.isdir(db_path):
            os.makedirs(db_path)
        try:
            env = lmdb.open(db_path, map_size=map_size)
            with env.begin(write=True) as tnx:
                for idx, data in enumerate(data_list):
                    tensor_protos = data_process_func(data)
                    tnx.put("{}".format(idx).encode(), tensor_protos.SerializeToString())
        except Exception as e:
            print(e)


# ---- end of TorchRecord's code --------------------------------------------------------------


def pixels(i, width, height):
    """Image i's RGB pixels, [height, width, 3] (the test computes them the same way)."""
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([(x * 40 + i) % 256, y * 60 + i, np.full_like(x, 20 * i)], -1).astype(np.uint8)


def int64_label_func(data):
    """A data_process_func of one's own: the default image, the label as an INT64 tensor."""
    tensor_protos = default_data_process_func(data)
    label = tensor_protos.protos[1]
    label.Clear()
    label.data_type = TensorProto.INT64
    label.dims.append(1)
    label.int64_data.append(int(data.split(" ")[1]) - 5)
    return tensor_protos


def write_images(folder, sizes):
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, (width, height) in enumerate(sizes):
        path = folder / f"img{i}.png"
        Image.fromarray(pixels(i, width, height)).save(path)
        lines.append(f"{path} {i}")
    listing = folder / "data_list.txt"
    listing.write_text("\n".join(lines) + "\n")
    return str(listing)


def dtypes_record():
    tensor_protos = TensorProtos()

    def add(data_type, dims, field, values):
        tensor = tensor_protos.protos.add()
        tensor.data_type = data_type
        tensor.dims.extend(dims)
        if field == "byte_data":
            tensor.byte_data = values
        else:
            getattr(tensor, field).extend(values)

    add(TensorProto.FLOAT, [2, 3], "float_data", [0.5, -1.25, 3.0, 1e-3, 7.0, -0.0])
    add(TensorProto.INT32, [3], "int32_data", [-7, 0, 2**31 - 1])
    add(TensorProto.BYTE, [2, 2], "byte_data", bytes([0, 127, 128, 255]))
    add(TensorProto.STRING, [2], "string_data", [b"cat", b"\x00dog"])
    add(TensorProto.BOOL, [3], "int32_data", [1, 0, 1])
    add(TensorProto.UINT8, [2], "int32_data", [0, 255])
    add(TensorProto.INT8, [2], "int32_data", [-128, 127])
    add(TensorProto.UINT16, [2], "int32_data", [0, 65535])
    add(TensorProto.INT16, [2], "int32_data", [-32768, 32767])
    add(TensorProto.INT64, [2, 1], "int64_data", [-(2**63), 2**62])
    # caffe2 keeps float16 as its 16 bits in int32_data
    half = np.array([1.5, -2.0, 65504.0], np.float16).view(np.uint16)
    add(TensorProto.FLOAT16, [3], "int32_data", [int(v) for v in half])
    add(TensorProto.DOUBLE, [2], "double_data", [1e300, -2.5])
    add(TensorProto.INT32, [], "int32_data", [42])  # no dims: a scalar
    return tensor_protos


def value_of(tensor):
    """A tensor's values as JSON, read with caffe2's own classes."""
    kind = TensorProto.DataType.Name(tensor.data_type)
    if tensor.data_type in (TensorProto.BYTE,):
        values = tensor.byte_data.hex()
    elif tensor.data_type == TensorProto.STRING:
        values = [v.hex() for v in tensor.string_data]
    elif tensor.data_type == TensorProto.FLOAT:
        values = list(tensor.float_data)
    elif tensor.data_type == TensorProto.DOUBLE:
        values = list(tensor.double_data)
    elif tensor.data_type == TensorProto.INT64:
        values = list(tensor.int64_data)
    else:
        values = list(tensor.int32_data)
    return {"type": kind, "dims": list(tensor.dims), "values": values}


def read_back(folder):
    """{database: [[key, [tensor values...]], ...]} in LMDB's key order, via caffe2's classes."""
    found = {}
    for name in sorted(os.listdir(folder)):
        env = lmdb.open(str(folder / name), readonly=True, lock=False)
        with env.begin() as txn:
            rows = []
            for key, value in txn.cursor():
                tensor_protos = TensorProtos()
                tensor_protos.ParseFromString(value)
                rows.append([key.decode(), [value_of(t) for t in tensor_protos.protos]])
        env.close()
        found[name] = rows
    return found


def clean(folder):
    for lock in folder.glob("*/lock.mdb"):
        lock.unlink()  # readers open the databases with lock=False; no need to keep it


def main():
    work = Path(tempfile.mkdtemp())
    random.seed(0)
    sizes = [(6, 4)] * 24
    Writer(write_images(work / "rgb", sizes), str(HERE / "rgb"), MAP_SIZE, db_num=2).write()
    sizes = [(5, 3), (7, 4), (4, 4), (3, 6), (8, 2)]
    Writer(
        write_images(work / "mixed", sizes),
        str(HERE / "mixed"),
        MAP_SIZE,
        db_num=1,
        shuffle=False,
        data_process_func=int64_label_func,
    ).write()
    (HERE / "dtypes" / "db0").mkdir(parents=True, exist_ok=True)
    env = lmdb.open(str(HERE / "dtypes" / "db0"), map_size=MAP_SIZE)
    with env.begin(write=True) as txn:
        txn.put(b"0", dtypes_record().SerializeToString())
    env.close()
    expected = {}
    for name in ("rgb", "mixed", "dtypes"):
        clean(HERE / name)
        expected[name] = read_back(HERE / name)
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main()
