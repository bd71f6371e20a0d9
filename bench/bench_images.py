"""Image benchmark: `dscan scan` against Pillow's `Image.open(p).load()`, in the same run.

Generates an ImageFolder of ImageNet-sized JPEGs (500×375, gradients and noise, quality 90, ~60 KB) and
PNGs, plus a set of damaged files (truncated, a zeroed 4 KB block, overwritten bytes, a broken Huffman
table, a bad PNG CRC, damaged zlib data under a valid CRC, a missing IEND, empty files, HTML saved as .jpg).
Then times, interleaved, after reading every file once (page cache):

- baseline: one fresh Python process that opens and loads every file with Pillow (catching its errors);
- ``dscan scan FOLDER --format json`` as a whole process, with ``-j1`` and ``-j2``.

Every file is read once right before each timed run, so both sides read from the page cache. Each round
runs the baseline, ``-j1``, ``-j2`` and the baseline again; a round's ratios are to the mean of its two
baselines, so that a machine whose speed drifts between runs (shared machines do, by a fifth within a minute)
weighs on both sides alike. Prints images/s (medians over the rounds), the median and range of the rounds'
ratios, the CPU time each run takes in all its processes (and how busy that keeps two cores with ``-j2``:
near 100% means only less work makes it faster), and the share of the damaged files that dscan reports (as
empty-file, not-an-image, corrupt-image or corrupt-image-data), which must be 100%. The machine is shared:
quote ratios, not absolute figures.

    python bench/bench_images.py                       # 2,000 JPEGs + 200 PNGs, 5 rounds
    python bench/bench_images.py --jpegs 300 --pngs 30 --repeat 1   # a quick look
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

WIDTH, HEIGHT = 500, 375
CLASSES = 10
DETECTING = {"I001", "I002", "I003", "I004"}
BASELINE = """
import sys
from PIL import Image
ok = bad = 0
for p in open(sys.argv[1]).read().splitlines():
    try:
        with Image.open(p) as im:
            im.load()
        ok += 1
    except Exception:
        bad += 1
print(ok, bad)
"""


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""Both sides run as installed software does: with bytecode caches (an installed package has its .pyc files)."""


def picture(rng: np.random.Generator, noise: float = 9.0) -> np.ndarray:
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    a, b, c = rng.uniform(-3, 3, 3)
    img = np.stack(
        [
            128 + 100 * np.sin(xx / rng.uniform(25, 80) + a) * np.cos(yy / rng.uniform(30, 90) + b),
            128 + 90 * np.cos((xx + yy) / rng.uniform(40, 110) + c),
            xx / WIDTH * rng.uniform(100, 220) + yy / HEIGHT * rng.uniform(20, 80),
        ],
        -1,
    )
    img += rng.normal(0, noise, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def encode(arr: np.ndarray, fmt: str) -> bytes:
    out = io.BytesIO()
    if fmt == "JPEG":
        Image.fromarray(arr).save(out, "JPEG", quality=90)
    else:
        Image.fromarray(arr).save(out, "PNG")
    return out.getvalue()


def _scan_start(jpeg: bytes) -> int:
    return jpeg.index(b"\xff\xda") + 2 + int.from_bytes(jpeg[jpeg.index(b"\xff\xda") + 2 :][:2], "big")


def _png_chunk(ctype: bytes, body: bytes) -> bytes:
    import zlib

    return len(body).to_bytes(4, "big") + ctype + body + zlib.crc32(ctype + body).to_bytes(4, "big")


def damaged(rng: np.random.Generator, kind: str, jpeg: bytes, png: bytes) -> tuple[str, bytes]:
    """A damaged file of ``kind``: (file name suffix, bytes)."""
    scan = _scan_start(jpeg)
    body = len(jpeg) - scan - 2
    if kind == "jpeg-truncated":
        return ".jpg", jpeg[: scan + int(body * rng.uniform(0.2, 0.95))]
    if kind == "jpeg-zeroed-4k":
        at = scan + int(rng.integers(0, body - 4096))
        return ".jpg", jpeg[:at] + bytes(4096) + jpeg[at + 4096 :]
    if kind == "jpeg-overwritten":
        at = scan + int(rng.integers(0, body - 64))
        return ".jpg", jpeg[:at] + rng.integers(0, 256, 64, dtype=np.uint8).tobytes() + jpeg[at + 64 :]
    if kind == "jpeg-bad-huffman":
        at = jpeg.index(b"\xff\xc4") + 5
        return ".jpg", jpeg[:at] + b"\xff" * 16 + jpeg[at + 16 :]
    if kind == "png-bad-crc":  # the stored CRC of an IDAT chunk is wrong, its data intact
        at = png.index(b"IDAT")
        crc = at + 4 + int.from_bytes(png[at - 4 : at], "big")
        return ".png", png[:crc] + bytes([png[crc] ^ 0x5A]) + png[crc + 1 :]
    if kind == "png-truncated":
        return ".png", png[: int(len(png) * rng.uniform(0.3, 0.9))]
    if kind == "png-bad-zlib":  # damaged compressed data under a valid CRC (pngcheck misses many)
        at = png.index(b"IDAT")
        length = int.from_bytes(png[at - 4 : at], "big")
        data = bytearray(png[at + 4 : at + 4 + length])
        k = int(rng.integers(200, len(data) - 200))
        data[k : k + 32] = rng.integers(0, 256, 32, dtype=np.uint8).tobytes()
        return ".png", png[: at - 4] + _png_chunk(b"IDAT", bytes(data)) + png[at + 8 + length :]
    if kind == "png-no-iend":
        return ".png", png[:-12]
    if kind == "empty":
        return ".jpg", b""
    if kind == "html":
        return ".jpg", b"<!DOCTYPE html><html><body><h1>404 Not Found</h1></body></html>\n"
    raise ValueError(kind)


DAMAGE = (
    "jpeg-truncated",
    "jpeg-zeroed-4k",
    "jpeg-overwritten",
    "jpeg-bad-huffman",
    "png-bad-crc",
    "png-truncated",
    "png-bad-zlib",
    "png-no-iend",
    "empty",
    "html",
)


def visible(suffix: str, data: bytes) -> bool:
    """Whether a damaged JPEG's damage can be seen at all: a strict full-size libjpeg decode (what
    `jpeginfo -c` does) rejects it. Random overwrites sometimes decode to valid, wrong pixels."""
    if suffix != ".jpg" or len(data) < 64 or not data.startswith(b"\xff\xd8"):
        return True
    import simplejpeg

    try:
        simplejpeg.decode_jpeg(data, strict=True)
    except ValueError:
        return True
    return False


def generate(root: Path, jpegs: int, pngs: int, per_damage: int, seed: int = 0) -> tuple[dict[str, str], int]:
    """Write the dataset; returns damaged file (relative path) -> kind, and how many damaged candidates
    no decoder could tell from valid ones (replaced by others)."""
    rng = np.random.default_rng(seed)
    for c in range(CLASSES):
        (root / f"class_{c:02d}").mkdir(parents=True, exist_ok=True)
    base_jpeg = base_png = b""
    for i in range(jpegs):
        data = encode(picture(rng), "JPEG")
        base_jpeg = base_jpeg or data
        (root / f"class_{i % CLASSES:02d}" / f"img_{i:06d}.jpg").write_bytes(data)
    for i in range(pngs):
        data = encode(picture(rng), "PNG")
        base_png = base_png or data
        (root / f"class_{i % CLASSES:02d}" / f"img_{i:06d}.png").write_bytes(data)
    truth: dict[str, str] = {}
    invisible = 0
    for kind in DAMAGE:
        for k in range(per_damage):
            while True:
                jpeg = encode(picture(rng), "JPEG")
                png = encode(picture(rng), "PNG") if kind.startswith("png") else base_png
                suffix, data = damaged(rng, kind, jpeg, png)
                if visible(suffix, data):
                    break
                invisible += 1
            rel = f"class_{k % CLASSES:02d}/bad_{kind}_{k:03d}{suffix}"
            (root / rel).write_bytes(data)
            truth[rel] = kind
    return truth, invisible


def files_of(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def dscan_command() -> list[str]:
    """``dscan`` as users run it: the console script installed beside this Python (its entry point keeps
    the garbage collector out of the imports), or that entry point itself when the package is not installed."""
    script = Path(sys.executable).parent / "dscan"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from scanner_service.entry import run; run()"]


CPU_S: dict[str, list[float]] = {}
"""CPU seconds (user and system) of each timed run, by what ran: the process and every process it waited for."""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], what: str = "") -> tuple[float, str]:
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=ENV)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")
    if what:
        CPU_S.setdefault(what, []).append(_children_cpu() - cpu)
    return elapsed, done.stdout


def detected(report_json: str, truth: dict[str, str]) -> dict[str, tuple[int, int]]:
    report = json.loads(report_json)
    flagged = {loc["path"] for f in report["findings"] if f["code"] in DETECTING for loc in f["locations"]}
    per: dict[str, tuple[int, int]] = {}
    for rel, kind in truth.items():
        hit, total = per.get(kind, (0, 0))
        per[kind] = (hit + (rel in flagged), total + 1)
    return per


def inprocess(files: list[Path], per_kind: int = 200, repeat: int = 5) -> None:
    """Per image, in this process, interleaved: Pillow load() against dscan's inspection (no start cost)."""
    from scanner_service.imaging import inspect_image

    for suffix in (".jpg", ".png"):
        chosen = [p for p in files if p.suffix == suffix and p.name.startswith("img_")][:per_kind]
        pillow, dscan = [], []
        for _ in range(repeat):
            t = time.perf_counter()
            for p in chosen:
                with Image.open(p) as im:
                    im.load()
            pillow.append(time.perf_counter() - t)
            t = time.perf_counter()
            for p in chosen:
                with open(p, "rb", buffering=0) as fh:
                    inspect_image(fh.read(), p.name)
            dscan.append(time.perf_counter() - t)
        a, b = statistics.median(pillow) / len(chosen), statistics.median(dscan) / len(chosen)
        print(
            f"per image, one process, {len(chosen)} {suffix} files: Pillow load {a * 1e6:,.0f} us, "
            f"dscan inspection {b * 1e6:,.0f} us ({a / b:.2f}x)"
        )


def pillow_detects(root: Path, truth: dict[str, str]) -> dict[str, int]:
    """How many damaged files of each kind Pillow's open+load raises on (for comparison)."""
    caught: dict[str, int] = {}
    for rel, kind in truth.items():
        try:
            with Image.open(root / rel) as im:
                im.load()
        except Exception:
            caught[kind] = caught.get(kind, 0) + 1
    return caught


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jpegs", type=int, default=2000)
    ap.add_argument("--pngs", type=int, default=200)
    ap.add_argument("--damaged", type=int, default=10, help="damaged files of each kind")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workdir", type=Path, help="keep the generated data here (default: a temporary folder)")
    args = ap.parse_args()
    timed([sys.executable, "-c", "import scanner_service.cli"])  # write the bytecode caches before any timed run

    with tempfile.TemporaryDirectory(prefix="dscan-bench-images-") as tmp:
        root = (args.workdir or Path(tmp)) / "images"
        t0 = time.perf_counter()
        if not root.exists():
            truth, invisible = generate(root, args.jpegs, args.pngs, args.damaged)
            (root.parent / "truth.json").write_text(json.dumps({"truth": truth, "invisible": invisible}))
        else:
            saved = json.loads((root.parent / "truth.json").read_text())
            truth, invisible = saved["truth"], saved["invisible"]
        files = files_of(root)
        listing = root.parent / "files.txt"
        listing.write_text("\n".join(str(p) for p in files))
        total_bytes = sum(p.stat().st_size for p in files)

        def warm() -> None:  # into the page cache, before every timed run (proactive reclaim evicts it)
            for p in files:
                p.read_bytes()

        warm()
        print(
            f"dataset: {len(files):,} files ({args.jpegs:,} JPEG, {args.pngs:,} PNG, {len(truth)} damaged), "
            f"{total_bytes / 1e6:.0f} MB, ready in {time.perf_counter() - t0:.0f} s; {os.cpu_count()} CPUs"
        )

        command = dscan_command()
        dscan = [*command, "scan", str(root), "--format", "json", "--max-locations", "100000"]
        one = root.parent / "one"  # a one-image dataset: what starting each process costs
        one.mkdir(exist_ok=True)
        valid = next(p for p in files if p.name.startswith("img_") and p.suffix == ".jpg")  # decoders load
        (one / "a.jpg").write_bytes(valid.read_bytes())
        (root.parent / "one.txt").write_text(str(one / "a.jpg"))
        runs: dict[str, list[float]] = {
            "baseline": [],
            "-j1": [],
            "-j2": [],
            "start-base": [],
            "start-dscan": [],
        }
        last = ""

        def baseline() -> float:
            warm()
            return timed([sys.executable, "-c", BASELINE, str(listing)], "baseline")[0]

        ratios: dict[str, list[float]] = {"-j1": [], "-j2": []}
        for _ in range(args.repeat):
            before = baseline()
            for jobs in ("-j1", "-j2"):
                warm()
                elapsed, last = timed([*dscan, jobs], jobs)
                runs[jobs].append(elapsed)
            after = baseline()
            runs["baseline"] += [before, after]
            for jobs in ratios:  # the baseline around the runs of its round: a machine's drift cancels out
                ratios[jobs].append((before + after) / 2 / runs[jobs][-1])
            runs["start-base"].append(timed([sys.executable, "-c", BASELINE, str(root.parent / "one.txt")])[0])
            runs["start-dscan"].append(timed([*command, "scan", str(one), "-j1", "--format", "json"])[0])  # as timed

        base = statistics.median(runs["baseline"])
        print(
            f"{'run':<34} {'images/s':>10} {'ratio':>7}   (medians of {args.repeat} rounds; whole processes; "
            "a round's ratio is to its baseline, run before and after)"
        )
        print(f"{'Pillow open+load, one process':<34} {len(files) / base:>10,.0f} {1.0:>7.2f}")
        targets = {"-j1": 1.6, "-j2": 2.8}
        for jobs in ("-j1", "-j2"):
            t = statistics.median(runs[jobs])
            ratio = statistics.median(ratios[jobs])
            verdict = "ok" if ratio >= targets[jobs] else f"BELOW target {targets[jobs]}"
            spread = f"{min(ratios[jobs]):.2f}-{max(ratios[jobs]):.2f}"
            print(f"{'dscan scan ' + jobs:<34} {len(files) / t:>10,.0f} {ratio:>7.2f}   {verdict} (rounds: {spread})")

        start_base, start_dscan = (
            statistics.median(runs["start-base"]),
            statistics.median(runs["start-dscan"]),
        )
        print(
            f"process start (a one-image run): baseline {start_base:.2f} s, dscan {start_dscan:.2f} s; "
            "excluding it, images/s: baseline "
            f"{len(files) / (base - start_base):,.0f}, "
            + ", ".join(
                f"dscan {jobs} {len(files) / (statistics.median(runs[jobs]) - start_dscan):,.0f} "
                f"({(base - start_base) / (statistics.median(runs[jobs]) - start_dscan):.2f}x)"
                for jobs in ("-j1", "-j2")
            )
        )
        cpus = os.cpu_count() or 1
        print(
            "CPU per run (user and system, every process; medians): "
            + ", ".join(
                f"{what} {statistics.median(CPU_S[what]):.2f} s"
                + (
                    f" ({statistics.median(CPU_S[what]) / statistics.median(runs[what]) / min(cpus, 2) * 100:.0f}% "
                    f"of {min(cpus, 2)} cores)"
                    if what == "-j2"
                    else ""
                )
                for what in ("baseline", "-j1", "-j2")
            )
        )
        inprocess(files)
        per = detected(last, truth)
        hits = sum(h for h, _ in per.values())
        print(f"damaged files detected: {hits}/{len(truth)} ({100 * hits / max(1, len(truth)):.0f}%)")
        if invisible:
            print(
                f"  ({invisible} overwritten-bytes candidates decoded to valid, wrong pixels under a strict "
                "full-size libjpeg decode too: undetectable by any decoder, replaced)"
            )
        pillow = pillow_detects(root, truth)
        print(f"  {'kind':<20} dscan  Pillow load() raises")
        for kind, (h, n) in sorted(per.items()):
            print(f"  {kind:<20} {h}/{n}  {pillow.get(kind, 0)}/{n}")
        if hits != len(truth):
            raise SystemExit("some damaged files were not detected")


if __name__ == "__main__":
    main()
