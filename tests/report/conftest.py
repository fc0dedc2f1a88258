"""Datasets for the page tests, written once per session through recordmill.write with small
plugins, and a real browser (headless Chromium) to render pages and take screenshots."""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps

import recordmill
from tests.conftest import make_plugin

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
THUMB = 160  # recordmill.report.images.THUMB, restated: the test says what a thumbnail is
CLASSES = ("cat", "dog", "fox")
PER_CLASS = 8
BROKEN = "fox/broken.jpg"

IMAGES_PLUGIN = """
    import os

    def add_options(parser):
        parser.add_argument("--image-dir", required=True)

    def task_number(options):
        return len(os.listdir(options.image_dir))

    def schema():
        return {"label": "int32", "file_name": "string", "data": "bytes"}

    def dict_data(task_id, options):
        name = sorted(os.listdir(options.image_dir))[task_id]
        folder = os.path.join(options.image_dir, name)
        for file in sorted(os.listdir(folder)):
            with open(os.path.join(folder, file), "rb") as f:
                data = f.read()
            yield {"label": task_id, "file_name": f"{name}/{file}", "data": data}
"""

TENSORS_PLUGIN = """
    import numpy as np

    def task_number():
        return 2

    def schema():
        return {
            "label": "int64",
            "rgb": {"type": "uint8", "shape": [32, 48, 3]},
            "gray": {"type": "uint8", "shape": [40, 40]},
            "depth": {"type": "float32", "shape": [4, 6]},
        }

    def dict_data(task_id):
        for i in range(10):
            n = task_id * 10 + i
            rng = np.random.default_rng(n)
            blocks = rng.integers(0, 256, size=(4, 6, 3), dtype=np.uint8)
            yield {
                "label": n % 4,
                "rgb": np.kron(blocks, np.ones((8, 8, 1), np.uint8)),
                "gray": np.kron(blocks[:, :4, 0], np.ones((10, 10), np.uint8)),
                "depth": rng.random((4, 6), dtype=np.float32) * n,
            }
"""

EMPTY_PLUGIN = """
    def task_number():
        return 1

    def schema():
        return {"label": "int64", "score": "float32", "data": "bytes"}

    def dict_data(task_id):
        return iter(())
"""


def blocky(seed: int, size: tuple[int, int]) -> Image.Image:
    """An image of random colour blocks: any two of them differ everywhere, so a thumbnail
    matches its own row and no other."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(6, 8, 3), dtype=np.uint8)
    return Image.fromarray(blocks).resize(size, Image.Resampling.NEAREST)


def make_images(folder: Path) -> None:
    """3 class folders of PER_CLASS real files: JPEG and PNG, RGB, grayscale and RGBA, small ones
    and ones larger than a thumbnail, and one JPEG cut short after its header (BROKEN)."""
    for c, name in enumerate(CLASSES):
        (folder / name).mkdir(parents=True)
        for i in range(PER_CLASS - (name == BROKEN.split("/")[0])):
            seed = c * 100 + i
            image = blocky(seed, (48 + 37 * i, 40 + 29 * (i % 5)))
            if i == 1:
                image = image.convert("L")
            elif i == 2:
                image = image.convert("RGBA")
            fmt = "PNG" if i % 3 != 0 else "JPEG"
            image.save(folder / name / f"{i:02d}.{fmt.lower()}", fmt, quality=95)
    data = io.BytesIO()
    blocky(999, (64, 64)).save(data, "JPEG")
    (folder / BROKEN).write_bytes(data.getvalue()[:200])


@pytest.fixture(scope="session")
def image_dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("images")
    make_images(root / "files")
    plugin = make_plugin(root / "plugin_images", IMAGES_PLUGIN)
    out = root / "pets"
    recordmill.write(plugin, out, options={"image_dir": str(root / "files")}, partitions=2)
    return out


@pytest.fixture(scope="session")
def tensor_dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tensors")
    out = root / "arrays"
    recordmill.write(
        make_plugin(root / "plugin", TENSORS_PLUGIN), out, partitions=3, format="arrow"
    )
    return out


@pytest.fixture(scope="session")
def csv_dataset(tmp_path_factory) -> Path:
    """A CSV file with three bad records (rejects) and web addresses in its values."""
    root = tmp_path_factory.mktemp("csv")
    lines = ["id,score,species,homepage"]
    for i in range(40):
        lines.append(f"{i},{i * 0.25},{('setosa', 'virginica')[i % 2]},https://example.org/{i}")
    lines[5] = "5,oops,setosa,https://example.org/5"  # not a number
    lines[9] = "9,1.5"  # too few fields
    lines[20] = "x,2.0,setosa,http://example.org/20"
    (root / "iris.csv").write_text("\n".join(lines) + "\n")
    (root / "schema.yaml").write_text(
        "id: int32\nscore: float64\nspecies: string\nhomepage: string\n"
    )
    out = root / "iris"
    options = {"input": str(root / "iris.csv"), "schema": str(root / "schema.yaml")}
    recordmill.write("csv", out, options=options, on_bad_input="skip")
    return out


@pytest.fixture(scope="session")
def empty_dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("empty")
    out = root / "nothing"
    recordmill.write(make_plugin(root / "plugin", EMPTY_PLUGIN), out, partitions=2)
    return out


@pytest.fixture(scope="session")
def browser() -> str:
    if CHROMIUM is None:
        pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium)")
    return CHROMIUM


def screenshot(
    browser: str, page: Path, png: Path, size: tuple[int, int] = (1200, 2000)
) -> Image.Image:
    """The page rendered by headless Chromium with every host unresolvable (the page must need
    no network), as an RGB image."""
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={png.parent / 'chromium-profile'}",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--screenshot={png}",
            f"--window-size={size[0]},{size[1]}",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert png.is_file(), done.stderr[-2000:]
    return Image.open(png).convert("RGB")


def assert_not_blank(shot: Image.Image, charts: bool = True) -> None:
    """Text and tables make the screenshot's gray levels vary; a blank or failed page is one
    colour. With ``charts``, their blue bars must show too."""
    pixels = np.asarray(shot, dtype=np.float64)
    assert pixels.mean(axis=2).std() > 20, "the screenshot is (nearly) one colour"
    if charts:
        blue = (pixels[..., 2] - pixels[..., 0] > 60).mean()
        assert blue > 0.002, "no chart bars in the screenshot"


def assert_offline(text: str) -> None:
    """No reference to anything on the network: no web address at all (the data's own are
    written with ``&#58;``), no link, no script, no style import, every src a data: URI."""
    assert not re.search(r"\b(https?|ftp|wss?):", text, re.I)
    lowered = text.lower()
    assert all(tag not in lowered for tag in ("<script", "<link", "<iframe", "href=", "@import"))
    assert "url(" not in lowered
    sources = re.findall(r"src=['\"]([^'\"]*)", text)
    assert all(s.startswith("data:image/") for s in sources), sources[:3]


def thumbnails(text: str) -> dict[tuple[str, int], np.ndarray]:
    """{(column, row): pixels} of every thumbnail of the sample grid, decoded from its URI."""
    found = {}
    for uri, column, row in re.findall(
        r"src='data:image/jpeg;base64,([^']+)' alt='(\w+) of row (\d+)'", text
    ):
        image = Image.open(io.BytesIO(base64.b64decode(uri)))
        found[(column, int(row))] = np.asarray(image.convert("RGB"), dtype=np.int16)
    return found


def reference_thumbnail(value: bytes | np.ndarray) -> np.ndarray:
    """A row's image resized the way the page says it does: RGB (transparency on white), fit
    into THUMB x THUMB by Pillow's thumbnail(), a JPEG decoded at no less than twice that."""
    if isinstance(value, np.ndarray):
        image = Image.fromarray(value).convert("RGB")
    else:
        image = Image.open(io.BytesIO(value))
        image.draft(None, (2 * THUMB, 2 * THUMB))
        image = ImageOps.exif_transpose(image)
        if image.mode == "RGBA":
            white = Image.new("RGBA", image.size, (255, 255, 255, 255))
            image = Image.alpha_composite(white, image)
        image = image.convert("RGB")
    image.thumbnail((THUMB, THUMB))
    return np.asarray(image, dtype=np.int16)


def assert_thumbnails_are_the_rows(shown: dict, rows: dict) -> None:
    """Each thumbnail is its row's image (JPEG's loss aside), and is closer to it than to any
    other row's image of the same size."""
    assert shown
    for key, pixels in shown.items():
        expected = rows[key]
        assert pixels.shape == expected.shape, key
        error = np.abs(pixels - expected).mean()
        assert error < 8, f"{key}: mean difference {error:.1f}"  # of 255: JPEG at edges
        for other, candidate in rows.items():
            if other != key and candidate.shape == pixels.shape:
                assert np.abs(pixels - candidate).mean() > 4 * max(error, 1), (key, other)


def keep_screenshot(shot: Path, name: str) -> None:
    """With RECORDMILL_SCREENSHOTS=DIR, keep a copy of a screenshot there, in 256 colours (a
    third of the bytes; the README's docs/images/show.png is made this way:
    RECORDMILL_SCREENSHOTS=docs/images python -m pytest tests/report -k image_dataset)."""
    folder = os.environ.get("RECORDMILL_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        image = Image.open(shot).convert("RGB")
        few = image.quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
        few.save(Path(folder) / name, optimize=True)
