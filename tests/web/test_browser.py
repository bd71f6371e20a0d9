"""The status page in a real browser (Debian's chromium through Playwright) against a real service.

A user opens the jobs page, starts a scan of a dataset with a NaN, a corrupt chunk and a missing class from the
form, watches it run to 100% without reloading, opens the report and finds each defect where it is; the JSON
download is the API's report. Then an image folder with a truncated JPEG and an empty class folder: the
report gives the file's reason and highlights the class. Screenshots of every page, at desktop and phone widths, go to
``test-artifacts/web/``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from service.conftest import TOKEN, Service

from api.pages import views
from workers.store import JobStatus

from .conftest import (
    CORRUPT_IMAGE,
    CORRUPT_ROWS,
    DESKTOP,
    MISSING_CLASS,
    NAN_IMAGE,
    NAN_INDEX,
    NUM_CLASSES,
    PET_CLASSES,
    PHONE,
    screenshot,
    seed_job,
    store_of,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.service, pytest.mark.xdist_group("web")]

WATCH = """
() => {
  window.__dscanMarker = "not reloaded";
  window.__seen = [];
  const record = () => {
    for (const tr of document.querySelectorAll("#jobs tbody tr")) {
      const bar = tr.querySelector("progress");
      window.__seen.push([tr.dataset.id, tr.dataset.status, bar ? Number(bar.value) : null]);
    }
  };
  new MutationObserver(record).observe(document.querySelector("#jobs tbody"),
    { subtree: true, childList: true, attributes: true, attributeFilter: ["data-status", "value"] });
}
"""


def test_start_watch_and_read_a_scan(browser: Any, web_service: Service, artifacts: Path) -> None:
    context = browser.new_context(viewport=DESKTOP, accept_downloads=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    expected = "Failed to load resource: the server responded with a status of 4"  # the form's mistakes below
    page.on(
        "console",
        lambda msg: errors.append(msg.text) if msg.type == "error" and not msg.text.startswith(expected) else None,
    )
    page.goto(web_service.url + "/")
    assert page.title() == "Scans · dscan"
    page.evaluate(WATCH)

    # Keyboard: the first Tab reaches the skip link, focus is always visible.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    for _ in range(10):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "f-path":
            break
    assert page.evaluate("document.activeElement.id") == "f-path"
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") == "solid"

    # Mistakes are explained next to the form.
    page.get_by_role("button", name="Start scan").click()
    expect(page.locator("#form-error")).to_have_text("Enter the path of a dataset under the data roots.")
    page.get_by_label("Dataset path").fill("/etc")
    page.get_by_role("button", name="Start scan").click()
    expect(page.locator("#form-error")).to_contain_text("outside the data roots")
    assert page.get_attribute("#f-path", "aria-invalid") == "true"
    screenshot(page, artifacts, "jobs-form-error-desktop")
    page.get_by_label("Dataset path").fill("clean")
    page.get_by_text("More options").click()
    page.get_by_label("Only these checks").fill("V999")
    page.get_by_role("button", name="Start scan").click()
    expect(page.locator("#form-error")).to_contain_text("V999")
    page.get_by_label("Only these checks").fill("")

    # The form: a path suggested from the data root, the CLI's options.
    defects = str(web_service.data_root / "defects")
    suggested = page.eval_on_selector_all("#dataset-paths option", "els => els.map(e => e.value)")
    assert defects in suggested
    page.get_by_label("Dataset path").fill(defects)
    page.get_by_label("Number of classes").fill(str(NUM_CLASSES))
    page.get_by_label("Batch size").fill("32")
    page.get_by_role("button", name="Start scan").click()
    page.wait_for_selector("#form-status a")
    assert "Started" in page.inner_text("#form-status")
    job_id = page.get_attribute("#form-status a", "href").rsplit("/", 1)[1]
    row = f'#jobs tbody tr[data-id="{job_id}"]'

    # It appears, runs and reaches 100% while the page stays as it was loaded.
    page.wait_for_selector(row, timeout=10_000)
    for _ in range(600):  # a screenshot while it runs, part way
        value = float(page.get_attribute(f"{row} progress", "value") or 0)
        if 0 < value < 1 or page.get_attribute(row, "data-status") not in ("queued", "running"):
            break
        page.wait_for_timeout(50)
    screenshot(page, artifacts, "jobs-running-desktop")
    page.wait_for_selector(f'{row}[data-status="succeeded"]', timeout=120_000)
    assert page.evaluate("window.__dscanMarker") == "not reloaded"
    seen = [s for s in page.evaluate("window.__seen") if s[0] == job_id]
    assert seen[0][1] in ("queued", "running"), seen  # the row came from a poll, not a reload
    assert seen[-1][1:] == ["succeeded", 1], seen
    assert page.get_attribute(f"{row} progress", "value") == "1"
    assert page.inner_text(f"{row} .pct") == "100%"
    assert page.inner_text(f"{row} .verdict") == "dataset failed"
    assert int(page.inner_text(f"{row} .errors")) >= 2
    assert "succeeded" in page.inner_text("#live")
    screenshot(page, artifacts, "jobs-desktop")

    # The report: where the NaN is, why the chunk is unreadable, which class is missing.
    page.click(f"{row} a.job-link")
    page.wait_for_url(f"**/scans/{job_id}")
    assert page.title() == f"Scan {job_id[:8]} · dscan"
    nan = page.locator("#finding-V001")
    assert "NaN in 1 sample" in nan.inner_text()
    nan_row = nan.locator("table.locations tbody tr").first
    assert [c.strip() for c in nan_row.locator("td").all_inner_texts()][:3] == ["train.h5", "/data", str(NAN_INDEX)]
    assert "How to fix it" in nan.inner_text()
    chunk = page.locator("#finding-S002")
    text = chunk.inner_text()
    assert f"rows {CORRUPT_ROWS[0]}-{CORRUPT_ROWS[1]} unreadable" in text, text
    missing = page.locator("table.histogram tbody tr.missing")
    assert missing.count() == 1
    assert missing.locator("th").inner_text().split()[0] == str(MISSING_CLASS)
    assert "missing" in missing.inner_text()
    colour = missing.evaluate("el => getComputedStyle(el).backgroundColor")
    assert colour not in ("rgba(0, 0, 0, 0)", "rgb(255, 255, 255)")
    assert page.locator("#finding-L003").is_visible()
    screenshot(page, artifacts, "scan-desktop")

    # The JSON download is the API's report, byte for byte.
    with page.expect_download() as info:
        page.click('a[data-format="json"]')
    downloaded = Path(info.value.path()).read_bytes()
    api = httpx.get(f"{web_service.url}/api/v1/scans/{job_id}/report", params={"format": "json"}, timeout=30)
    assert api.status_code == 200 and downloaded == api.content
    with page.expect_download() as info:
        page.click('a[data-format="junit"]')
    assert Path(info.value.path()).read_bytes().startswith(b"<?xml")

    # An image folder from the same form: the corrupt file's reason, the empty class folder.
    page.goto(web_service.url + "/")
    page.get_by_label("Dataset path").fill("pets")
    page.get_by_label("Batch size").fill("16")
    page.get_by_role("button", name="Start scan").click()
    page.wait_for_selector("#form-status a")
    pets = page.get_attribute("#form-status a", "href").rsplit("/", 1)[1]
    page.wait_for_selector(f'#jobs tbody tr[data-id="{pets}"][data-status="succeeded"]', timeout=120_000)
    page.click(f'#jobs tbody tr[data-id="{pets}"] a.job-link')
    page.wait_for_url(f"**/scans/{pets}")
    image = page.locator("#finding-I003")
    cells = [c.strip() for c in image.locator("table.locations tbody tr").first.locator("td").all_inner_texts()]
    assert cells[0] == CORRUPT_IMAGE and cells[-1].startswith("truncated"), cells
    assert "Re-download or re-copy the file" in image.inner_text()
    missing = page.locator("table.histogram tbody tr.missing th").inner_text().split()
    assert missing == ["0", PET_CLASSES[0], "missing"], missing
    nan = page.locator("#finding-V001")
    nan_cells = [c.strip() for c in nan.locator("table.locations tbody tr").first.locator("td").all_inner_texts()]
    assert nan_cells[0] == NAN_IMAGE and "NaN" in nan_cells[-1], nan_cells
    screenshot(page, artifacts, "scan-images-desktop")

    page.goto(web_service.url + "/checks")
    assert page.locator("#V001").is_visible()
    screenshot(page, artifacts, "checks-desktop")
    assert not errors, errors

    # The same pages on a phone.
    phone = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2)
    small = phone.new_page()
    for path, name in (("/", "jobs-phone"), (f"/scans/{job_id}", "scan-phone"), ("/checks", "checks-phone")):
        small.goto(web_service.url + path)
        width = small.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{path} scrolls sideways on a phone ({width} px)"
        screenshot(small, artifacts, name)
    phone.close()
    context.close()


def test_jobs_list_follows_progress_without_reloading(browser: Any, page_service: Service) -> None:
    """Part-way progress, as the workers write it to Redis, moves the bar of the jobs list live."""
    job_id = seed_job(
        page_service, "defects", "running", items_total=1000, bytes_total=100 << 20, shards_total=4, age=5.0
    )
    row = f'#jobs tbody tr[data-id="{job_id}"]'
    key = page_service.key("job", job_id)
    redis = page_service.store_client()
    page = browser.new_page(viewport=DESKTOP)
    page.goto(page_service.url + "/")
    page.evaluate(WATCH)
    expect(page.locator(f"{row} .pct")).to_have_text("0%")
    for done, shown in ((10, "10%"), (55, "55%"), (100, "100%")):
        redis.hset(key, mapping={"bytes_done": done << 20, "items_done": done * 10})
        expect(page.locator(f"{row} .pct")).to_have_text(shown, timeout=10_000)
        expect(page.locator(f"{row} .items")).to_have_text(f"{done * 10:,} of 1,000 items")
    store = store_of(page_service)
    summary = '{"errors": 1, "warnings": 0, "items_scanned": 1000, "bytes_scanned": 104857600, "shards": 4, '
    summary += '"duration_s": 5.0, "fail_on": "error", "passed": false}'
    store.transition(job_id, JobStatus.SUCCEEDED, [JobStatus.RUNNING], finished=time.time(), summary=summary)
    store.close()
    expect(page.locator(f"{row} .verdict")).to_have_text("dataset failed", timeout=10_000)
    expect(page.locator("#live")).to_contain_text(f"Scan {job_id[:8]} succeeded")
    assert page.inner_text(f"{row} .errors") == "1"
    values = [v for jid, _, v in page.evaluate("window.__seen") if jid == job_id]
    assert {0.1, 0.55, 1.0} <= set(values), values
    assert page.evaluate("window.__dscanMarker") == "not reloaded"
    page.close()


def test_a_running_scan_says_when_no_worker_answers(browser: Any, page_service: Service) -> None:
    """With no worker running, a scan waits for ever: its page showed it running, its time left growing, and
    nothing else. It says so now, and gives no time left; with a worker, it says nothing of the kind."""
    job_id = seed_job(page_service, "defects", "running", items_total=1000, bytes_total=100 << 20, shards_total=4)
    page_service.store_client().hset(page_service.key("job", job_id), mapping={"bytes_done": 10 << 20})
    page = browser.new_page(viewport=DESKTOP)
    page.goto(f"{page_service.url}/scans/{job_id}")
    expect(page.locator("#scan-workers")).to_contain_text("No worker answers: the scan waits until one starts")
    expect(page.locator("#scan-workers code").first).to_have_text("celery -A workers.app worker")  # no backticks
    expect(page.locator("#scan-eta")).to_have_text("none while no worker runs")
    # a worker answering (the readiness answer of a service with one; this service has none to ping)
    ready = {"ready": True, "redis": "ok", "workers_answering": True}
    page.route("**/readyz", lambda route: route.fulfill(json=ready))
    with page.expect_response("**/readyz"):
        page.reload()
    page.wait_for_timeout(300)
    expect(page.locator("#scan-workers")).to_be_hidden()
    # (the page as served says none, the service itself pinging no worker; the next poll gives the time left)
    expect(page.locator("#scan-eta")).not_to_have_text("none while no worker runs")
    page.close()


def test_the_jobs_list_keeps_saying_no_worker_answers_as_it_refreshes(browser: Any, page_service: Service) -> None:
    """The list refreshes its rows every second from the API, which knows no time left from workers: a running
    scan's row must keep "none while no worker runs" (not the time left from its past rate) and the notice."""
    job_id = seed_job(page_service, "defects", "running", items_total=1000, bytes_total=100 << 20, shards_total=4)
    page_service.store_client().hset(page_service.key("job", job_id), mapping={"bytes_done": 10 << 20})
    page = browser.new_page(viewport=DESKTOP)
    page.goto(page_service.url + "/")
    row = f'#jobs tbody tr[data-id="{job_id}"]'
    with page.expect_response(lambda r: "/api/v1/scans?" in r.url):  # a refresh has filled the rows again
        pass
    page.wait_for_timeout(300)
    expect(page.locator(f"{row} .eta")).to_have_text("none while no worker runs")
    expect(page.locator("#jobs-workers")).to_contain_text("No worker answers")
    page.close()


def test_a_running_scan_and_cancel(browser: Any, web_service: Service, artifacts: Path) -> None:
    """A scan page while its job runs: live progress, then the cancel button ends it."""
    job_id = seed_job(
        web_service,
        "defects",
        "running",
        items_total=40_000,
        items_done=13_000,
        bytes_total=200 << 20,
        bytes_done=65 << 20,
        shards_total=4,
        shards_done=1,
        age=20.0,
    )
    for viewport, name in ((DESKTOP, "running-desktop"), (PHONE, "running-phone")):
        context = browser.new_context(viewport=viewport)
        page = context.new_page()
        page.goto(f"{web_service.url}/scans/{job_id}")
        assert page.inner_text("#scan-pct") == "32%"
        assert "13,000 of 40,000 items" in page.inner_text("#scan-progress-text")
        assert page.inner_text("#scan-eta").startswith("about")
        screenshot(page, artifacts, name)
        context.close()
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(f"{web_service.url}/scans/{job_id}")
    store = web_service.store_client()
    store.hset(web_service.key("job", job_id), mapping={"items_done": 30_000, "bytes_done": 150 << 20})
    expect(page.locator("#scan-pct")).to_have_text("75%", timeout=10_000)
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel scan").click()
    page.wait_for_selector("#scan-status.status-cancelled", timeout=10_000)
    assert "cancelled" in page.inner_text("main")
    context.close()


def test_sign_in_with_a_token(browser: Any, token_service: Service, artifacts: Path) -> None:
    seed_job(token_service, "clean", "queued")
    for viewport, name in ((DESKTOP, "login-desktop"), (PHONE, "login-phone")):
        context = browser.new_context(viewport=viewport)
        page = context.new_page()
        page.goto(token_service.url + "/checks")
        assert page.url.startswith(f"{token_service.url}/login")
        assert page.locator("form input[name=token]").count() == 1
        assert page.locator("nav[aria-label=Main]").count() == 0
        screenshot(page, artifacts, name)
        context.close()

    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(token_service.url + "/")
    page.get_by_label("API token").fill("not-the-token-0000000000")
    page.get_by_role("button", name="Sign in").click()
    assert "not valid" in page.inner_text("[role=alert]")
    page.get_by_label("API token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(token_service.url + "/")
    assert page.locator("#jobs tbody tr").count() >= 1
    cookie = next(c for c in context.cookies() if c["name"] == "dscan_token")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""
    status = page.evaluate("fetch('/api/v1/scans').then(r => r.status)")
    assert status == 200
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/login")
    assert not [c for c in context.cookies() if c["name"] == "dscan_token"]
    assert page.evaluate("fetch('/api/v1/scans').then(r => r.status)") == 401
    context.close()


def test_report_reads_without_javascript(browser: Any, web_service: Service, artifacts: Path) -> None:
    with httpx.Client(base_url=web_service.url, timeout=30) as client:
        job = client.post("/api/v1/scans", json={"path": "defects", "num_classes": NUM_CLASSES, "batch_size": 32})
        assert job.status_code in (200, 202), job.text
        job_id = job.json()["id"]
    context = browser.new_context(viewport=DESKTOP, java_script_enabled=False)
    page = context.new_page()
    for _ in range(120):
        page.goto(f"{web_service.url}/scans/{job_id}")
        if page.locator("#summary-h").count():
            break
        page.wait_for_timeout(500)
    assert "Failed." in page.inner_text(".verdict-line")
    assert page.locator("#finding-V001 table.locations").is_visible()
    assert page.locator("table.histogram tr.missing").count() == 1
    screenshot(page, artifacts, "scan-nojs-desktop")
    context.close()


def test_live_numbers_read_as_the_server_writes_them(browser: Any, page_service: Service) -> None:
    """The script formats live progress like the server renders it (one look, whichever wrote the row)."""
    page = browser.new_page()
    page.goto(page_service.url + "/checks")
    sizes = [0, 1023, 1536, 71_100_000, 5 << 40]
    durations = [0.04, 4.27, 42.4, 59.6, 185, 3599.6, 7440]  # (exact ties round differently: not shown)
    paths = ["/data/train.h5", "/database/x", "rel/x.h5", "/data"]
    js = page.evaluate(
        """([sizes, durations, paths]) => [
            sizes.map(window.dscan.humanBytes),
            durations.map(window.dscan.humanDuration),
            paths.map(p => window.dscan.displayPath(p, ["/data"])),
            [12345, 0].map(window.dscan.humanCount),
        ]""",
        [sizes, durations, paths],
    )
    assert js == [
        [views.human_bytes(n) for n in sizes],
        [views.human_duration(s) for s in durations],
        [views.display_path(p, ["/data"]) for p in paths],
        [views.human_count(n) for n in (12345, 0)],
    ]
    page.close()


def test_a_long_file_name_scrolls_no_page_sideways(browser: Any, web_service: Service, artifacts: Path) -> None:
    """A 200-character name without spaces wraps in the scans list and in the report's per-channel heading,
    on a desktop and on a phone (the page scrolled sideways: 1,979 px at 1,366); on a desktop, the scans
    table shows every column without scrolling (the warnings were cut off at 1,366 px)."""
    import h5py
    import numpy as np

    name = "x" * 196 + ".h5"
    with h5py.File(web_service.data_root / name, "w") as fh:
        fh["features"] = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    with httpx.Client(base_url=web_service.url, timeout=30) as client:
        job = client.post("/api/v1/scans", json={"path": name})
        assert job.status_code in (200, 202), job.text
        job_id = job.json()["id"]
        for _ in range(240):
            if client.get(f"/api/v1/scans/{job_id}").json()["status"] == "succeeded":
                break
            time.sleep(0.5)
    for viewport in (DESKTOP, PHONE):
        context = browser.new_context(viewport=viewport)
        page = context.new_page()
        for path in ("/", f"/scans/{job_id}"):
            page.goto(web_service.url + path)
            assert page.locator("details.channels").count() or path == "/"
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= viewport["width"], f"{path} scrolls sideways at {viewport['width']} px ({width} px)"
            if path != "/":  # the report's tables wrap the name: no box scrolls sideways either (the index of a
                # finding, or a column of statistics, sat 1,800 px to the right of a long shard name)
                for wrap in page.locator(".table-wrap").all():
                    assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth + 1"), f"a table scrolls at {viewport}"
            if path == "/":
                box = page.locator(f'#jobs tbody tr[data-id="{job_id}"] td.path')
                inner = box.evaluate("cell => cell.scrollWidth <= cell.clientWidth + 1")
                assert inner, f"the dataset name overflows its cell at {viewport['width']} px"
                if viewport is DESKTOP:  # every column in view, the start time on one line (it took four)
                    wrap = page.locator(".jobs-section .table-wrap")
                    assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth + 1"), "the scans table scrolls"
                    created = page.locator(f'#jobs tbody tr[data-id="{job_id}"] .created')
                    lines = "t => { const r = new Range(); r.selectNodeContents(t); return r.getClientRects().length }"
                    assert created.evaluate(lines) == 1
        screenshot(page, artifacts, f"long-name-{viewport['width']}")
        context.close()


def test_a_form_error_marks_and_focuses_the_field_it_names(browser: Any, web_service: Service) -> None:
    """An unknown check code marks the field that holds it, which gets the focus (only path errors did; the
    focus fell to the page)."""
    page = browser.new_page(viewport=DESKTOP)
    page.goto(web_service.url + "/")
    page.get_by_label("Dataset path").fill("defects")
    page.locator("details.more summary").first.click()
    page.get_by_label("Only these checks").fill("XX99")
    page.get_by_role("button", name="Start scan").click()
    expect(page.locator("#form-error")).to_contain_text("unknown check 'XX99'")
    field = page.get_by_label("Only these checks")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_be_focused()
    field.fill("V001")
    expect(field).not_to_have_attribute("aria-invalid", "true")
    # a selection that leaves no check for the dataset, and a path that is no dataset: their fields (neither
    # was marked, and the focus fell back to the button)
    field.fill("I")
    page.get_by_role("button", name="Start scan").click()
    expect(page.locator("#form-error")).to_contain_text("leave no check that applies to this hdf5 dataset")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_be_focused()
    field.fill("")
    path = page.get_by_label("Dataset path")
    path.fill("defects/notes.txt")
    page.get_by_role("button", name="Start scan").click()
    expect(page.locator("#form-error")).to_contain_text("is not a dataset dscan can read")
    expect(path).to_have_attribute("aria-invalid", "true")
    expect(path).to_be_focused()
    page.close()
    # on a phone the message under the form was below the screen: the field red and focused, no reason in view
    phone = browser.new_page(viewport={"width": 375, "height": 740})
    phone.goto(web_service.url + "/")
    phone.get_by_label("Dataset path").fill("/etc/passwd")
    phone.get_by_role("button", name="Start scan").click()
    expect(phone.locator("#form-error")).to_be_visible()
    expect(phone.locator("#form-error")).to_be_in_viewport()
    phone.close()
