"""Disagreements found by scanning real corpora of odd files (Pillow's ``Tests/images``, PngSuite) and
comparing each verdict with Pillow's ``load()`` of every frame and with libjpeg's, libpng's (pngcheck),
giflib's and libtiff's command-line tools. Each case rebuilds the file it stands for in a few lines."""

from __future__ import annotations

import io
import zlib

import numpy as np
from imagetools import chunk, encode, inspected_with_peak, natural
from PIL import Image

from scanner_service.imaging import inspect_image


def _pillow_frames(data: bytes) -> int:
    with Image.open(io.BytesIO(data)) as im:
        frames = int(getattr(im, "n_frames", 1))
        for i in range(frames):
            im.seek(i)
            im.load()
    return frames


def _apng_declaring(rng: np.random.Generator, declared: int) -> bytes:
    """A two-frame APNG written by Pillow whose acTL says ``declared`` frames (its CRC recomputed)."""
    frames = [Image.fromarray(natural(rng, 24, 32)) for _ in range(2)]
    apng = encode(frames[0], "PNG", save_all=True, append_images=frames[1:])
    at = apng.index(b"acTL") - 4
    body = declared.to_bytes(4, "big") + apng[at + 12 : at + 16]
    return apng[:at] + chunk(b"acTL", body) + apng[at + 20 :]


def test_apng_frame_count_too_low_is_damage_where_pillow_loads_it(rng: np.random.Generator) -> None:
    """Pillow's apng/syntax_num_frames_low.png: acTL says 1 frame, the file holds 2. Pillow reads the
    default image (and the frames acTL names) without a word, so the file is damaged data, not an error;
    a count too high stays an error (Pillow runs out of data), and the right count is clean."""
    low = _apng_declaring(rng, 1)
    assert _pillow_frames(low) == 1
    v = inspect_image(low, "a.png")
    assert v.error is None, v
    assert v.damage == ["APNG: acTL declares 1 frame, the file has 2"]
    high = inspect_image(_apng_declaring(rng, 3), "a.png")
    assert high.error is not None and high.error.startswith("APNG: acTL declares 3 frames, the file has 2"), high
    right = inspect_image(_apng_declaring(rng, 2), "a.png")
    assert right.error is None and right.damage == [] and right.frames == 2, right


def test_apng_frame_count_out_of_range_is_damage_where_pillow_loads_it(rng: np.random.Generator) -> None:
    """Pillow's apng/syntax_num_frames_invalid.png: acTL says 2^31+1 frames. Pillow warns and reads the
    default image; the spec's rule is reported once, as damage."""
    v = inspect_image(_apng_declaring(rng, (1 << 31) + 1), "a.png")
    assert v.error is None, v
    assert v.damage == ["acTL chunk declares 2,147,483,649 frames (the APNG spec says 1 to 2^31-1)"]


def test_a_gif_appended_to_one_without_its_trailer_is_damage_not_lost_frames(rng: np.random.Generator) -> None:
    """Pillow's test_extents_transparency.gif: a GIF whose trailer is missing, followed by a whole second
    GIF. Pillow skips the second header byte by byte and reads its frame as the file's second one (giflib
    refuses the file): damaged data, not an error saying the frames after it are lost."""
    first = encode(Image.fromarray(natural(rng, 40, 40)).convert("P"), "GIF")
    second = encode(Image.fromarray(natural(rng, 40, 40)).convert("P"), "GIF")
    joined = first[:-1] + second
    assert _pillow_frames(joined) == 2
    v = inspect_image(joined, "a.gif")
    assert v.error is None and v.frames == 2, v
    assert v.damage == [
        f"a second GIF's header at byte {len(first) - 1:,}, where the first lacks its trailer (Pillow reads the"
        " frames after it as more frames; giflib refuses the file)"
    ]
    assert v.trailing == 0
    clean = inspect_image(first + second, "a.gif")  # with its trailer: the second GIF is trailing data
    assert clean.error is None and clean.damage == [] and clean.trailing == len(second), clean
    assert inspect_image(first[:-1] + b"\x07" + second[6:], "a.gif").error is not None  # no header: damage


def test_text_chunks_over_pillows_limit_are_named_once(rng: np.random.Generator) -> None:
    """Pillow's png_decompression_dos.png: three zTXt chunks, each inflating past Pillow's limit. Pillow
    refuses the file; the reason states the limit once, not once per chunk."""
    image = encode(Image.fromarray(natural(rng, 32, 32)), "PNG")
    bomb = chunk(b"zTXt", b"comment\x00\x00" + zlib.compress(bytes(2 << 20), 9))
    at = image.index(b"IDAT") - 4
    v = inspect_image(image[:at] + bomb * 3 + image[at:], "a.png")
    assert v.error is not None and v.error.count("Pillow's limit") == 1, v


def test_an_apng_declaring_two_billion_frames_costs_no_memory_for_them(rng: np.random.Generator) -> None:
    """acTL said 2**31-1 frames: the list of frame numbers to seek was built whole, 2 GB for a file of a
    few KB (a fuzzed input). The file holds two: an error, found at the first missing frame."""
    verdict, peak = inspected_with_peak(_apng_declaring(rng, 2**31 - 1), "many.png")
    assert verdict.error is not None and "acTL declares 2,147,483,647 frames" in verdict.error
    assert peak < 64 << 20, f"{peak:,} bytes traced"


def test_animation_chunks_without_an_actl_chunk_are_ignored_as_every_loader_ignores_them(
    rng: np.random.Generator,
) -> None:
    """fcTL and fdAT without acTL make no animation (the chunks are ancillary: libpng, Pillow and pngcheck show
    the default image alone); a damaged fdAT in such a file was corrupt-image ("APNG frame 0: ...")."""
    apng = _apng_declaring(rng, 2)
    at = apng.index(b"acTL") - 4
    plain = apng[:at] + apng[at + 20 :]  # acTL gone (its 8 bytes of data, length, type and CRC)
    fdat = plain.index(b"fdAT") - 4
    length = int.from_bytes(plain[fdat : fdat + 4], "big")
    body = plain[fdat + 8 : fdat + 12] + b"\x78\x9c" + bytes(length - 6)  # its zlib data zeroed
    damaged = plain[:fdat] + chunk(b"fdAT", body) + plain[fdat + 12 + length :]
    assert _pillow_frames(damaged) == 1
    verdict = inspect_image(damaged, "plain.png")
    assert verdict.error is None and verdict.damage == [] and verdict.frames == 1


def _chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    out, pos = [], 8
    while pos < len(png):
        length = int.from_bytes(png[pos : pos + 4], "big")
        out.append((png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]))
        pos += 12 + length
    return out


def test_an_apng_whose_first_fctl_comes_before_actl_is_valid(rng: np.random.Generator) -> None:
    """Pillow's apng/fctl_actl.png: frame 0's fcTL before acTL (the spec orders both before IDAT, not between
    them). It was corrupt-image ("fcTL has sequence number 1, expected 0"): frame 0 was dropped. Pillow loads
    every frame, and pngcheck finds nothing. Frame 1 damaged is still an error."""
    frames = [Image.fromarray(natural(rng, 24, 32)) for _ in range(2)]
    apng = encode(frames[0], "PNG", save_all=True, append_images=frames[1:])
    parts = _chunks(apng)
    names = [name for name, _ in parts]
    actl, fctl = names.index(b"acTL"), names.index(b"fcTL")
    assert actl < fctl < names.index(b"IDAT")
    parts[actl], parts[fctl] = parts[fctl], parts[actl]
    swapped = apng[:8] + b"".join(chunk(name, body) for name, body in parts)
    assert _pillow_frames(swapped) == 2
    verdict = inspect_image(swapped, "a.png")
    assert verdict.error is None and not verdict.damage and verdict.frames == 2, (verdict.error, verdict.damage)
    last = names.index(b"fdAT")
    name, body = parts[last]
    parts[last] = (name, body[:4] + bytes(len(body) - 4))  # frame 1's data zeroed (its CRC recomputed)
    damaged = apng[:8] + b"".join(chunk(n, b) for n, b in parts)
    assert inspect_image(damaged, "a.png").error is not None


def test_a_file_whose_start_only_is_zeroed_is_not_called_zero_bytes_only(rng: np.random.Generator) -> None:
    """A JPEG whose first 512 bytes were zeroed read "content is only zero bytes": the rest is data."""
    data = bytearray(encode(Image.fromarray(natural(rng, 48, 64)), "JPEG"))
    data[:512] = bytes(512)
    v = inspect_image(bytes(data), "a.jpg")
    assert v.format is None and v.content.startswith("512 zero bytes, then data"), v.content
    assert inspect_image(bytes(4096), "a.jpg").content.startswith("only zero bytes")
