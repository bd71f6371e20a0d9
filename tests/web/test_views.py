"""What the pages compute, without a server: numbers in words, pages of locations, suggestions, redirects."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from api.pages import views
from api.pages.session import safe_next
from scanner_service.location import Location


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "—"),
        (math.nan, "—"),
        (0.04, "0.0 s"),
        (4.25, "4.2 s"),
        (42.4, "42 s"),
        (59.6, "1 min 00 s"),
        (185, "3 min 05 s"),
        (3599.6, "1 h 00 min"),
        (7440, "2 h 04 min"),
    ],
)
def test_durations(seconds: float | None, text: str) -> None:
    assert views.human_duration(seconds) == text


@pytest.mark.parametrize(
    ("n", "text"), [(None, "—"), (0, "0 B"), (1023, "1023 B"), (1536, "1.5 KB"), (71_100_000, "67.8 MB")]
)
def test_bytes_as_the_cli_prints_them(n: int | None, text: str) -> None:
    assert views.human_bytes(n) == text


@pytest.mark.parametrize(
    ("p", "text"),
    [(None, "—"), (0.0, "0%"), (3e-7, "< 0.01%"), (0.0214, "2.14%"), (0.99999, "100%"), (1.0, "100%")],
)
def test_probabilities_read_at_both_ends(p: float | None, text: str) -> None:
    assert views.probability(p) == text


def test_statistics_name_nan_and_inf() -> None:
    assert views.human_number(math.nan) == "NaN"
    assert views.human_number(-math.inf) == "−Inf"
    assert views.human_number(12345) == "12,345"
    assert views.human_number(0.000123456) == "0.0001235"


def test_paths_are_shown_without_their_data_root() -> None:
    roots = ["/data", "/mnt/more/"]
    assert views.display_path("/data/train.h5", roots) == "train.h5"
    assert views.display_path("/mnt/more/a/b", roots) == "a/b"
    assert views.display_path("/database/x", roots) == "/database/x"
    assert views.display_path("/data", roots) == "/data"
    assert views.display_path("relative/x.h5", roots) == "relative/x.h5"


def test_location_pages_clamp_and_link() -> None:
    locations = [Location(path="a.h5", dataset="/x", index=i) for i in range(120)]

    def url(n: int) -> str:
        return f"?p={n}"

    first = views.page_of(locations, 1, url, 50)
    assert (first.first, first.last, first.pages, first.prev_url, first.next_url) == (1, 50, 3, None, "?p=2")
    last = views.page_of(locations, 99, url, 50)
    assert (last.number, last.first, last.last, last.next_url, last.prev_url) == (3, 101, 120, None, "?p=2")
    assert len(last.rows) == 20 and last.rows[0].index == 100
    empty = views.page_of([], 1, url, 50)
    assert (empty.pages, empty.first, empty.last, empty.rows) == (1, 0, 0, [])


def test_location_columns_are_the_ones_used() -> None:
    locs = [Location(path="a.h5", dataset="/x", index=3), Location(path="b.txt", line=7, detail="bad")]
    assert views.location_columns(locs) == ["path", "dataset", "index", "line", "detail"]


@pytest.mark.parametrize(
    ("value", "target"),
    [
        (None, "/"),
        ("", "/"),
        ("/scans/abc?x=1", "/scans/abc?x=1"),
        ("//evil.example/x", "/"),
        ("https://evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("checks", "/"),
        ("/ok\nSet-Cookie: x", "/"),
    ],
)
def test_only_local_redirects_after_sign_in(value: str | None, target: str) -> None:
    assert safe_next(value) == target


def test_suggestions_list_entries_under_the_roots(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a" / "deep" / "deeper" / "deepest").mkdir(parents=True)
    (root / "a" / "x.h5").write_bytes(b"")
    (root / ".hidden").mkdir()
    (root / "b.h5").write_bytes(b"")
    (root / "link").symlink_to(tmp_path)
    found = views.Suggestions([root], depth=3).walk()
    assert str(root / "a" / "x.h5") in found and str(root / "b.h5") in found
    assert str(root / "a" / "deep" / "deeper") in found
    assert str(root / "a" / "deep" / "deeper" / "deepest") not in found  # deeper than 3 levels
    assert not any(".hidden" in p for p in found)
    assert str(root / "link") in found and not any(p.startswith(str(root / "link") + "/") for p in found)
    assert found == sorted(found)
    assert len(views.Suggestions([root], limit=2).walk()) == 2


def test_suggestions_leave_out_names_a_page_cannot_carry(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "fine.h5").write_bytes(b"")
    open(os.fsencode(root) + b"/caf\xe9.jpg", "wb").close()  # not UTF-8: the page could not even be encoded
    (root / "esc\x1b[31m.h5").write_bytes(b"")
    found = views.Suggestions([root]).walk()
    assert found == [str(root / "fine.h5")]
    "".join(found).encode("utf-8")  # what the page is made of encodes


def test_options_shown_are_the_ones_the_requester_chose() -> None:
    from api.pages.views import options_text

    shown = options_text({"num_classes": 10, "select": ["V001", "L"], "confine": ["/data"]})
    assert shown == [("num classes", "10"), ("select", "V001, L")]  # the service's own data roots are not listed
