"""What a person watching the status page saw wrong in a real browser: a scan queued behind another's shards,
an image folder of splits, the notes of a report."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from playwright.sync_api import expect
from service.conftest import Service

from workers.store import JobStatus

from .conftest import DESKTOP, PHONE, screenshot, seed_job, store_of

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.service, pytest.mark.xdist_group("web")]


def scanned(svc: Service, body: dict[str, Any]) -> str:
    """The id of a succeeded scan of ``body`` (submitted through the API)."""
    with httpx.Client(base_url=svc.url, timeout=30) as client:
        job = client.post("/api/v1/scans", json={**body, "force": True})
        assert job.status_code == 202, job.text
        job_id: str = job.json()["id"]
        for _ in range(240):
            status = client.get(f"/api/v1/scans/{job_id}").json()["status"]
            if status not in ("queued", "running"):
                break
            time.sleep(0.5)
    assert status == "succeeded", status
    return job_id


def write_splits(folder: Path) -> None:
    """``train/{bird,cat,dog}`` and ``val/{cat,dog}`` (no bird in val), ``val/dog/copy.jpg`` a copy of a train image."""
    from PIL import Image

    rng = np.random.default_rng(8)
    for split, classes in (("train", ("bird", "cat", "dog")), ("val", ("cat", "dog"))):
        for name in classes:
            (folder / split / name).mkdir(parents=True, exist_ok=True)
            for i in range(3):
                pixels = (rng.random((40, 40, 3)) * 255).astype(np.uint8)
                Image.fromarray(pixels).save(folder / split / name / f"{i}.jpg", quality=85)
    (folder / "val/dog/copy.jpg").write_bytes((folder / "train/dog/0.jpg").read_bytes())


def test_a_queued_scan_says_it_waits_and_does_not_claim_to_run(browser: Any, page_service: Service) -> None:
    """A planned scan whose shards wait behind another scan's is queued: its page said 'Queued: 0 of 1,000
    items' and 'Running for 0.0 s', a clock that never moved while it waited."""
    job_id = seed_job(page_service, "defects", "queued")
    now = time.time()
    store = store_of(page_service)
    store.set_fields(
        job_id,
        started=now - 4.0,
        planned=now - 3.5,
        paused=now - 3.5,
        shards_total=2,
        items_total=1000,
        bytes_total=4 << 20,
    )
    for viewport in (DESKTOP, PHONE):
        page = browser.new_page(viewport=viewport)
        page.goto(f"{page_service.url}/scans/{job_id}")
        live = page.locator("#scan-live")
        expect(page.locator("#scan-progress-text")).to_have_text("Queued: waiting for a worker, 0 B of 4.0 MB.")
        assert "Running for" not in live.inner_text()
        page.wait_for_timeout(1500)  # a poll or more: the script writes the same
        expect(page.locator("#scan-progress-text")).to_have_text("Queued: waiting for a worker, 0 B of 4.0 MB.")
        assert "Running for" not in live.inner_text()
        assert page.inner_text("#scan-duration") == "0.5 s"
        page.close()

    page = browser.new_page(viewport=DESKTOP)
    page.goto(page_service.url + "/")
    row = page.locator(f'#jobs tbody tr[data-id="{job_id}"]')
    expect(row.locator(".items")).to_have_text("waiting for a worker")
    page.wait_for_timeout(1500)
    expect(row.locator(".items")).to_have_text("waiting for a worker")
    # a worker takes its first shard: it runs, its clock goes on without the wait
    store.transition(job_id, JobStatus.RUNNING, [JobStatus.QUEUED], paused="", waited_s=3.5)
    store.set_fields(job_id, items_done=250, bytes_done=1 << 20, shards_done=1)
    store.close()
    expect(row.locator(".items")).to_have_text("250 of 1,000 items", timeout=10_000)
    page.goto(f"{page_service.url}/scans/{job_id}")
    expect(page.locator("#scan-progress-text")).to_have_text("Running: 250 of 1,000 items, 1.0 MB of 4.0 MB.")
    page.close()


def test_each_split_has_a_label_table_headed_by_its_split(browser: Any, web_service: Service, artifacts: Path) -> None:
    """An image folder of splits: one label table per split, headed 'Split train' and 'Split val' (they read
    'train in train' and 'val in val'); the class missing in val is marked; the leaked copy is named; the
    note on the split layout shows in the summary."""
    folder = web_service.data_root / "pet-splits"
    write_splits(folder)
    job_id = scanned(web_service, {"path": "pet-splits", "batch_size": 4})
    for viewport in (DESKTOP, PHONE):
        page = browser.new_page(viewport=viewport)
        page.goto(f"{web_service.url}/scans/{job_id}")
        headings = [h.strip() for h in page.locator(".label-stream h3").all_inner_texts()]
        assert headings == ["Split train", "Split val"], headings
        captions = [c.strip() for c in page.locator("table.histogram caption").all_inner_texts()]
        assert captions == ["Samples per class in split train", "Samples per class in split val"], captions
        val = page.locator(".label-stream").nth(1)
        assert val.locator("tr.missing th").inner_text().split() == ["0", "bird", "missing"]
        assert "leakage between splits" in page.locator("#finding-I013").inner_text()
        notes = page.locator("#notes li").all_inner_texts()
        assert len(notes) == 1 and notes[0].startswith("split layout: train, val"), notes
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= viewport["width"], f"the report scrolls sideways at {viewport['width']} px ({width} px)"
        screenshot(page, artifacts, f"scan-splits-{viewport['width']}")
        page.close()


def test_notes_of_a_report_show_in_its_summary(browser: Any, web_service: Service) -> None:
    """The notes every readable format shows (no label check ran although classes were asked for; .npy fields
    left unscanned) were only in a key/value list at the foot of the page, under their keys ('labels.none')."""
    import lmdb

    env = lmdb.open(str(web_service.data_root / "records_lmdb"), map_size=1 << 24)
    kind = np.dtype([("x", "<f4"), ("name", "S4")])
    with env.begin(write=True) as txn:
        for i in range(20):
            value = np.zeros(4, kind)
            value["x"] = i
            out = io.BytesIO()
            np.save(out, value, allow_pickle=False)
            txn.put(f"{i:08d}".encode(), out.getvalue())
    env.close()
    job_id = scanned(web_service, {"path": "records_lmdb", "num_classes": 3, "batch_size": 8})
    page = browser.new_page(viewport=DESKTOP)
    page.goto(f"{web_service.url}/scans/{job_id}")
    notes = page.locator(".summary #notes li").all_inner_texts()
    assert [n.split(":")[0] for n in notes] == [
        "fields of structured .npy values that hold no numbers",
        "--num-classes and --batch-size given, but no class labels were found in the dataset",
    ], notes
    tile = page.locator(".summary .tile-info").inner_text().split()
    assert tile == ["2", "notes"], tile  # the notes listed; it counted info-level findings (none: '0 notes')
    about = page.locator("#info-h + dl").inner_text()
    assert "labels.none" not in about and "lmdb.not_scanned" not in about, about
    assert "lmdb.records" in about
    page.close()


# -- the scan form -----------------------------------------------------------------------------------------


def submit_form(page: Any, fields: dict[str, str]) -> None:
    """Fill the form's fields by their labels (opening "More options" for the ones under it), then close
    "More options" again and press "Start scan", as someone who looked over the form would."""
    more = page.locator("details.more")
    for label, value in fields.items():
        field = page.get_by_label(label, exact=True)
        if not field.is_visible():
            more.locator("summary").click()
        field.click()
        page.keyboard.type(value)  # typed, as a person does (fill() refuses what a number field would not take)
    if more.evaluate("d => d.open"):
        more.locator("summary").click()
    page.get_by_role("button", name="Start scan").click()


def form_sent(browser: Any, svc: Service, fields: dict[str, str], query: str = "") -> Any:
    """A new page of the jobs list (``query``: its filter) whose form was sent with ``fields``."""
    page = browser.new_page(viewport=DESKTOP)
    page.goto(svc.url + "/" + query)
    submit_form(page, fields)
    return page


def jobs_of(svc: Service) -> int:
    with httpx.Client(base_url=svc.url, timeout=30) as client:
        total: int = client.get("/api/v1/scans").json()["total"]
    return total


def test_a_number_field_holding_no_number_stops_the_form(browser: Any, page_service: Service) -> None:
    """'12-' typed as the batch size is no number: the browser gives the field the value '', so the scan was
    started without a batch size, and nothing said so."""
    before = jobs_of(page_service)
    page = form_sent(browser, page_service, {"Dataset path": "clean", "Batch size": "12-"})
    expect(page.locator("#form-error")).to_have_text("Batch size: enter a whole number, or leave it empty.")
    field = page.get_by_label("Batch size", exact=True)
    expect(field).to_be_focused()
    expect(field).to_have_attribute("aria-invalid", "true")
    assert page.inner_text("#form-status") == ""
    page.close()
    assert jobs_of(page_service) == before, "a scan was started without the batch size"


def test_option_errors_read_in_the_words_of_the_form(browser: Any, page_service: Service) -> None:
    """The API's 422 named its fields as the JSON does ('invalid request: num_classes: Input should be ...',
    'Value error, must be an integer'): the page says 'Number of classes: ...' and marks that field."""
    page = form_sent(
        browser, page_service, {"Dataset path": "clean", "Number of classes": "0", "Smallest image side (px)": "2.5"}
    )
    error = page.locator("#form-error")
    expect(error).to_have_text(
        "Number of classes: Input should be greater than or equal to 1; "
        "Smallest image side (px): must be an integer, not float 2.5"
    )
    expect(page.get_by_label("Number of classes", exact=True)).to_be_focused()
    assert page.get_by_label("Smallest image side (px)").get_attribute("aria-invalid") is None  # the first only
    page.close()


def test_a_root_outside_the_data_roots_marks_the_root_field(browser: Any, page_service: Service) -> None:
    """'root '/etc' is outside the data roots' marked and focused the dataset path (the message names the
    data roots), and the field it is about stayed folded under "More options"."""
    page = form_sent(browser, page_service, {"Dataset path": "clean", "Image list root": "/etc"})
    expect(page.locator("#form-error")).to_contain_text("root '/etc' is outside the data roots")
    root = page.get_by_label("Image list root", exact=True)
    expect(root).to_be_visible()
    expect(root).to_be_focused()
    expect(root).to_have_attribute("aria-invalid", "true")
    assert page.get_by_label("Dataset path").get_attribute("aria-invalid") is None
    page.close()


def test_the_same_scan_under_way_is_not_said_to_have_a_report(browser: Any, page_service: Service) -> None:
    """The form sent the same request as a scan still queued (a second tab, a second click): the page said
    'Nothing changed since scan ...: its report still holds', of a scan that had no report yet."""
    import h5py

    name = f"under-way-{time.time_ns()}.h5"
    with h5py.File(page_service.data_root / name, "w") as fh:
        fh["x"] = np.ones((8, 2), dtype=np.float32)
    with httpx.Client(base_url=page_service.url, timeout=30) as client:
        first = client.post("/api/v1/scans", json={"path": name})  # no worker here: it stays queued
        assert first.status_code == 202, first.text
    page = form_sent(browser, page_service, {"Dataset path": name})
    status = page.locator("#form-status")
    expect(status).to_have_text(
        f"The same scan is already under way: scan {first.json()['id'][:8]}, queued. Its progress shows below."
    )
    assert "report" not in status.inner_text()
    page.close()


def test_a_scan_started_from_a_filtered_list_is_not_promised_below(browser: Any, page_service: Service) -> None:
    """Started from the list of failed scans, the page said 'Its progress shows below', where a queued scan
    never shows."""
    import h5py

    name = f"filtered-{time.time_ns()}.h5"
    with h5py.File(page_service.data_root / name, "w") as fh:
        fh["x"] = np.ones((8, 2), dtype=np.float32)
    page = form_sent(browser, page_service, {"Dataset path": name}, "?status=failed")
    status = page.locator("#form-status")
    expect(status).to_contain_text("Started scan")
    job_id = page.get_attribute("#form-status a", "href").rsplit("/", 1)[1]
    expect(status).to_have_text(f"Started scan {job_id[:8]}. Follow it on its page.")
    assert page.locator(f'#jobs tr[data-id="{job_id}"]').count() == 0
    page.goto(page_service.url + "/")  # the whole list: there it is
    submit_form(page, {"Dataset path": name, "Scan again even if nothing changed": ""})
    expect(status).to_contain_text("Its progress shows below.")
    page.close()


# -- one scan while it runs --------------------------------------------------------------------------------


def test_a_scan_page_says_when_its_progress_stops_coming(browser: Any, page_service: Service) -> None:
    """With the service not answering (Redis down: 503; the network gone) the page went on saying 'Running',
    'about 1 min left', for ever; a scan the service no longer knows (404) did too."""
    job_id = seed_job(page_service, "defects", "running", items_total=1000, items_done=100, shards_total=2)
    page = browser.new_page(viewport=DESKTOP)
    page.goto(f"{page_service.url}/scans/{job_id}")
    stale = page.locator("#scan-stale")
    expect(page.locator("#scan-progress-text")).to_contain_text("100 of 1,000 items")
    assert not stale.is_visible()

    api = f"**/api/v1/scans/{job_id}"
    down = '{"detail": "the job store is unavailable"}'
    page.route(api, lambda route: route.fulfill(status=503, body=down, content_type="application/json"))
    expect(stale).to_contain_text("The service cannot tell how the scan goes (the job store is unavailable)")
    expect(stale).to_contain_text("the progress above is from")
    page.unroute(api)
    expect(stale).to_be_hidden(timeout=5_000)
    page.route(api, lambda route: route.abort())
    expect(stale).to_contain_text("The service does not answer")
    page.unroute(api)
    expect(stale).to_be_hidden(timeout=5_000)

    redis = page_service.store_client()
    redis.delete(page_service.key("job", job_id))  # past its retention
    expect(page.locator("h1")).to_have_text("No such scan", timeout=10_000)
    page.close()
