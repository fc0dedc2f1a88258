"""A plugin of 100 JPEG rows, 4 of them damaged so that decoding fails (made with Pillow when
written): the shared input of the on_error="skip" tests."""

PLUGIN = """
    import io
    import struct

    import numpy as np
    from PIL import Image

    # Row -> how its JPEG is damaged. A broken EXIF block Pillow reads past: the row decodes.
    DAMAGE = {7: "truncated", 30: "empty", 55: "exif", 56: "truncated", 81: "garbage"}

    def task_number():
        return 4

    def schema():
        return {"id": {"type": "int64"}, "data": {"type": "binary"}}

    def jpeg(n):
        out = io.BytesIO()
        Image.fromarray(np.full((8, 8, 3), n % 256, np.uint8)).save(out, "JPEG")
        return out.getvalue()

    def dict_data(task_id):
        for i in range(25):
            n = task_id * 25 + i
            data, damage = jpeg(n), DAMAGE.get(n)
            if damage == "truncated":
                data = data[: len(data) // 2]
            elif damage == "empty":
                data = b""
            elif damage == "garbage":
                data = b"\\xff\\xd8\\xff" + bytes(range(200))
            elif damage == "exif":
                tiff = b"MM\\x00*\\x00\\x00\\x00\\x08\\x00\\x01" + struct.pack(">HHII", 0x8769, 4, 1, 2**31)
                segment = b"Exif\\x00\\x00" + tiff + b"\\x00" * 4
                data = data[:2] + b"\\xff\\xe1" + struct.pack(">H", len(segment) + 2) + segment + data[2:]
            yield {"id": n, "data": data}
"""
BAD = {7, 30, 56, 81}


# Ids at the edges of pieces of 7 rows (the first, each piece's last and first, the very last):
# a decoder, as ``module:function``, that raises on those alone.
EDGES = {0, 6, 7, 13, 14, 98, 99}


def refuse_edges(value: int) -> None:
    if value in EDGES:
        raise ValueError(f"id {value} is at an edge")
