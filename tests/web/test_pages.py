"""The pages over HTTP, as served by a real API on real Redis: status codes, content, escaping, signing in.

No JavaScript runs here: what these tests read is what a browser without JavaScript shows.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from markupsafe import escape
from service.conftest import TOKEN, Service, free_port, submit, wait_job

from scanner_service import checks
from scanner_service.report import Summary
from scanner_service.severity import FailOn

from .conftest import (
    CORRUPT_IMAGE,
    CORRUPT_ROWS,
    MANY_NANS,
    MISSING_CLASS,
    NAN_IMAGE,
    NAN_INDEX,
    NUM_CLASSES,
    ODD_FILE,
    ODD_FOLDER,
    PET_CLASSES,
    seed_job,
    start,
)

pytestmark = [pytest.mark.service, pytest.mark.xdist_group("web")]


def get(svc: Service, path: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(svc.url + path, timeout=30, follow_redirects=False, **kwargs)


def text_of(page: str) -> str:
    """The page's text as a reader sees it: tags dropped, entities decoded, spaces collapsed."""
    body = re.sub(r"<(script|style|template)\b.*?</\1>", " ", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body))).strip()


def section(page: str, anchor: str) -> str:
    """The text of the element with id ``anchor`` up to the next finding."""
    start_at = page.index(f'id="{anchor}"')
    end = page.find('<article class="finding', start_at + 1)
    return text_of(page[start_at : end if end > 0 else None])


def scan(svc: Service, path: str, **options: Any) -> str:
    with httpx.Client(base_url=svc.url, timeout=30) as client:
        job = submit(client, path, **options)
        state = wait_job(client, job["id"], timeout=120)
    assert state["status"] == "succeeded", state
    return str(job["id"])


def summary_json(errors: int = 0, warnings: int = 0) -> str:
    return Summary(
        errors=errors,
        warnings=warnings,
        items_scanned=10,
        bytes_scanned=100,
        shards=1,
        duration_s=1.0,
        fail_on=FailOn.ERROR,
        passed=errors == 0,
    ).model_dump_json()


# -- every page answers, from this origin only ----------------------------------------------------------


def test_pages_answer_with_html_and_a_strict_policy(page_service: Service) -> None:
    for path in ("/", "/checks", "/?status=running", "/?status=nonsense", "/?offset=50"):
        r = get(page_service, path)
        assert r.status_code == 200, (path, r.text[:500])
        assert r.headers["content-type"].startswith("text/html")
        policy = r.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["cache-control"] == "no-store"
        assert not re.search(r"(src|href)=\"(https?:)?//", r.text), "a page refers to another origin"
        assert "<script>" not in r.text and " style=" not in r.text, "inline script or style (blocked by the CSP)"
    for name, media in (("app.css", "text/css"), ("app.js", "text/javascript")):
        r = get(page_service, f"/static/{name}")
        assert r.status_code == 200 and r.headers["content-type"].startswith(media)
        assert "http://" not in r.text and "https://" not in r.text and "@import" not in r.text
    assert get(page_service, "/static/../app.py").status_code == 404
    assert get(page_service, "/static/nothing.js").status_code == 404
    pages = get(page_service, "/openapi.json").json()["paths"]
    assert "/" not in pages and "/checks" not in pages, "the pages are not part of the API's schema"


def test_jobs_page_has_a_labelled_form_with_suggestions(page_service: Service) -> None:
    page = get(page_service, "/").text
    for name in ("path", "num_classes", "batch_size", "fail_on", "select", "ignore", "decoder", "labels", "force"):
        field = re.search(rf'<(input|select)[^>]* name="{name}"[^>]*>', page)
        assert field, name
        fid = re.search(r'id="([^"]+)"', field.group(0))
        assert fid and f'<label for="{fid.group(1)}">' in page, f"{name} has no label"
    options = re.findall(
        r'<option value="([^"]*)"></option>', page.split('id="dataset-paths"')[1].split("</datalist>")[0]
    )
    root = page_service.data_root
    assert str(root / "defects") in options and str(root / "defects" / "train.h5") in options
    assert f"<code>{root}</code>" in page
    assert re.search(r'<option value="V001">nan-value</option>', page)
    assert 'aria-live="polite"' in page and 'role="alert"' in page
    bounds = {  # a number field takes what the scan options take: 0 locations (counts only) included
        name: re.search(rf'<input[^>]* name="{name}"[^>]*>', page).group(0)  # type: ignore[union-attr]
        for name in ("max_locations", "num_classes", "min_size")
    }
    assert 'min="0" max="100000"' in bounds["max_locations"]
    assert 'min="1" max="1000000"' in bounds["num_classes"]
    assert 'min="1" max="2147483647"' in bounds["min_size"]  # (PNG's largest side)


def test_checks_page_lists_the_catalogue(page_service: Service) -> None:
    page = get(page_service, "/checks").text
    for check in checks.CHECKS:
        assert f'id="{check.code}"' in page
        entry = section(page, check.code)
        shown = re.sub(r"\s", "", text_of(entry))  # the explanations' `code` spans are shown as code

        def plain(text: str) -> str:
            return re.sub(r"\s", "", text.replace("`", ""))[:60]

        assert check.name in entry and plain(check.why) in shown and plain(check.fix) in shown
    assert "Re-run <code>dscan scan</code>" in page


# -- jobs in every state --------------------------------------------------------------------------------


def test_jobs_list_shows_progress_rate_and_time_left(web_service: Service) -> None:
    """A service with a worker (one that answers its ping): the time left comes from the rate so far."""
    running = seed_job(
        web_service,
        str(web_service.data_root / "defects"),
        "running",
        items_total=40_000,
        items_done=10_000,
        bytes_total=100 << 20,
        bytes_done=25 << 20,
        shards_total=4,
        shards_done=1,
        age=30.0,
    )
    failed = seed_job(web_service, "clean", "failed", error="planning failed: no dataset here")
    done = seed_job(web_service, "clean", "succeeded", summary=summary_json(errors=3, warnings=2))
    page = get(web_service, "/").text
    row = text_of(page.split(f'data-id="{running}"')[1].split("</tr>")[0])
    assert "running" in row and "25%" in row
    assert "10,000 of 40,000 items" in row and "25.0 MB of 100.0 MB" in row
    assert re.search(r" \d+\.\d KB/s 3\d\d items/s ", row), row
    assert re.search(r" about 1 min 3\d s 3\d s ", row), row  # a quarter done in 30 s: 90 s to go
    assert 'id="jobs-workers"' in page and "No worker answers" not in page
    assert f">{running[:8]}<" in page and f'href="/scans/{running}"' in page
    assert "defects" in row and str(web_service.data_root) not in row, "the data root is left out of the path"
    assert '<meta http-equiv="refresh"' in page, "without JavaScript the page reloads while scans run"
    failed_row = text_of(page.split(f'data-id="{failed}"')[1].split("</tr>")[0])
    assert "failed" in failed_row and "planning failed: no dataset here" in failed_row
    done_row = text_of(page.split(f'data-id="{done}"')[1].split("</tr>")[0])
    assert "succeeded" in done_row and "dataset failed" in done_row and "100%" in done_row
    assert re.search(r"\b3 2$", done_row), done_row

    only_failed = get(web_service, "/?status=failed").text
    assert failed in only_failed and running not in only_failed and done not in only_failed
    assert re.search(r'href="/\?status=failed" aria-current="page"', only_failed)
    assert 'data-status="failed"' in only_failed


def test_without_a_worker_pages_give_no_time_left_and_say_why(page_service: Service) -> None:
    """No worker answers this service's ping: a running scan waits, so neither the list nor the scan's page
    (as served, without JavaScript) gives a time left from its past rate; both say why."""
    running = seed_job(
        page_service,
        "defects",
        "running",
        items_total=400,
        items_done=100,
        bytes_total=4 << 20,
        bytes_done=1 << 20,
        shards_total=4,
        shards_done=1,
        age=30.0,
    )
    listed = get(page_service, "/").text
    row = text_of(listed.split(f'data-id="{running}"')[1].split("</tr>")[0])
    assert "none while no worker runs" in row and "about" not in row, row
    notice = listed.split('id="jobs-workers"')[1].split("</p>")[0]
    assert "hidden" not in notice.split(">")[0] and "No worker answers: the scan waits until one starts" in notice
    page = get(page_service, f"/scans/{running}").text
    assert re.search(r'id="scan-eta">none while no worker runs<', page)
    notice = page.split('id="scan-workers"')[1].split("</p>")[0]
    assert "hidden" not in notice.split(">")[0] and "No worker answers" in notice
    assert "<code>celery -A workers.app worker</code>" in notice and "`" not in notice
    ended = seed_job(page_service, "clean", "succeeded", summary=summary_json(errors=0, warnings=0))
    quiet = get(page_service, "/?status=succeeded").text  # no scan under way shown: nothing to say
    assert ended in quiet and "No worker answers" not in quiet


def test_scan_pages_in_each_state(page_service: Service) -> None:
    queued = seed_job(page_service, "clean", "queued")
    page = get(page_service, f"/scans/{queued}").text
    assert "Cancel scan" in page and 'id="scan-progress"' in page and "Download the report" not in page
    assert f"send <code>DELETE /api/v1/scans/{queued}</code>" in page  # what to do without JavaScript
    failed = seed_job(page_service, "clean", "failed", error="the <b>reader</b> raised")
    page = get(page_service, f"/scans/{failed}").text
    assert "The scan failed" in page and "the &lt;b&gt;reader&lt;/b&gt; raised" in page and "Cancel scan" not in page
    cancelled = seed_job(page_service, "clean", "cancelled")
    assert "The scan was cancelled" in get(page_service, f"/scans/{cancelled}").text
    assert "The scan was cancelled" in get(page_service, f"/scans/{cancelled.upper()}").text  # an id copied upper
    expired = seed_job(page_service, "clean", "succeeded", summary=summary_json())
    assert "The report is gone" in get(page_service, f"/scans/{expired}").text
    for bad in ("0" * 32, "not-an-id", "A" * 32):
        r = get(page_service, f"/scans/{bad}")
        assert r.status_code == 404 and "No such scan" in r.text and r.headers["content-type"].startswith("text/html")
    for nowhere in ("/nope", f"/scans/{expired}/report", "/checks/V999"):  # a browser gets the site's 404 page
        r = get(page_service, nowhere, headers={"accept": "text/html,application/xhtml+xml"})
        assert r.status_code == 404 and "Page not found" in r.text, nowhere
        assert r.headers["content-type"].startswith("text/html")
    r = get(page_service, "/api/v1/nope", headers={"accept": "text/html"})
    assert r.status_code == 404 and r.json() == {"detail": "Not Found"}  # the API answers JSON


def test_a_path_with_a_control_character_is_spelled_out_as_in_the_reports(page_service: Service) -> None:
    """A job's path with a newline was shown raw in the jobs list and on its page, where the report (and
    the text report) spells it ``\\x0a``."""
    job = seed_job(page_service, "odd\nname.h5", "failed", error="planning failed")
    row = get(page_service, "/").text.split(f'data-id="{job}"')[1].split("</tr>")[0]
    assert "odd\\x0aname.h5" in row and "odd\nname" not in row, row
    page = get(page_service, f"/scans/{job}").text
    assert "odd\\x0aname.h5" in page and "odd\nname" not in page


def test_a_page_address_with_a_bad_query_is_an_error_page(page_service: Service) -> None:
    """A link edited by hand (``/?offset=-1``) showed a browser a raw JSON 422."""
    html = {"accept": "text/html,application/xhtml+xml"}
    for query in ("offset=-1", "offset=abc", "status=" + "x" * 30):
        r = get(page_service, f"/?{query}", headers=html)
        assert r.status_code == 422 and r.headers["content-type"].startswith("text/html"), query
        assert "Invalid address" in r.text and ("offset" in r.text or "status" in r.text), query
    r = get(page_service, "/?offset=-1")  # a client that asks for no HTML: JSON, as before
    assert r.status_code == 422 and "offset" in r.json()["detail"]


# -- a real report ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def defects_job(web_service: Service) -> str:
    return scan(web_service, "defects", num_classes=NUM_CLASSES, batch_size=32)


def test_report_page_tells_what_where_why_and_how(web_service: Service, defects_job: str) -> None:
    page = get(web_service, f"/scans/{defects_job}").text
    words = text_of(page)
    report = get(web_service, f"/api/v1/scans/{defects_job}/report").json()
    s = report["summary"]
    assert f"Failed. dscan found {s['errors']} errors and {s['warnings']} warning" in words
    assert "It fails on any error: fix what the findings below list, errors first" in words
    box = re.search(r'id="notes".*?</ul>', page, re.S)  # the tile counts the notes the box lists
    noted = len(re.findall(r"<li>", box.group(0))) if box else 0
    assert re.search(rf"{s['errors']} errors {s['warnings']} warnings? {noted} notes?", words), words[:600]
    assert f"Items scanned {s['items_scanned']:,}" in words and "Bytes scanned" in words and "Duration" in words

    # Grouped by severity, then check; each with its explanation and its locations.
    order = [m for m in re.findall(r'id="(sev-\w+-h|finding-\w+)"', page)]
    assert order[0] == "sev-error-h" and order.index("sev-warning-h") > order.index("finding-V001")
    nan = section(page, "finding-V001")
    assert "NaN in 1 sample" in nan and checks.BY_CODE["V001"].why[:50] in nan and "How to fix it" in nan
    assert f"File Dataset Index Detail train.h5 /data {NAN_INDEX} 1 NaN value" in nan
    chunk = section(page, "finding-S002")
    assert f"rows {CORRUPT_ROWS[0]}-{CORRUPT_ROWS[1]} unreadable" in chunk and "Chunk" in chunk
    assert "File Dataset Detail train.h5 /label class 3" in section(page, "finding-L003")  # the file holding them

    # The histogram: the missing class highlighted, P(absent) for the batch size.
    histogram = page.split('<table class="histogram">')[1].split("</table>")[0]
    rows = re.findall(r'<tr class="([^"]*)">\s*<th scope="row">(\d+)', histogram)
    assert [label for cls, label in rows if cls == "missing"] == [str(MISSING_CLASS)]
    assert len(rows) == NUM_CLASSES
    assert "P(absent from a batch of 32)" in histogram and "100%" in text_of(histogram)
    assert re.search(r'<rect class="bar-fill" x="0" y="0" width="100(\.0)?"', histogram)
    assert f"Missing classes {MISSING_CLASS}" in words

    # Statistics per dataset.
    stats = text_of(page.split('<table class="statistics stack">')[1].split("</table>")[0])
    assert re.search(r"train\.h5 /data float32 4096 × 256 [\d,]+ 1 0 ", stats), stats

    # Downloads are the API's report endpoint.
    links = dict(re.findall(r'href="([^"]+)" download="[^"]+" class="button" data-format="(\w+)"', page))
    by_format = {v: k for k, v in links.items()}
    assert set(by_format) == {"json", "junit", "markdown", "text"}
    for fmt, href in by_format.items():
        assert href == f"/api/v1/scans/{defects_job}/report?format={fmt}"
        assert get(web_service, href).status_code == 200


def test_image_report_names_the_file_its_reason_and_the_empty_class(web_service: Service) -> None:
    job = scan(web_service, "pets", batch_size=16)
    page = get(web_service, f"/scans/{job}").text
    corrupt = section(page, "finding-I003")
    assert f"File Detail {CORRUPT_IMAGE} truncated: no end-of-image marker" in corrupt
    assert checks.BY_CODE["I003"].fix[:40] in corrupt
    assert f"class 0 ({PET_CLASSES[0]})" in section(page, "finding-L003")
    assert f"{NAN_IMAGE} 1 NaN pixel value" in text_of(section(page, "finding-V001"))
    histogram = page.split('<table class="histogram">')[1].split("</table>")[0]
    missing = re.findall(r'<tr class="missing">\s*<th scope="row">(.*?)</th>', histogram, flags=re.S)
    assert [text_of(m) for m in missing] == [f"0 {PET_CLASSES[0]} missing"]
    assert "Samples per class</caption>" in histogram


def test_locations_are_paginated(web_service: Service) -> None:
    job = scan(web_service, "many-nans", max_locations=500)
    page = get(web_service, f"/scans/{job}").text
    nan = section(page, "finding-V001")
    assert f"locations 1–50 of {MANY_NANS}" in nan and "page 1 of 3" in nan
    assert nan.count("nans.h5 /x") == 50
    nxt = re.search(r'href="([^"]+)" rel="next">Next locations', page)
    assert nxt and html.unescape(nxt.group(1)) == f"/scans/{job}?p_V001=2#finding-V001"
    last = get(web_service, f"/scans/{job}?p_V001=3").text
    assert f"locations 101–{MANY_NANS} of {MANY_NANS}" in section(last, "finding-V001")
    assert "nans.h5 /x 238 1 NaN value" in section(last, "finding-V001")
    assert "page 3 of 3" in section(get(web_service, f"/scans/{job}?p_V001=99").text, "finding-V001")
    short = scan(web_service, "many-nans", max_locations=5, force=True)
    truncated = section(get(web_service, f"/scans/{short}").text, "finding-V001")
    assert f"5 locations, {MANY_NANS - 5} more not listed" in truncated and "Locations per finding" in truncated


def test_user_controlled_text_is_escaped(web_service: Service) -> None:
    odd = str(Path(ODD_FOLDER))
    job = scan(web_service, odd)
    for path in ("/", f"/scans/{job}"):
        page = get(web_service, path).text
        assert "<img src=x" not in page and "<b>bold" not in page
        assert str(escape(ODD_FILE)) in page or path == "/"
        assert str(escape(ODD_FOLDER)) in page


# -- signing in -----------------------------------------------------------------------------------------------


def test_with_tokens_only_the_login_form_shows(token_service: Service) -> None:
    job = seed_job(token_service, "clean", "running")
    for path in ("/", "/checks", f"/scans/{job}", "/?status=running"):
        r = get(token_service, path)
        assert r.status_code == 303
        assert r.headers["location"] == "/login?" + httpx.QueryParams({"next": path}).__str__()
    login = get(token_service, "/login?next=/checks")
    assert login.status_code == 200
    assert '<label for="token">API token</label>' in login.text and 'type="password"' in login.text
    assert 'value="/checks"' in login.text and "Scans</a>" not in login.text and job not in login.text
    assert get(token_service, "/static/app.css").status_code == 200


def test_sign_in_keeps_the_token_in_a_strict_httponly_cookie(token_service: Service) -> None:
    form = {"token": "wrong-token-00000000000000", "next": "/checks"}
    with httpx.Client(base_url=token_service.url, timeout=30, follow_redirects=False) as browser:
        bad = browser.post("/login", data=form)
        assert bad.status_code == 401 and "not valid" in bad.text and "set-cookie" not in bad.headers
        cross = browser.post("/login", data={"token": TOKEN}, headers={"Sec-Fetch-Site": "cross-site"})
        assert cross.status_code == 403 and "set-cookie" not in cross.headers
        other = browser.post("/login", data={"token": TOKEN}, headers={"Origin": "http://evil.example"})
        assert other.status_code == 403
        ok = browser.post("/login", data={"token": TOKEN, "next": "/checks"}, headers={"Sec-Fetch-Site": "same-origin"})
        assert ok.status_code == 303 and ok.headers["location"] == "/checks"
        cookie = ok.headers["set-cookie"]
        assert cookie.startswith(f"dscan_token={TOKEN};")
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
        assert "Secure" not in cookie  # plain HTTP here; set over HTTPS
        assert browser.get("/checks").status_code == 200
        assert browser.get("/").status_code == 200
        assert browser.get("/api/v1/scans").status_code == 200, "the API accepts the cookie"
        assert browser.get("/login").status_code == 303
        out = browser.post("/logout")
        assert out.status_code == 303 and out.headers["location"] == "/login"
        assert 'dscan_token=""' in out.headers["set-cookie"] and "Max-Age=0" in out.headers["set-cookie"]
        assert browser.get("/").status_code == 303
        assert browser.get("/api/v1/scans").status_code == 401
    away = httpx.post(token_service.url + "/login", data={"token": TOKEN, "next": "//evil.example/"}, timeout=30)
    assert away.status_code == 303 and away.headers["location"] == "/"
    assert (
        httpx.get(token_service.url + "/api/v1/scans", cookies={"dscan_token": "forged-token-000000000"}).status_code
        == 401
    )


def test_without_tokens_login_is_not_needed(page_service: Service) -> None:
    r = get(page_service, "/login?next=/checks")
    assert r.status_code == 303 and r.headers["location"] == "/checks"
    page = get(page_service, "/").text
    assert "Sign out" not in page


def test_redis_down_is_a_readable_503(redis_url: str, web_root: Path, tmp_path: Path) -> None:
    svc = Service(f"redis://127.0.0.1:{free_port()}/0", web_root, tmp_path, extra_env={"DSCAN_REDIS_TIMEOUT_S": "0.5"})
    try:
        start(svc, 0)
        for path in ("/", f"/scans/{'0' * 32}"):
            r = get(svc, path)
            assert r.status_code == 503 and r.headers["content-type"].startswith("text/html"), r.text[:300]
            assert "The job store is unavailable" in r.text and "Traceback" not in r.text
            assert r.headers["retry-after"] == "5"
        assert get(svc, "/checks").status_code == 200
    finally:
        svc.stop()


def test_a_clean_report_reads_as_a_sentence(web_service: Service) -> None:
    """ "Passed.dscan found nothing wrong.": the template's whitespace control ate the space after the verdict."""
    page = get(web_service, f"/scans/{scan(web_service, 'clean')}").text
    line = page.split('class="verdict-line">')[1].split("</p>")[0]  # (as served: a browser joins no tags)
    assert re.match(r"\s*<strong>Passed\.</strong>\s+dscan found nothing wrong\.", line), line
