// dscan status page: live progress (polling the JSON API), the scan form, cancelling.
// Plain JavaScript, no dependencies. The pages are complete without it; this only keeps them current.
// Everything shown is set with textContent (never innerHTML): paths and messages come from users and data.
(() => {
  "use strict";

  const NO_VALUE = "—";
  const FAST_MS = 1000;
  const SLOW_MS = 10000;
  const WORKERS_MS = 20000; // how often a running scan's page asks whether any worker answers
  const $ = (selector, root = document) => root.querySelector(selector);

  // -- numbers in words (as api/pages/views.py writes them) ------------------------------------------

  function humanBytes(n) {
    if (n == null) return NO_VALUE;
    let value = Number(n);
    for (const unit of ["B", "KB", "MB", "GB", "TB"]) {
      if (Math.abs(value) < 1024 || unit === "TB") {
        return unit === "B" ? `${Math.round(value)} B` : `${value.toFixed(1)} ${unit}`;
      }
      value /= 1024;
    }
    return NO_VALUE;
  }

  const humanCount = (n) => (n == null ? NO_VALUE : Number(n).toLocaleString("en-US"));
  const humanPercent = (f) => (f == null ? NO_VALUE : `${Math.round(f * 100)}%`);

  function humanDuration(s) {
    if (s == null || !Number.isFinite(s)) return NO_VALUE;
    s = Math.max(0, s);
    if (s < 9.95) return `${s.toFixed(1)} s`;
    if (s < 59.5) return `${Math.round(s)} s`;
    const t = Math.round(s);
    if (t < 3600) return `${Math.floor(t / 60)} min ${String(t % 60).padStart(2, "0")} s`;
    return `${Math.floor(t / 3600)} h ${String(Math.floor((t % 3600) / 60)).padStart(2, "0")} min`;
  }

  const when = (iso) => (iso ? `${iso.slice(0, 19).replace("T", " ")} UTC` : NO_VALUE);
  const active = (job) => job.status === "queued" || job.status === "running";

  function rates(job) {
    const elapsed = job.duration_s;
    const p = job.progress;
    if (!elapsed || elapsed < 0.05 || (!p.bytes_done && !p.items_done)) return [NO_VALUE, ""];
    const items = p.items_done ? `${humanCount(Math.round(p.items_done / elapsed))} items/s` : "";
    return [`${humanBytes(p.bytes_done / elapsed)}/s`, items];
  }

  function displayPath(path, roots) {
    for (const root of roots) {
      const prefix = root.replace(/\/+$/, "") + "/";
      if (path.startsWith(prefix) && path.length > prefix.length) return path.slice(prefix.length);
    }
    return path;
  }

  // What the pages say while no worker answers (api/pages/views.py says the same on pages served without
  // JavaScript): a scan under way then waits, and a time left from its past rate would be a false promise.
  const NO_WORKER_ETA = "none while no worker runs";
  const NO_WORKER =
    "No worker answers: the scan waits until one starts (`celery -A workers.app worker`, or `dscan serve`).";

  // Text with its `code` spans shown as code, as the server renders the same messages (views.code_spans);
  // set as text nodes, never as HTML (the messages quote paths and names from the user or the data).
  function withCode(el, text) {
    const parts = String(text).split("`");
    if (parts.length % 2 === 0) {
      el.textContent = text; // an unpaired backtick: no spans at all
      return;
    }
    el.replaceChildren(
      ...parts.map((part, i) => {
        if (i % 2 === 0) return document.createTextNode(part);
        const code = document.createElement("code");
        code.textContent = part;
        return code;
      }),
    );
  }

  // Whether a worker answers the service's ping (its readiness check); null when the service does not answer.
  async function workersAnswer() {
    try {
      const r = await fetch("/readyz", { headers: { Accept: "application/json" } });
      const body = await r.json();
      return !(body.redis === "ok" && body.workers_answering === false);
    } catch (err) {
      return null;
    }
  }

  function eta(job) {
    if (job.status !== "running" || !job.duration_s) return NO_VALUE;
    const f = job.progress.fraction;
    if (f <= 0) return NO_VALUE;
    if (f >= 1) return "finishing";
    return `about ${humanDuration((job.duration_s * (1 - f)) / f)}`;
  }

  const WAITING = { queued: "waiting for a worker", running: "planning the shards" };

  function itemsText(p, status) {
    if (status === "queued" || (!p.shards_total && !p.items_done)) return WAITING[status] || "0 items";
    return p.items_total
      ? `${humanCount(p.items_done)} of ${humanCount(p.items_total)} items`
      : `${humanCount(p.items_done)} items`;
  }

  const bytesText = (p) =>
    p.bytes_total ? `${humanBytes(p.bytes_done)} of ${humanBytes(p.bytes_total)}` : humanBytes(p.bytes_done);

  function verdict(job) {
    if (!job.summary) return "";
    return job.summary.passed ? "passed" : "failed";
  }

  function outcome(job) {
    const s = job.summary;
    if (job.status === "succeeded" && s) {
      const e = `${humanCount(s.errors)} error${s.errors === 1 ? "" : "s"}`;
      const w = `${humanCount(s.warnings)} warning${s.warnings === 1 ? "" : "s"}`;
      return `succeeded; the dataset ${s.passed ? "passed" : "failed"} with ${e} and ${w}`;
    }
    if (job.status === "failed") return `failed: ${job.error || "no reason recorded"}`;
    return job.status;
  }

  // -- talking to the API (the session cookie goes along; no token in the page) ---------------------

  function toLogin() {
    const here = location.pathname + location.search;
    location.assign(`/login?next=${encodeURIComponent(here)}`);
  }

  async function api(url, options = {}) {
    const headers = { Accept: "application/json" };
    if (options.body) headers["Content-Type"] = "application/json";
    const response = await fetch(url, { credentials: "same-origin", cache: "no-store", headers, ...options });
    let body = null;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    if (response.status === 401) {
      toLogin();
      throw new Error("signed out");
    }
    return { ok: response.ok, status: response.status, body };
  }

  const detailOf = (r) => (r.body && typeof r.body.detail === "string" ? r.body.detail : `HTTP ${r.status}`);

  function enableScripts() {
    for (const el of document.querySelectorAll("[data-needs-js]")) el.disabled = false;
  }

  // -- the jobs list ---------------------------------------------------------------------------------

  function fillRow(tr, job, roots) {
    const short = job.id.slice(0, 8);
    tr.dataset.id = job.id;
    tr.dataset.status = job.status;
    const link = $(".job-link", tr);
    link.href = `/scans/${job.id}`;
    link.textContent = short;
    const created = $(".created", tr);
    created.dateTime = job.created;
    created.textContent = when(job.created);
    const dataset = $(".dataset", tr);
    dataset.textContent = displayPath(job.path, roots);
    dataset.title = job.path;
    const status = $(".status", tr);
    status.className = `badge status status-${job.status}`;
    status.textContent = job.status;
    const v = verdict(job);
    const badge = $(".verdict", tr);
    badge.className = `badge verdict verdict-${v}`;
    badge.textContent = v ? `dataset ${v}` : "";
    badge.hidden = !v;
    const error = $(".job-error", tr);
    error.textContent = job.error || "";
    error.hidden = !job.error;
    const bar = $("progress", tr);
    bar.value = job.progress.fraction;
    bar.textContent = humanPercent(job.progress.fraction);
    bar.setAttribute("aria-label", `Progress of scan ${short}`);
    $(".pct", tr).textContent = humanPercent(job.progress.fraction);
    $(".items", tr).textContent = itemsText(job.progress, job.status);
    $(".bytes", tr).textContent = bytesText(job.progress);
    const [perSecond, itemsPerSecond] = rates(job);
    $(".rate", tr).textContent = perSecond;
    $(".rate-items", tr).textContent = itemsPerSecond;
    $(".eta", tr).textContent = eta(job);
    $(".duration", tr).textContent = humanDuration(job.duration_s);
    const errors = $(".errors", tr);
    errors.textContent = job.summary ? humanCount(job.summary.errors) : NO_VALUE;
    errors.classList.toggle("bad", Boolean(job.summary && job.summary.errors));
    $(".warnings", tr).textContent = job.summary ? humanCount(job.summary.warnings) : NO_VALUE;
  }

  function initJobs(table) {
    const tbody = table.tBodies[0];
    const template = $("#job-row");
    const live = $("#live");
    const roots = JSON.parse(table.dataset.roots || "[]");
    let timer = null;
    let running = false;
    const workersNotice = $("#jobs-workers");
    let noWorker = !workersNotice.hidden; // (as the page was served)

    function schedule(ms) {
      clearTimeout(timer);
      timer = setTimeout(refresh, ms);
    }

    function render(body) {
      const messages = [];
      const rows = [];
      for (const job of body.items) {
        let tr = tbody.querySelector(`tr[data-id="${CSS.escape(job.id)}"]`);
        const before = tr ? tr.dataset.status : null;
        if (!tr) {
          tr = template.content.firstElementChild.cloneNode(true);
          if (active(job)) messages.push(`Scan ${job.id.slice(0, 8)} is ${job.status}.`);
        } else if (before !== job.status) {
          messages.push(`Scan ${job.id.slice(0, 8)} ${outcome(job)}.`);
        }
        fillRow(tr, job, roots);
        if (noWorker && job.status === "running") $(".eta", tr).textContent = NO_WORKER_ETA;
        rows.push(tr);
      }
      rows.forEach((tr, i) => {
        if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
      });
      while (tbody.children.length > rows.length) tbody.lastElementChild.remove();
      $("#jobs-total").textContent = humanCount(body.total);
      $("#jobs-empty").hidden = rows.length > 0;
      table.closest(".table-wrap").hidden = rows.length === 0;
      const nowRunning = body.items.some(active);
      if (running && !nowRunning) messages.push("Every scan on this page has ended.");
      running = nowRunning;
      if (messages.length) live.textContent = messages.join(" ");
      return nowRunning;
    }

    async function refresh() {
      if (document.hidden) return; // resumed by visibilitychange
      const params = new URLSearchParams({ limit: table.dataset.limit, offset: table.dataset.offset });
      if (table.dataset.status) params.set("status", table.dataset.status);
      try {
        const r = await api(`${table.dataset.api}?${params}`);
        if (!r.ok) {
          live.textContent = `The list cannot be refreshed: ${detailOf(r)}. Trying again.`;
          schedule(5000);
          return;
        }
        schedule(render(r.body) ? FAST_MS : SLOW_MS);
      } catch (err) {
        if (err.message !== "signed out") {
          live.textContent = "The service does not answer. Trying again.";
          schedule(5000);
        }
      }
    }

    // While scans on the page are under way, ask every WORKERS_MS whether any worker answers, as a scan's
    // page does: with none, the running scans wait and show no time left.
    async function checkWorkers() {
      const answer = running && !document.hidden ? await workersAnswer() : true;
      if (answer !== null) {
        noWorker = !answer;
        withCode(workersNotice, noWorker ? NO_WORKER : "");
        workersNotice.hidden = !noWorker;
        for (const tr of tbody.rows) {
          if (noWorker && tr.dataset.status === "running") $(".eta", tr).textContent = NO_WORKER_ETA;
        }
      }
      setTimeout(checkWorkers, WORKERS_MS);
    }

    running = Array.from(tbody.rows).some((tr) => active({ status: tr.dataset.status }));
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden) refresh();
    });
    schedule(running ? FAST_MS : SLOW_MS);
    setTimeout(checkWorkers, WORKERS_MS);
    return { refresh };
  }

  // -- the scan form -----------------------------------------------------------------------------------

  function initForm(form, jobs) {
    const path = $("#f-path", form);
    const error = $("#form-error", form);
    const status = $("#form-status", form);
    const submit = $('button[type="submit"]', form);

    function showError(message, field) {
      withCode(error, message);
      error.hidden = false;
      if (field) {
        field.setAttribute("aria-invalid", "true");
        field.setAttribute("aria-errormessage", "form-error");
        const folded = field.closest("details");
        if (folded) folded.open = true; // a field under "More options" can only take the focus when shown
        field.focus();
      }
      // the message sits under the form: on a phone the focused field leaves it below the screen
      error.scrollIntoView({ block: "nearest" });
    }

    // The label a person reads for a field ("Batch size"), where the API names it ("batch_size").
    const labelOf = (el) => (el.labels && el.labels[0] ? el.labels[0].textContent.trim() : el.name);
    const fieldNamed = (name) => [...form.elements].find((el) => el.name === name) || null;

    // A number field holding what is no number ("12-", "1e") has the value "" in the browser: it would be
    // left out of the request silently, and the scan started without it.
    const badNumber = () => [...form.elements].find((el) => el.type === "number" && el.validity.badInput) || null;

    // A 422 that lists its problems per field: each in the words of the form, the first field marked.
    function fieldErrors(body) {
      const errors = body && Array.isArray(body.errors) ? body.errors : [];
      const named = errors
        .map((e) => ({ field: Array.isArray(e.loc) ? fieldNamed(String(e.loc[e.loc.length - 1])) : null, e }))
        .filter((x) => x.field);
      if (!named.length) return null;
      const lines = named.map(({ field, e }) => `${labelOf(field)}: ${String(e.msg).replace(/^Value error, /, "")}`);
      return { message: lines.join("; "), field: named[0].field };
    }

    function clearError() {
      error.hidden = true;
      error.textContent = "";
      for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
    }

    // Whether a scan of this status shows in the list below: not in a list filtered by another status
    // (the failed scans), where "its progress shows below" sent people looking for a row that never came.
    // Whether a new scan shows in the list below: the newest scans' page (not "Older" pages), of its status.
    function listed(jobStatus) {
      const table = $("#jobs");
      const first = !table || !Number(table.dataset.offset || 0);
      return Boolean(jobs && table && first && (!table.dataset.status || table.dataset.status === jobStatus));
    }

    function say(prefix, id, suffix) {
      status.replaceChildren();
      const link = document.createElement("a");
      link.href = `/scans/${id}`;
      link.textContent = `scan ${id.slice(0, 8)}`;
      status.append(prefix, link, suffix);
    }

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearError();
      const body = {};
      for (const el of form.elements) {
        if (!el.name) continue;
        if (el.type === "checkbox") {
          if (el.checked) body[el.name] = true;
          continue;
        }
        const value = el.value.trim();
        if (value === "") continue;
        body[el.name] = el.type === "number" ? Number(value) : value;
      }
      const bad = badNumber();
      if (bad) {
        showError(`${labelOf(bad)}: enter a whole number, or leave it empty.`, bad);
        return;
      }
      if (!body.path) {
        showError("Enter the path of a dataset under the data roots.", path);
        return;
      }
      submit.disabled = true;
      status.textContent = "Submitting…";
      try {
        const r = await api(form.dataset.api, { method: "POST", body: JSON.stringify(body) });
        if (r.ok) {
          const where = listed(r.body.status) ? "Its progress shows below." : "Follow it on its page.";
          if (r.body.deduplicated && active(r.body)) {
            // the same request on unchanged data is on its way: there is no report yet to point to
            say("The same scan is already under way: ", r.body.id, `, ${r.body.status}. ${where}`);
          } else if (r.body.deduplicated) {
            say("Nothing changed since ", r.body.id, ": its report still holds (tick “Scan again” to rescan).");
          } else {
            say("Started ", r.body.id, `. ${where}`);
          }
          if (jobs) jobs.refresh();
        } else {
          status.textContent = "";
          const perField = fieldErrors(r.body);
          const message = detailOf(r);
          if (perField) showError(perField.message, perField.field);
          else showError(message, fieldOf(message));
        }
      } catch (err) {
        status.textContent = "";
        if (err.message !== "signed out") showError("The service does not answer. Try again in a moment.");
      } finally {
        submit.disabled = false;
        // the button held the focus and was disabled meanwhile: give it back rather than leave it on the page
        if (!form.contains(document.activeElement)) submit.focus();
      }
    });

    function fieldOf(message) {
      // the field an error names: the one it starts with ("root '/etc' is outside the data roots", which also
      // names the roots), an option by its name ("batch_size: ..."), the path, or the list that holds an
      // unknown check code
      const first = /^(\w+) '/.exec(message);
      if (first && fieldNamed(first[1])) return fieldNamed(first[1]);
      if (/\bpath\b|data roots|does not exist|not a dataset dscan can read|cannot be read/.test(message)) return path;
      if (/leave no check/.test(message)) {
        // the checks the selection leaves: the list of chosen checks, else the ignored ones
        const select = fieldNamed("select");
        return select && select.value.trim() ? select : fieldNamed("ignore");
      }
      const named = [...form.elements].find((el) => el.name && el.name !== "path" && message.includes(`${el.name}:`));
      if (named) return named;
      const code = /unknown check '([^']+)'/.exec(message);
      if (code) return [...form.elements].find((el) => el.name && el.value && el.value.includes(code[1])) || null;
      return null;
    }
    for (const el of form.elements) {
      if (el.name) el.addEventListener("input", () => el.removeAttribute("aria-invalid"));
    }
  }

  // -- one scan while it runs --------------------------------------------------------------------------

  function initScan(section) {
    const url = section.dataset.api;
    const announce = $("#scan-announce");
    let lastDecile = -1;
    let noWorker = false;

    function update(job) {
      const p = job.progress;
      $("#scan-progress").value = p.fraction;
      $("#scan-pct").textContent = humanPercent(p.fraction);
      $("#scan-progress-text").textContent = `${job.status[0].toUpperCase()}${job.status.slice(1)}: ${itemsText(p, job.status)}, ${bytesText(p)}.`;
      const [perSecond, itemsPerSecond] = rates(job);
      $("#scan-rate").textContent = perSecond;
      $("#scan-rate-items").textContent = itemsPerSecond;
      $("#scan-eta").textContent = noWorker ? NO_WORKER_ETA : eta(job);
      $("#scan-duration").textContent = humanDuration(job.duration_s);
      $("#scan-shards").textContent = `${humanCount(p.shards_done)} of ${humanCount(p.shards_total)}`;
      const status = $("#scan-status");
      status.className = `badge status status-${job.status}`;
      status.textContent = job.status;
      const decile = Math.floor(p.fraction * 10);
      if (decile !== lastDecile) {
        lastDecile = decile;
        announce.textContent = `${humanPercent(p.fraction)} done.`;
      }
    }

    const stale = $("#scan-stale");
    let shownAt = new Date();

    // With no worker running, a scan waits for ever, its time left growing: say so (the service's readiness
    // check pings the workers), and again every WORKERS_MS while the page shows the scan.
    const workers = $("#scan-workers");
    async function checkWorkers() {
      const answer = await workersAnswer(); // (null: the service does not answer; the notice above says so)
      if (answer !== null) {
        noWorker = !answer;
        withCode(workers, noWorker ? NO_WORKER : "");
        workers.hidden = !noWorker;
        if (noWorker) $("#scan-eta").textContent = NO_WORKER_ETA;
      }
      setTimeout(checkWorkers, WORKERS_MS);
    }
    checkWorkers();

    // The numbers on the page stop moving when the service stops answering: say so, and since when, rather
    // than go on showing a scan running with minutes left (it kept "Running, about 1 min left" for ever).
    function unanswered(reason) {
      const since = shownAt.toTimeString().slice(0, 8);
      const text = `${reason}: the progress above is from ${since}. Trying again.`;
      if (stale.textContent !== text) stale.textContent = text; // (said once, not at every try)
      stale.hidden = false;
    }

    async function poll() {
      try {
        const r = await api(url);
        if (r.ok) {
          shownAt = new Date();
          stale.hidden = true;
          update(r.body);
          if (!active(r.body)) {
            announce.textContent = `The scan ${outcome(r.body)}. Loading the report.`;
            setTimeout(() => location.reload(), 400);
            return;
          }
        } else if (r.status === 404) {
          // the service no longer knows the scan (past its retention, or its store was emptied): the page
          // itself says so
          location.reload();
          return;
        } else {
          unanswered(`The service cannot tell how the scan goes (${detailOf(r)})`);
        }
      } catch (err) {
        if (err.message === "signed out") return;
        unanswered("The service does not answer");
      }
      setTimeout(poll, document.hidden ? SLOW_MS : FAST_MS);
    }

    const cancel = $("#cancel");
    const cancelStatus = $("#cancel-status");
    cancel.addEventListener("click", async () => {
      if (!window.confirm("Cancel this scan? It stops between blocks and gives no report.")) return;
      cancel.disabled = true;
      cancelStatus.textContent = "Cancelling…";
      try {
        const r = await api(cancel.dataset.api, { method: "DELETE" });
        cancelStatus.textContent = r.ok ? "Cancelled." : detailOf(r);
        if (r.ok || r.status === 409) setTimeout(() => location.reload(), 400);
        else cancel.disabled = false;
      } catch (err) {
        if (err.message !== "signed out") {
          cancelStatus.textContent = "The service does not answer. Try again.";
          cancel.disabled = false;
        }
      }
    });
    setTimeout(poll, FAST_MS);
  }

  document.addEventListener("DOMContentLoaded", () => {
    enableScripts();
    const table = $("#jobs");
    const jobs = table ? initJobs(table) : null;
    const form = $("#scan-form");
    if (form) initForm(form, jobs);
    const live = $("#scan-live");
    if (live) initScan(live);
  });

  window.dscan = { humanBytes, humanCount, humanDuration, humanPercent, rates, eta, displayPath };
})();
