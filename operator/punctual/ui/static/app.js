// punctual ui: the page's one script. No framework, no build step, nothing from the network
// but this server's /api. The server aggregates (a row of counts per schedule, a strip of
// firings per minute); this script only draws, and draws only the rows in view.
"use strict";

const ROW = 22; // px, as --row in style.css
const params = new URLSearchParams(location.search);
if (params.get("token")) sessionStorage.setItem("punctual-token", params.get("token"));
const TOKEN = sessionStorage.getItem("punctual-token") || "";
const $ = (id) => document.getElementById(id);
window.punctual = { firstPaint: null, loads: 0 };

async function api(path, body) {
  const options = { headers: { "X-Punctual-Token": TOKEN } };
  if (body !== undefined) {
    options.method = "POST";
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  const data = await response.json().catch(() => ({ error: response.statusText }));
  return { status: response.status, data };
}

function text(tag, value, cls) {
  const node = document.createElement(tag);
  node.textContent = value == null ? "" : String(value);
  if (cls) node.className = cls;
  return node;
}

// -- the fleet --------------------------------------------------------------------------------

let fleet = null;
let pollTimer = null;
const pool = [];

function query() {
  const q = new URLSearchParams();
  q.set("span", $("span").value);
  for (const key of ["namespace", "label", "state", "text"]) {
    const value = $(key).value.trim();
    if (value) q.set(key === "text" ? "q" : key, value);
  }
  return q.toString();
}

async function loadFleet() {
  clearTimeout(pollTimer);
  const { status, data } = await api("/api/fleet?" + query());
  if (status !== 200) {
    $("live").textContent = data.error || "cannot list";
  } else {
    fleet = data;
    window.punctual.loads += 1;
    drawFleet();
    $("live").textContent = `${data.problem ? "listing failed: " + data.problem + "; " : ""}` +
      `listed ${data.listed ? data.listed.slice(11, 19) : "-"} UTC, polling every ${data.poll}s`;
  }
  if (!$("fleet-page").hidden) pollTimer = setTimeout(loadFleet, ((fleet && fleet.poll) || 5) * 1000);
}

function drawFleet() {
  $("scope").textContent = fleet.scope;
  $("counts").textContent = `${fleet.rows.length} shown of ${fleet.total}`;
  const select = $("namespace");
  const chosen = select.value;
  if (select.options.length !== fleet.namespaces.length + 1) {
    select.replaceChildren(text("option", "all"));
    select.options[0].value = "";
    for (const ns of fleet.namespaces) select.append(text("option", ns));
    select.value = chosen;
  }
  drawStrip();
  $("rows-space").style.height = fleet.rows.length * ROW + "px";
  drawRows();
  if (window.punctual.firstPaint === null) {
    requestAnimationFrame(() => {
      window.punctual.firstPaint = performance.now(); // ms since the navigation started
      document.body.dataset.painted = "1";
    });
  }
}

function drawStrip() {
  const canvas = $("strip");
  const width = canvas.clientWidth, height = canvas.clientHeight;
  canvas.width = width * devicePixelRatio;
  canvas.height = height * devicePixelRatio;
  const g = canvas.getContext("2d");
  g.scale(devicePixelRatio, devicePixelRatio);
  const strip = fleet.strip;
  // Each pixel column shows the busiest minute under it: a herd stays a spike when zoomed out.
  const perPixel = strip.length / width;
  const columns = [];
  for (let x = 0; x < width; x++) {
    let most = 0;
    for (let m = Math.floor(x * perPixel); m < Math.max(Math.floor((x + 1) * perPixel), Math.floor(x * perPixel) + 1) && m < strip.length; m++) {
      most = Math.max(most, strip[m]);
    }
    columns.push(most);
  }
  shadeFreezes(g, fleet.freezes.map((_, i) => i), width, height);
  const peak = Math.max(1, ...strip);
  $("peak").textContent = `(busiest minute: ${Math.max(0, ...strip)})` +
    (fleet.freezes.length ? `; shaded: ${fleet.freezes.map((f) => `${f.title} (${f.action})`).join(", ")}` : "");
  g.fillStyle = "#3b6fd1";
  columns.forEach((count, x) => {
    if (!count) return;
    const h = Math.max(2, (count / peak) * (height - 4));
    g.fillRect(x, height - h, Math.max(1, 1 / perPixel), h);
  });
  const axis = $("axis");
  axis.replaceChildren();
  const start = Date.parse(fleet.start);
  for (let i = 0; i <= 6; i++) {
    const at = new Date(start + (fleet.span * 1000 * i) / 6);
    const label = fleet.span > 86400 ? at.toISOString().slice(5, 16).replace("T", " ") : at.toISOString().slice(11, 16);
    const mark = text("span", label);
    mark.style.left = (i / 6) * 100 + "%";
    axis.append(mark);
  }
}

// Freeze windows, shaded where they hold: the spans are seconds after the start.
function shadeFreezes(g, indices, width, height) {
  for (const index of indices) {
    const freeze = fleet.freezes[index];
    g.fillStyle = freeze.action === "Defer" ? "rgba(120, 90, 200, 0.18)" : "rgba(230, 120, 30, 0.2)";
    for (const [from, to] of freeze.spans) {
      const x = (from / fleet.span) * width;
      g.fillRect(x, 0, Math.max(1, ((to - from) / fleet.span) * width), height);
    }
  }
}

function rowElement() {
  const row = document.createElement("div");
  row.className = "row";
  row.innerHTML = '<a class="name"></a><span class="state"><span class="badge"></span></span>' +
    '<span class="expr"></span><span class="lane"><canvas></canvas></span>';
  $("rows").append(row);
  return row;
}

function drawRows() {
  if (!fleet) return;
  const box = $("rows");
  const first = Math.max(0, Math.floor(box.scrollTop / ROW) - 5);
  const last = Math.min(fleet.rows.length, first + Math.ceil(box.clientHeight / ROW) + 10);
  while (pool.length < last - first) pool.push(rowElement());
  pool.forEach((node, i) => {
    const index = first + i;
    if (index >= last) { node.hidden = true; return; }
    node.hidden = false;
    const row = fleet.rows[index];
    node.style.top = index * ROW + "px";
    node.className = "row " + row.state;
    node.dataset.namespace = row.namespace;
    node.dataset.name = row.name;
    node.dataset.first = row.first || "";
    node.dataset.ticks = row.ticks;
    const link = node.querySelector(".name");
    link.textContent = `${row.namespace}/${row.name}`;
    link.href = `#/s/${encodeURIComponent(row.namespace)}/${encodeURIComponent(row.name)}`;
    const badge = node.querySelector(".badge");
    badge.textContent = row.state;
    badge.className = "badge " + row.state;
    node.querySelector(".expr").textContent = row.schedule;
    node.dataset.frozen = row.frozen.map((i) => fleet.freezes[i].title).join(", ");
    node.title = row.problem || `${row.ticks} ticks in the span; next ${row.first || "none"} (${row.timeZone})` +
      (row.frozen.length ? `; held by ${node.dataset.frozen}` : "");
    drawLane(node.querySelector("canvas"), row);
  });
}

function drawLane(canvas, row) {
  const width = canvas.clientWidth, height = 16;
  if (canvas.width !== width * devicePixelRatio) {
    canvas.width = width * devicePixelRatio;
    canvas.height = height * devicePixelRatio;
  }
  const g = canvas.getContext("2d");
  g.setTransform(devicePixelRatio, 0, 0, devicePixelRatio, 0, 0);
  g.clearRect(0, 0, width, height);
  shadeFreezes(g, row.frozen, width, height);
  const quiet = row.state !== "Active";
  g.fillStyle = quiet ? "#a3a9b6" : "#3b6fd1";
  const step = width / fleet.columns;
  for (let i = 0; i < row.row.length; i++) {
    const count = parseInt(row.row[i], 36);
    if (!count) continue;
    const h = Math.min(height, 5 + 3 * Math.log2(count));
    g.fillRect(i * step, height - h, Math.max(1.5, step - 0.5), h);
  }
  g.fillStyle = "#c0392b"; // ticks its Calendars take away: a thin mark at the top
  for (let i = 0; i < row.excluded.length; i++) {
    if (row.excluded[i] !== "0") g.fillRect(i * step, 0, Math.max(1.5, step - 0.5), 3);
  }
}

// -- one schedule -----------------------------------------------------------------------------

let current = null;

function table(id, headers, rows) {
  const node = $(id);
  node.replaceChildren();
  const head = document.createElement("tr");
  headers.forEach((h) => head.append(text("th", h)));
  node.append(head);
  if (!rows.length) {
    const empty = document.createElement("tr");
    const cell = text("td", "none");
    cell.colSpan = headers.length;
    empty.append(cell);
    node.append(empty);
  }
  for (const cells of rows) {
    const tr = document.createElement("tr");
    cells.forEach((c) => tr.append(c instanceof Node ? wrap(c) : text("td", c)));
    node.append(tr);
  }
}

function wrap(node) {
  const td = document.createElement("td");
  td.append(node);
  return td;
}

async function loadSchedule(namespace, name) {
  const { status, data } = await api(`/api/schedules/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`);
  $("s-title").textContent = `${namespace}/${name}`;
  if (status !== 200) {
    $("s-state").textContent = "";
    $("s-spec").textContent = data.error;
    return;
  }
  current = data;
  $("s-state").textContent = data.state;
  $("s-state").className = "badge " + data.state;
  const spec = data.spec;
  $("s-spec").textContent = `${spec.schedule || spec.runAt || JSON.stringify(spec.schedules || "")} in ${spec.timeZone || "UTC"}` +
    (spec.suspend ? " (spec.suspend: true)" : "");
  const zone = spec.timeZone || "UTC";
  $("s-upcoming").replaceChildren(...(data.upcoming.length
    ? data.upcoming.map((t, i) => text("li", zone === "UTC" ? t : `${t} (${data.upcomingLocal[i]} ${zone})`))
    : [text("li", data.problem || "no more ticks")]));
  table("s-firings", ["tick", "outcome", "reason", "job", "attempt", "triggered by", "why"],
    data.firings.map((f) => [f.tick, f.outcome + (f.dead ? " (dead)" : ""), f.reason || "", f.job || "",
      f.attempt || (f.manual ? "manual" : ""), f.triggeredBy || "", f.triggerReason || ""]));
  table("s-jobs", ["name", "state", "created", "logs"],
    data.jobs.map((j) => [j.name, j.state, j.created || "", text("code", j.logs)]));
  if (data.jobsProblem) table("s-jobs", ["cannot list the Jobs"], [[data.jobsProblem]]);
  table("s-conditions", ["type", "status", "reason", "message", "since"],
    data.conditions.map((c) => [c.type, c.status, c.reason || "", c.message || "", c.lastTransitionTime || ""]));
  table("s-events", ["at", "type", "reason", "message"],
    data.events.map((e) => [e.at || "", e.type || "", e.reason || "", e.message || ""]));
  if (data.eventsProblem) table("s-events", ["cannot list the Events"], [[data.eventsProblem]]);
  $("s-describe").textContent = data.describe;
  if (window.punctual.schedulePainted === undefined) window.punctual.schedulePainted = performance.now();
  document.body.dataset.schedule = `${namespace}/${name}`;
}

// An action: the dialog shows what will run; nothing is sent before Confirm.
function confirmAction(title, fields, command, preview) {
  $("confirm-title").textContent = title;
  const box = $("confirm-fields");
  box.replaceChildren();
  const inputs = {};
  for (const [key, label, value] of fields) {
    const l = text("label", label + " ");
    const input = document.createElement("input");
    input.id = "field-" + key;
    input.value = value || "";
    input.size = 28;
    l.append(input);
    box.append(l);
    inputs[key] = input;
  }
  const values = () => Object.fromEntries(Object.entries(inputs).map(([k, i]) => [k, i.value.trim()]));
  // With a preview (a backfill's dry run), Confirm waits until the preview of the values
  // as they are now has been shown.
  const yes = $("confirm-yes");
  const show = () => {
    $("confirm-command").textContent = command(values());
    yes.disabled = Boolean(preview);
    const shown = $("confirm-preview").querySelector("pre");
    if (shown) shown.remove();
  };
  Object.values(inputs).forEach((i) => i.addEventListener("input", show));
  $("confirm-preview").replaceChildren();
  show();
  if (preview) {
    const button = text("button", "Preview (dry run)");
    button.type = "button";
    button.id = "confirm-dry-run";
    button.onclick = async () => {
      const answer = await preview(values());
      $("confirm-preview").querySelector("pre")?.remove();
      $("confirm-preview").append(text("pre", answer));
      yes.disabled = false;
    };
    $("confirm-preview").append(button);
  }
  const dialog = $("confirm");
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok" ? values() : null), { once: true });
  });
}

function show(result) {
  const node = $("result");
  node.className = result.data.ok ? "ok" : "refused";
  node.textContent = result.data.ok ? result.data.output : `Refused: ${result.data.error}`;
  node.dataset.status = result.status;
}

async function act(action, body) {
  const path = `/api/schedules/${encodeURIComponent(current.namespace)}/${encodeURIComponent(current.name)}/${action}`;
  const result = await api(path, body);
  show(result);
  await loadSchedule(current.namespace, current.name);
  show(result);
  return result;
}

const split = (s) => s.split(/[\s,]+/).filter(Boolean);
const where = () => `-n ${current.namespace}`;

$("a-trigger").onclick = async () => {
  const got = await confirmAction(`Trigger ${current.name} now?`,
    [["reason", "reason", "from punctual ui"], ["overlap", "overlap (Allow, Forbid, Replace; empty: the schedule's)", ""], ["env", "env KEY=VALUE, comma separated", ""]],
    (v) => `punctual trigger ${current.name} ${where()}` + (v.reason ? ` --reason '${v.reason}'` : "") +
      (v.overlap ? ` --overlap ${v.overlap}` : "") + split(v.env).map((e) => ` --env ${e}`).join(""));
  if (got) await act("trigger", { reason: got.reason, overlap: got.overlap, env: split(got.env) });
};
$("a-suspend").onclick = async () => {
  const got = await confirmAction(`Suspend ${current.name}?`, [],
    () => `kubectl patch cronschedule ${current.name} ${where()} --type merge -p '{"spec":{"suspend":true}}'`);
  if (got) await act("suspend", {});
};
$("a-unsuspend").onclick = async () => {
  const got = await confirmAction(`Unsuspend ${current.name}?`, [],
    () => `kubectl patch cronschedule ${current.name} ${where()} --type merge -p '{"spec":{"suspend":false}}'`);
  if (got) await act("unsuspend", {});
};
$("a-resume").onclick = async () => {
  const got = await confirmAction(`Resume ${current.name} after pauseOnFailure?`, [],
    () => `punctual resume ${current.name} ${where()}`);
  if (got) await act("resume", {});
};
$("a-backfill").onclick = async () => {
  const backfill = (v) => ({ from: v.from, to: v.to, overlap: v.overlap || "Allow" });
  const got = await confirmAction(`Backfill ${current.name}?`,
    [["from", "from (RFC 3339, inclusive)", ""], ["to", "to (RFC 3339, exclusive)", ""], ["overlap", "overlap (Allow or Forbid)", "Allow"]],
    (v) => `punctual backfill ${current.name} ${where()} --from ${v.from} --to ${v.to} --overlap ${v.overlap || "Allow"}`,
    async (v) => {
      const path = `/api/schedules/${encodeURIComponent(current.namespace)}/${encodeURIComponent(current.name)}/backfill`;
      const r = await api(path, { ...backfill(v), dryRun: true });
      return r.data.ok ? r.data.output : `Refused: ${r.data.error}`;
    });
  if (got) await act("backfill", backfill(got));
};
$("a-cancel").onclick = async () => {
  const got = await confirmAction(`Cancel ${current.name}'s backfill?`, [],
    () => `punctual backfill ${current.name} ${where()} --cancel`);
  if (got) await act("backfill", { cancel: true });
};
$("why-ask").onclick = async () => {
  const at = $("why-at").value.trim();
  const { data } = await api(`/api/schedules/${encodeURIComponent(current.namespace)}/${encodeURIComponent(current.name)}/why?at=${encodeURIComponent(at)}`);
  $("why-answer").replaceChildren(...(data.answer || [data.error]).map((line) => text("li", line)));
};

// -- routing ----------------------------------------------------------------------------------

// The schedule's page follows the cluster as the timeline does: read again every few
// seconds, unless a dialog is open (what it shows must not move under the user).
let scheduleTimer = null;
function followSchedule(namespace, name) {
  clearTimeout(scheduleTimer);
  scheduleTimer = setTimeout(async () => {
    if ($("schedule-page").hidden) return;
    if (!$("confirm").open) await loadSchedule(namespace, name);
    followSchedule(namespace, name);
  }, ((fleet && fleet.poll) || 5) * 1000);
}

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const onSchedule = parts[0] === "s" && parts.length === 3;
  $("fleet-page").hidden = onSchedule;
  $("schedule-page").hidden = !onSchedule;
  if (onSchedule) {
    clearTimeout(pollTimer);
    loadSchedule(parts[1], parts[2]);
    followSchedule(parts[1], parts[2]);
  } else {
    loadFleet();
  }
}

for (const id of ["span", "namespace", "state"]) $(id).addEventListener("change", loadFleet);
for (const id of ["label", "text"]) $(id).addEventListener("change", loadFleet);
$("rows").addEventListener("scroll", () => requestAnimationFrame(drawRows), { passive: true });
addEventListener("resize", () => { if (fleet) { drawStrip(); drawRows(); } });
addEventListener("hashchange", route);
route();
