// The UI's little script: panels that open, and confirmations before destructive forms.
document.addEventListener("click", (event) => {
  const toggle = event.target.closest("[data-toggle]");
  if (!toggle) return;
  const panel = document.getElementById(toggle.dataset.toggle);
  if (panel) {
    panel.hidden = !panel.hidden;
    const first = panel.querySelector("input:not([type=hidden]), select, textarea");
    if (!panel.hidden && first) first.focus();
  }
});

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
    event.preventDefault();
    return;
  }
  const name = form.dataset.confirmName;
  if (name) {
    const typed = window.prompt(`Delete repository ${name} and all its history? Type its name to confirm.`);
    if (typed === null) {
      event.preventDefault();
      return;
    }
    form.querySelector("input[name=confirm]").value = typed;
  }
});

// The mirrors page: refresh each mirror's status every 2 s, and chart each branch's lag
// over the recent window: the replication service's samples (in the page), then the
// page's own.
const lagHistory = new Map();
const lagWindow = new Map();  // mirror id -> ms of history to keep

function short(id) { return id ? id.slice(0, 12) : ""; }

function drawLag(svg, samples) {
  const w = Number(svg.getAttribute("width")), h = Number(svg.getAttribute("height"));
  const peak = Math.max(0, ...samples.map((s) => s[1]));
  const now = Date.now(), max = Math.max(1, peak);  // the scale: at least 1 s
  // the time axis spans the samples kept (at least 10 s, at most the window)
  const span = Math.max(10000, now - (samples.length ? samples[0][0] : now));
  const x = (t) => w - ((now - t) / span) * w;
  const y = (v) => h - 3 - (v / max) * (h - 14);
  const points = samples.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
  svg.innerHTML = `<polyline points="${points}"></polyline>` +
    `<text x="2" y="10">max ${peak.toFixed(1)} s</text>`;
}

function recordRow(mirrorId, row, lag) {
  const key = `${mirrorId}/${row.dataset.branch}`;
  const samples = lagHistory.get(key) || [];
  samples.push([Date.now(), lag]);
  const keep = lagWindow.get(mirrorId) || 10 * 60 * 1000;
  while (samples.length && Date.now() - samples[0][0] > keep) samples.shift();
  lagHistory.set(key, samples);
  const svg = row.querySelector("svg[data-chart]");
  if (svg) drawLag(svg, samples);
}

async function refreshMirror(card) {
  const resp = await fetch(card.dataset.status, { headers: { accept: "application/json" } });
  if (!resp.ok || resp.redirected) return;
  const status = await resp.json();
  const branches = status.branches || [];
  // current: the source read recently and found equal; never while it is not read
  const current = branches.filter((b) => b.current).length;
  const badge = card.querySelector("[data-test=mirror-progress]");
  if (badge) {
    badge.textContent = `${current}/${branches.length} branches current`;
    badge.className = `badge ${branches.length && current === branches.length ? "ok" : "pending"}`;
  }
  const stale = card.querySelector("[data-test=mirror-stale]");
  if (stale) stale.hidden = !status.stale;
  const state = card.querySelector("[data-test=mirror-state]");
  if (state && status.mirror && status.mirror.state) {
    state.textContent = status.mirror.state;
    state.className = `badge state ${status.mirror.state}`;
  }
  const tbody = card.querySelector("[data-test=mirror-branches] tbody");
  for (const b of branches) {
    let row = tbody.querySelector(`tr[data-branch="${CSS.escape(b.branch)}"]`);
    if (!row) {  // a branch the page did not know yet
      const empty = tbody.querySelector("tr[data-empty]");
      if (empty) empty.remove();
      row = document.createElement("tr");
      row.dataset.branch = b.branch;
      row.innerHTML = "<td></td>" + ["source_head", "mirror_head", "pending_commit",
        "missing_ranges", "missing_objects", "lag"].map((f) => `<td data-field="${f}"></td>`).join("") +
        '<td><svg class="lag" width="180" height="34" data-chart></svg></td><td data-field="error"></td>';
      row.firstChild.textContent = b.branch;
      tbody.appendChild(row);
    }
    const set = (field, text) => { row.querySelector(`[data-field=${field}]`).textContent = text; };
    set("source_head", short(b.source_head));
    set("mirror_head", short(b.mirror_head) || "—");
    set("pending_commit", short(b.pending_commit));
    set("missing_ranges", b.missing_ranges);
    set("missing_objects", b.missing_objects);
    const lag = `${(b.lag_seconds || 0).toFixed(1)} s`;
    set("lag", b.current ? `current · ${lag}` : b.stale ? `blind · ${lag}` : lag);
    set("error", b.error || (b.group ? `moved by group ${b.group.name} (cut ${b.group.cut})` : ""));
    row.className = b.current ? "current" : b.stale ? "stale" : "behind";
    recordRow(card.dataset.mirror, row, b.lag_seconds || 0);
  }
}

function stamp(seconds) {
  return seconds ? new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "";
}

// A mirror group's card: the cut served, its source time, what the next cut waits for
// and the group's lag (never current while the source region does not read the heads).
async function refreshGroup(card) {
  const resp = await fetch(card.dataset.groupStatus, { headers: { accept: "application/json" } });
  if (!resp.ok || resp.redirected) return;
  const st = await resp.json();
  const detached = st.state === "detached";
  const set = (field, text) => {
    const el = card.querySelector(`[data-field=${field}]`);
    if (el) el.textContent = text;
  };
  const state = card.querySelector("[data-test=group-state]");
  state.textContent = st.state;
  state.className = `badge state ${st.state}`;
  const current = card.querySelector("[data-test=group-current]");
  current.hidden = detached;
  current.textContent = st.current ? "current" : "behind";
  current.className = `badge ${st.current ? "ok" : "pending"}`;
  card.querySelector("[data-test=group-stale]").hidden = !st.stale || detached;
  const served = st.served_cut;
  set("source_read_at", stamp(st.group.source_read_at) || "never");
  set("served_cut", served ? `cut ${served.sequence}` : "no cut yet");
  set("served_taken_at", served ? stamp(served.taken_at) : "—");
  set("served_at", stamp(st.served_at) || "—");
  const lag = `${(st.lag_seconds || 0).toFixed(1)} s`;
  set("group_lag", st.current ? `current · ${lag}` : st.stale ? `blind · ${lag}` : lag);
  card.querySelector("[data-test=group-waiting]").textContent = detached
    ? "Detached: the member repositories are writable at the cut served."
    : st.waiting ? `Next: cut ${st.waiting.cut.sequence} waits for ${st.waiting.waiting_for || "its promotion"}.`
    : "No newer cut waits.";
  for (const m of st.members || []) {
    const row = card.querySelector(`tr[data-member="${CSS.escape(`${m.mirror_id}/${m.branch}`)}"]`);
    if (!row) continue;
    row.querySelector("[data-field=state]").textContent = m.state;
    row.querySelector("[data-field=served_head]").textContent = short(m.served_head) || "—";
    row.querySelector("[data-field=waiting_head]").textContent = short(m.waiting_head);
  }
}

function startMirrorRefresh() {
  const groups = document.querySelectorAll("[data-group][data-group-status]");
  if (groups.length) {
    setInterval(() => groups.forEach((card) => refreshGroup(card).catch(() => {})), 2000);
  }
  const cards = document.querySelectorAll("[data-mirror][data-status]");
  if (!cards.length) return;
  for (const card of cards) {
    lagWindow.set(card.dataset.mirror, (Number(card.dataset.lagWindow) || 600) * 1000);
    // the server's clock may differ from the browser's: its samples are placed relative
    // to the time the page was made
    const skew = Date.now() - (Number(card.dataset.now) * 1000 || Date.now());
    for (const row of card.querySelectorAll("tr[data-branch]")) {
      let history = [];
      try { history = JSON.parse(row.dataset.history || "[]"); } catch (e) { history = []; }
      lagHistory.set(`${card.dataset.mirror}/${row.dataset.branch}`,
        history.map(([t, lag]) => [t * 1000 + skew, lag]));
      const lagCell = row.querySelector("[data-field=lag]");
      recordRow(card.dataset.mirror, row, Number(lagCell && lagCell.dataset.lag) || 0);
    }
  }
  setInterval(() => cards.forEach((card) => refreshMirror(card).catch(() => {})), 2000);
}

document.addEventListener("DOMContentLoaded", startMirrorRefresh);
