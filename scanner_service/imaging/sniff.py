"""What a file's bytes are, from magic numbers; and which format a file name claims.

``sniff`` names the image format of the content (``jpeg``, ``png`` ...) or returns None; ``content`` says
what non-image content looks like (HTML, text, gzip ...), so a ``not-an-image`` finding says more than no.
"""

from __future__ import annotations

import re

FORMAT_BY_EXTENSION: dict[str, str] = {
    ".jpg": "jpeg",
    ".jpeg": "jpeg",
    ".jpe": "jpeg",
    ".jfif": "jpeg",
    ".jif": "jpeg",
    ".png": "png",
    ".apng": "png",
    ".gif": "gif",
    ".bmp": "bmp",
    ".dib": "bmp",
    ".tif": "tiff",
    ".tiff": "tiff",
    ".webp": "webp",
    ".ico": "ico",
    ".cur": "ico",
    ".pbm": "pnm",
    ".pgm": "pnm",
    ".ppm": "pnm",
    ".pnm": "pnm",
    ".pam": "pnm",
    ".pfm": "pnm",
    ".jp2": "jpeg2000",
    ".j2k": "jpeg2000",
    ".j2c": "jpeg2000",
    ".jpc": "jpeg2000",
    ".jpf": "jpeg2000",
    ".jpx": "jpeg2000",
    ".avif": "avif",
    ".heic": "heif",
    ".heif": "heif",
    ".psd": "psd",
    ".tga": "tga",
    ".pcx": "pcx",
    ".qoi": "qoi",
    ".dds": "dds",
    ".sgi": "sgi",
    ".rgb": "sgi",
    ".bw": "sgi",
    ".xbm": "xbm",
    ".jxl": "jxl",
    ".exr": "exr",
    # formats Pillow reads beyond the common ones, where the content has a signature to confirm it. Not the
    # extensions others share without one (.pcd: point clouds as well as PhotoCD; .gbr: Gerber PCB files as
    # well as GIMP brushes; .msp, .vst, .rgba ...): in a folder such a file is scanned only when ``sniff``
    # names its content (an SGI image saved as .rgba), else it is a sidecar; a list's entries are all judged.
    ".mpo": "jpeg",  # a multi-picture JPEG (stereo cameras): Pillow reads it as JPEG frames
    ".avifs": "avif",
    ".ras": "sun",
    ".icns": "icns",
    ".xpm": "xpm",
    ".fits": "fits",  # (astronomy: float data that can hold NaN. '.fit' is Garmin's too: taken by content)
    ".fts": "fits",
    ".dcx": "dcx",
    ".blp": "blp",
    ".ftc": "ftex",
    ".ftu": "ftex",
    ".pxr": "pixar",
}
"""Extensions of image formats, and the format their content should have."""

IMAGE_EXTENSIONS = frozenset(FORMAT_BY_EXTENSION)

NON_IMAGE_EXTENSIONS = frozenset(
    {
        # text, metadata and documentation that lives next to images
        ".txt", ".md", ".rst", ".csv", ".tsv", ".json", ".jsonl", ".xml", ".yaml", ".yml", ".toml", ".ini",
        ".cfg", ".log", ".lst", ".list", ".names", ".html", ".htm", ".pdf", ".doc", ".docx", ".svg",
        # code and notebooks
        ".py", ".ipynb", ".sh", ".r", ".m",
        # archives and other dataset formats
        ".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".zst",
        ".npy", ".npz", ".pkl", ".pickle", ".pt", ".pth", ".ckpt", ".h5", ".hdf5", ".mdb", ".lock",
        ".parquet", ".arrow", ".feather", ".mat", ".db", ".sqlite", ".tfrecord", ".idx", ".rec",
        # video and audio
        ".mp4", ".avi", ".mov", ".mkv", ".webm", ".wav", ".mp3", ".flac",
    }
)  # fmt: skip
"""Extensions of files that are not images: image folders skip them (see docs/images.md)."""

JUNK_NAMES = frozenset({"thumbs.db", "desktop.ini", "ehthumbs.db", "icon\r"})
"""Files operating systems leave in folders (hidden files, starting with '.', are skipped too)."""

DOC_NAMES = frozenset(
    {"license", "licence", "readme", "notice", "copying", "authors", "changelog", "citation", "makefile", "manifest"}
)
"""Documentation files that go without an extension (``LICENSE``, ``README``): no image, whatever folder they
are in, and no loader reads them (torchvision's ImageFolder loads image extensions only)."""

BACKUP_SUFFIXES = ("~", ".bak", ".orig", ".swp", ".tmp")
"""Names editors and tools give copies and leftovers (``cat1.jpg~``): no loader reads them as images."""

PILLOW_FORMAT = {
    "jpeg": "JPEG",
    "png": "PNG",
    "gif": "GIF",
    "bmp": "BMP",
    "tiff": "TIFF",
    "webp": "WEBP",
    "ico": "ICO",
    "pnm": "PPM",
    "jpeg2000": "JPEG2000",
    "avif": "AVIF",
    "psd": "PSD",
    "tga": "TGA",
    "pcx": "PCX",
    "qoi": "QOI",
    "dds": "DDS",
    "sgi": "SGI",
    "xbm": "XBM",
    "mpo": "MPO",
    "sun": "SUN",
    "icns": "ICNS",
    "xpm": "XPM",
    "fits": "FITS",
    "msp": "MSP",
    "dcx": "DCX",
    "blp": "BLP",
    "ftex": "FTEX",
    "pixar": "PIXAR",
    "fli": "FLI",
    "gbr": "GBR",
    "pcd": "PCD",
}
"""Our format names and Pillow's."""

FORMAT_BY_PILLOW = {v: k for k, v in PILLOW_FORMAT.items()} | {"MPO": "jpeg", "CUR": "ico", "DIB": "bmp"}

UNREADABLE = {
    "heif": "HEIF/HEIC images need a HEIF decoder (pillow-heif); Pillow reads none",
    "jxl": "JPEG XL images need a JPEG XL decoder; Pillow reads none",
    "exr": "OpenEXR images need an EXR decoder; Pillow reads none",
    "svg": "SVG is a vector format: it must be rendered, not decoded",
}
"""Image formats this Pillow cannot decode: a loader built on Pillow fails on them."""


SVG = re.compile(
    rb"(?:\xef\xbb\xbf)?\s*"  # a byte-order mark, spaces
    # declaration, comments, DOCTYPE; each matched one way only (a lazy ``.*?`` let a comment run on through
    # the comments after it: with no ``<svg`` after 26 of them, the backtracking took 30 s)
    rb"(?:(?:<\?[^>]*>|<!--(?:[^-]|-(?!->))*-->|<!DOCTYPE\s[^>\[]*(?:\[[^\]]*\])?\s*>)\s*)*"
    rb"<svg[\s>]",
    re.S | re.I,
)
"""An SVG document: its first element is ``<svg``, after a byte-order mark, an XML declaration, comments (an
editor's 'Generator: Adobe Illustrator') and a DOCTYPE."""


OTHER_MAGIC = {
    b"\x59\xa6\x6a\x95": "sun",
    b"icns": "icns",
    b"\xb1\x68\xde\x3a": "dcx",
    b"BLP1": "blp",
    b"BLP2": "blp",
    b"FTEX": "ftex",
    b"\x80\xe8\x00\x00": "pixar",
}
"""Four-byte signatures of the rarer formats Pillow reads (MSP's, FLI's, GBR's and PCD's are too weak to tell
content by: such files are judged only when a list names them)."""


def sniff(head: bytes | memoryview) -> str | None:
    """The image format of content starting with ``head`` (the first 64 bytes are enough, 1,024 for an SVG
    after a long XML prologue), else None."""
    h = bytes(head[:64])
    if h[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if h[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if h[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if h[:2] == b"BM" and len(h) >= 18 and int.from_bytes(h[14:18], "little") in (12, 16, 40, 52, 56, 64, 108, 124):
        return "bmp"
    if h[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return "tiff"
    if h[:4] == b"RIFF" and h[8:12] == b"WEBP":
        return "webp"
    if h[:4] in (b"\x00\x00\x01\x00", b"\x00\x00\x02\x00") and len(h) >= 6 and h[4:6] != b"\x00\x00":
        return "ico"
    if len(h) >= 3 and h[0:1] == b"P" and h[1:2] in b"1234567fF" and h[2:3] in b" \t\r\n#":  # Pf, PF: float (PFM)
        return "pnm"  # (netpbm takes a comment right after the magic number: P6#GIMP)
    if h[:12] == b"\x00\x00\x00\x0cjP  \r\n\x87\n" or h[:4] == b"\xff\x4f\xff\x51":
        return "jpeg2000"
    if h[4:8] == b"ftyp":
        brand = h[8:12]
        if brand in (b"avif", b"avis") or (brand in (b"mif1", b"msf1") and _compatible(h, b"avif", b"avis")):
            return "avif"  # (AVIF files whose major brand is HEIF's generic one: Pillow reads them as AVIF)
        if brand in (b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"mif1", b"msf1"):
            return "heif"
        return None
    if h[:4] == b"8BPS":
        return "psd"
    if h[:4] == b"qoif":
        return "qoi"
    if h[:4] == b"DDS ":
        return "dds"
    if h[:2] == b"\x01\xda" and len(h) >= 3 and h[2] in (0, 1):
        return "sgi"
    if h[:1] == b"\x0a" and len(h) >= 3 and h[1] in (0, 2, 3, 4, 5) and h[2] == 1:
        return "pcx"
    if h[:2] == b"\xff\x0a" or h[:12] == b"\x00\x00\x00\x0cJXL \r\n\x87\n":
        return "jxl"
    if h[:4] == b"\x76\x2f\x31\x01":
        return "exr"
    if h[:4] in OTHER_MAGIC:
        return OTHER_MAGIC[h[:4]]
    if h[:9] == b"/* XPM */":
        return "xpm"
    if h[:9] == b"SIMPLE  =":
        return "fits"
    if h[:1] in b"<\xef \t\r\n" and SVG.match(bytes(head[:1024])):
        return "svg"
    if h[:9] == b"#define w" or h[:9] == b"#define h":
        return "xbm"
    return None


def _compatible(h: bytes, *brands: bytes) -> bool:
    """Whether the ISO media ``ftyp`` box at the start of ``h`` lists one of ``brands`` as compatible."""
    end = min(int.from_bytes(h[:4], "big"), len(h))
    return any(h[i : i + 4] in brands for i in range(16, end - 3, 4))


def certainly_no_image(head: bytes | memoryview) -> bool:
    """Whether content starting with ``head`` is something no image decoder reads (a web page, JSON, an
    archive, a PDF ...): its first bytes match none of Pillow's formats, not even one without a signature."""
    return content(head)[1]


ZEROS = "only zero bytes (a file allocated but never written?)"
"""What content of zero bytes alone is (``content`` sees a head of it: the caller tells the rest)."""


def content(head: bytes | memoryview) -> tuple[str, bool]:
    """(what non-image content starting with ``head`` looks like, whether it certainly is no image)."""
    h = bytes(head[:512]).removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark: text all the same
    low = h.lstrip().lower()
    if low.startswith((b"<!doctype html", b"<html")) or b"<html" in low[:256]:
        return "HTML (a web page saved in place of the image: an error or login page?)", True
    if low.startswith(b"<?xml"):
        return "XML", True
    if low[:1] in (b"{", b"[") and low.rstrip()[-1:] in (b"}", b"]", b",", b'"'):
        return "JSON", _printable(h)  # certain only as text: a binary head may start with '[' by chance
    if h[:4] == b"\x00\x05\x16\x07":
        return "an AppleDouble file (macOS metadata that copies to other file systems leave as ._NAME)", True
    if h[:2] == b"\x1f\x8b":
        return "gzip-compressed data", True
    if h[:4] == b"PK\x03\x04":
        return "a ZIP archive", True
    if h[:4] == b"%PDF":
        return "a PDF document", True
    if h[:8] == b"\x89HDF\r\n\x1a\n":
        return "an HDF5 file", False  # Pillow has a stub format for HDF5: it identifies it and says so
    if h[:6] == b"\x93NUMPY":
        return "a NumPy array (.npy)", True
    if len(h) >= 262 and h[257:262] == b"ustar":
        return "a tar archive", False
    raw = _camera_raw(h)
    if raw is not None:
        return f"a camera raw file ({raw}), which no image loader decodes: convert it to JPEG or PNG", True
    if h[4:8] == b"ftyp":
        return f"an ISO media file (brand {h[8:12].decode('latin-1')!r}: a video?)", False
    if not h.strip(b"\x00"):
        return ZEROS, False
    if _printable(h):
        return "text", False
    return f"unknown binary data (starts with {h[:8].hex(' ')})", False


def _camera_raw(h: bytes) -> str | None:
    """The camera raw format of content starting with ``h``, for raw formats with signatures of their own (the
    TIFF-based ones, DNG, CR2, NEF, ARW, are TIFFs: Pillow reads their first directory, a preview)."""
    if h[4:12] == b"ftypcrx ":
        return "Canon CR3"
    if h[:4] in (b"IIRO", b"IIRS", b"MMOR"):
        return "Olympus ORF"
    if h[:4] == b"IIU\x00":
        return "Panasonic RW2"
    if h[:16] == b"FUJIFILMCCD-RAW ":
        return "Fujifilm RAF"
    if h[:2] == b"II" and h[6:14] == b"HEAPCCDR":
        return "Canon CRW"
    return None


def _printable(h: bytes) -> bool:
    """Whether ``h`` is UTF-8 text, every character printable or spacing."""
    try:
        text = h.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(c.isprintable() or c in "\r\n\t" for c in text)


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def damaged_png_signature(head: bytes | memoryview) -> str | None:
    """Why ``head`` is a PNG with a damaged signature: its IHDR chunk is where a PNG's is (within a few
    bytes), but its first bytes are not PNG's signature. None when it is no such file.

    The signature is built to catch transfers that alter bytes: a cleared top bit (7-bit channels), line
    endings converted (CR LF to LF, LF to CR LF), a control byte dropped."""
    h = bytes(head[:24])
    at = h.find(b"IHDR", 8)
    if h[:8] == PNG_SIGNATURE or not 9 <= at <= 16:
        return None
    sized = h[at - 4 : at] == b"\x00\x00\x00\x0d"  # IHDR's own length: 13 bytes
    if not (sized or b"PN" in h[:4].upper() or b"NG" in h[:4].upper()):
        return None
    if at != 12:
        hint = f"{'inserted' if at > 12 else 'dropped'}: line endings converted (a transfer in text mode?)"
    elif h[0] == 0x09 and h[1:8] == PNG_SIGNATURE[1:]:
        hint = "changed: the first byte lost its top bit (a 7-bit transfer?)"
    else:
        hint = "changed"
    return f"damaged PNG signature ({h[:8].hex(' ')}; a PNG starts 89 50 4e 47 0d 0a 1a 0a): bytes {hint}"


GIF_SIGNATURES = (b"GIF87a", b"GIF89a")


def damaged_gif_signature(head: bytes | memoryview) -> str | None:
    """Why ``head`` is a GIF whose signature has one byte changed (``GIF89q``, ``GJF89a``): Pillow identifies a
    GIF by its six bytes exactly, so a loader fails on it. None when it is no such file."""
    h = bytes(head[:6])
    if len(h) < 6 or h in GIF_SIGNATURES:
        return None
    if not any(sum(a != b for a, b in zip(h, good, strict=True)) == 1 for good in GIF_SIGNATURES):
        return None
    shown = h.decode("latin-1").encode("unicode_escape").decode()
    return f"damaged GIF signature ({shown!r}; a GIF starts 'GIF87a' or 'GIF89a'): one byte changed"


def damaged_bmp_header(head: bytes | memoryview, size: int, name: str) -> bool:
    """Whether content starting with ``head`` (``size`` bytes in all) is a BMP whose info header is damaged:
    it starts with BMP's ``BM`` but ``sniff`` finds no info header size it knows, and the file claims to be a
    BMP (its extension, or the file size its header declares). Pillow's BMP reader takes any ``BM`` file and
    names what is wrong ("Unsupported BMP header type (41)"): it is a corrupt BMP, not unknown data. (``BM``
    alone is too weak a signature to name a BMP without the claim.)"""
    h = bytes(head[:18])
    if h[:2] != b"BM" or sniff(h) == "bmp":
        return False
    return claimed_format(name) == "bmp" or (len(h) >= 6 and int.from_bytes(h[2:6], "little") == size)


def claimed_format(name: str) -> str | None:
    """The image format a file name's extension claims, None when it claims none (or no image)."""
    dot = name.rfind(".")
    if dot <= 0:
        return None
    return FORMAT_BY_EXTENSION.get(name[dot:].lower())


def trailing_kind(rest: bytes | memoryview) -> str:
    """What the bytes after an image's end marker are: another image, zero padding, other content dscan
    recognises (a ZIP archive: a hidden payload?), or unknown data."""
    kind = sniff(rest[:64])
    if kind is not None:
        return f"another {kind.upper()} image (concatenated files?)"
    if bytes(rest[4:8]) == b"ftyp":  # Google's and Samsung's motion photos append the clip to the JPEG
        return "an MP4 video (a phone's motion photo? Loaders read only the image before it)"
    if bytes(rest[-4:]) == b"SEFT":
        return "Samsung camera metadata (an SEFH/SEFT trailer)"
    if not bytes(rest).strip(b"\x00"):
        return "zero bytes (padding)"
    what, certain = content(rest[:512])
    return what if certain else "unknown data"
