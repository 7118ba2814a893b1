// wasmon live view. Plain JS, no build step; everything comes from the daemon's own API with
// the token (if any) from this tab's sessionStorage as a Bearer header. Data is put into the
// page with textContent only: names come from guests and collectors and are not trusted.
"use strict";

const REFRESH_MS = 5000;
const TOKEN_KEY = "wasmon.token";
// Rows a list shows; the server returns at most what is asked and says how many there were.
const HOSTS_SHOWN = 200, NS_SHOWN = 300, VALUES_SHOWN = 200, PROCS_SHOWN = 25;
const THRESHOLDS_SHOWN = 100, FEED_KEPT = 100, SERIES_SHOWN = 16;

const S = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  overview: null,
  cluster: "", host: "", metric: "", metrics: [],
  sort: "cpu",
  seen: new Set(),
  params: new URLSearchParams(location.search),
};

const $ = (id) => document.getElementById(id);

function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === "class") e.className = v;
    else if (k === "on") for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
    else if (k.startsWith("data-") || k === "title" || k === "style") e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (S.token) h["Authorization"] = "Bearer " + S.token;
  return h;
}

async function api(path, opts) {
  opts = opts || {};
  const r = await fetch(path, Object.assign({}, opts, { headers: headers(opts.headers) }));
  if (r.status === 401) {
    $("auth-banner").hidden = false;
    throw new Error("401: a token is needed");
  }
  const text = await r.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = text; }
  if (!r.ok) throw new Error((body && body.error) || `${r.status} ${text}`);
  $("auth-banner").hidden = true;
  return body;
}

function bytes(n) {
  if (n === null || n === undefined) return "?";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

function duration(s) {
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  if (s < 172800) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}

function badge(text, cls) { return el("span", { class: "badge " + (cls || text) }, text); }

function setStatus(ok, text) {
  const b = $("status");
  b.className = "badge " + (ok ? "ok" : "bad");
  b.textContent = text;
}

function fill(tbody, rows) { tbody.replaceChildren(...rows); }

// ---- overview: pipelines, guests, agents, reloads ----

async function refreshOverview() {
  const o = await api("/api/ui/overview");
  S.overview = o;
  $("about").textContent = `${o.hostname} · v${o.version} · up ${duration(o.uptime)} · RSS ${bytes(o.rss)}`;
  $("store-usage").textContent = `${o.store.series} series · ${o.store.levels} levels · ${o.store.samples} samples`;
  const rows = [];
  for (const p of o.pipelines) {
    const stages = p.stages.length ? p.stages : [null];
    stages.forEach((st, i) => {
      const first = i === 0;
      const c = (st && st.counters) || {};
      const failures = (c.traps || 0) + (c.deadline_hits || 0) + (c.memory_refusals || 0) + (c.output_refusals || 0);
      rows.push(el("tr", { "data-pipeline": p.name },
        el("td", {}, first ? el("b", {}, p.name) : ""),
        el("td", { class: "num" }, first ? p["samples-in"] : ""),
        el("td", { class: "num" }, first ? p["samples-out"] : ""),
        el("td", { class: "num" }, first ? p["samples-lost"] : ""),
        el("td", { class: "num" }, first ? p["guest-swaps"] : ""),
        el("td", {}, st ? st.guest : el("span", { class: "muted" }, "no transformers")),
        el("td", {}, st ? badge(st.health) : ""),
        el("td", { class: "num" }, st ? (c.calls || 0) : ""),
        el("td", { class: "num" }, st ? failures : ""),
        el("td", { class: "num" }, st ? (c.quarantines || 0) : ""),
        el("td", { class: "hash", title: st ? st.hash : "" }, st ? st.hash.slice(0, 12) : "")));
    });
  }
  fill($("pipelines-table").tBodies[0], rows);
  fill($("agent-table").tBodies[0], o.agents.map((a) => el("tr", { "data-agent": a.name },
    el("td", {}, el("b", {}, a.name)),
    el("td", { class: "num" }, a.domain),
    el("td", {}, a.kind === "native" ? "native" : `guest ${a.guest}`),
    el("td", {}, a.pipeline ? `${a.pipeline} every ${a["poll-interval"]} s` : "—"),
    el("td", {}, badge(a.health)),
    el("td", { class: "num" }, a.counters ? (a.counters.calls || 0) : "—"))));
  renderSinks(o.sinks, o["kept-queues"]);
  $("reload-count").textContent = o.reloads.length;
  $("reloads").querySelector("ul").replaceChildren(...o.reloads.slice().reverse().map((r) => {
    const out = r.outcome;
    const parts = [];
    for (const [name, p] of Object.entries(out.pipelines || {})) {
      if (p.result === "swapped" && p.replaced && p.replaced.length) parts.push(`${name}: swapped ${p.replaced.join(", ")}`);
      else if (p.result === "rejected") parts.push(`${name}: refused (${p.error})`);
      else if (p.result !== "swapped") parts.push(`${name}: ${p.result}`);
    }
    if (out.config_error) parts.push("config refused: " + out.config_error);
    if (out.agents_error) parts.push("agents refused: " + out.agents_error);
    return el("li", {}, new Date(r.at * 1000).toLocaleTimeString(), " — ", parts.join("; ") || "nothing changed");
  }));
}

// ---- fleet: which version runs where (as `wasmon fleet status`) ----

async function refreshFleet() {
  const r = await fetch("/api/fleet", { headers: headers() });
  const card = $("fleet");
  const f = r.ok ? await r.json() : { enabled: false };
  card.hidden = !f.enabled;
  if (!f.enabled) return;
  const st = f.status;
  $("fleet-summary").textContent = `${f.fleet} · this daemon ${f.node} [${f.groups.join(", ")}] · ` +
    (f.connected ? "connected" : "NATS unreachable: running the last verified versions") +
    (st ? ` · ${st.daemons.length} daemons` : (f.error ? " · " + f.error : ""));
  if (!st) return;
  const rows = [];
  for (const [guest, versions] of Object.entries(st.guests)) {
    versions.forEach((v, i) => rows.push(el("tr", { "data-guest": guest },
      el("td", {}, i === 0 ? el("b", {}, guest) : ""),
      el("td", { class: "hash", title: v.hash }, v.hash.slice(0, 12)),
      el("td", {}, v.releases.map((m) => m.group).join(", ") || "—"),
      el("td", {}, v.releases.some((m) => m.signature) ? "yes" : "no"),
      el("td", { class: "num" }, `${v.running.length}/${st.daemons.length}`),
      el("td", { class: v.refused.length ? "bad" : "muted", title: v.refused.map((x) => `${x.node}: ${x.reason}: ${x.detail}`).join("\n") },
        v.refused.map((x) => `${x.node} (${x.reason})`).join(", ") || "—"),
      el("td", { class: v["rolled-back"].length ? "bad" : "muted" }, v["rolled-back"].join(", ") || "—"))));
  }
  fill($("fleet-table").tBodies[0], rows);
}

// ---- forwarding sinks: queue, delivery, losses ----

function renderSinks(sinks, kept) {
  $("sink-summary").textContent = sinks.length ? "" : "none configured";
  fill($("sink-table").tBodies[0], sinks.map((s) => {
    const d = s.dropped;
    const dropped = d["queue-size"] + d["queue-age"] + d.unencodable + d["queue-error"];
    const err = s["last-error"];
    return el("tr", { "data-sink": s.name },
      el("td", {}, el("b", {}, s.name), " ", el("span", { class: "muted" }, s.type)),
      el("td", { class: "hash", title: s.url }, s.url),
      el("td", {}, badge(s.failing ? "failing" : "ok")),
      el("td", { class: "num", title: `${s["queued-records"]} records` }, `${s["queued-samples"]} (${bytes(s["queued-bytes"])})`),
      el("td", { class: "num" }, s["queued-records"] ? duration(Math.round(s["oldest-age-seconds"])) : "—"),
      el("td", { class: "num" }, s["sent-samples"]),
      el("td", { class: "num", title: "failed attempts; for a guest sink, and failed exporter calls" },
        s["encode-failures"] ? `${s.retries} (${s["encode-failures"]} exporter)` : s.retries),
      el("td", { class: dropped ? "num bad" : "num", title: JSON.stringify(d) }, dropped),
      el("td", { class: "num" }, s["dead-lettered-samples"]),
      el("td", { class: "muted" }, err ? `${new Date(err[0] * 1000).toLocaleTimeString()} ${err[1]}` : ""));
  }));
  const k = $("kept-queues");
  k.hidden = !kept.length;
  k.textContent = kept.length ? "Queues kept on disk for sinks no longer configured: " +
    kept.map((q) => `${q.name} (${bytes(q.bytes)})`).join(", ") + " — DELETE /api/sinks/NAME/queue removes one." : "";
}

// ---- the store: cluster / host / metric picker and the chart ----

// What the chart opens on when the URL names no metric, first present wins (the default
// config computes cpu_util and memory_util; a flat line such as hinv.ncpu says nothing).
const PREFERRED_METRICS = ["cpu_util", "kernel.all.load", "memory_util"];

function options(select, values, chosen, label) {
  select.replaceChildren(...values.map((v) => el("option", { value: v, selected: v === chosen }, label ? label(v) : v)));
  if (values.length && !values.includes(chosen)) select.value = values[0];
  return select.value;
}

function storeUrl(path, extra) {
  const q = new URLSearchParams(Object.assign({ path: path.join(":") }, extra || {}));
  return "/api/ui/store?" + q.toString();
}

async function loadClusters() {
  const r = await api(storeUrl([]));
  const want = S.cluster || S.params.get("cluster") || (S.overview && S.overview.cluster);
  S.cluster = options($("cluster"), r.children, want);
  await loadHosts();
}

async function loadHosts() {
  if (!S.cluster) return;
  const filter = $("host-filter").value;
  const r = await api(storeUrl([S.cluster], { filter, limit: HOSTS_SHOWN }));
  const want = S.host || S.params.get("host") || (S.overview && S.overview.hostname);
  S.host = options($("host"), r.children, want);
  $("host-count").textContent = r.matching > r.children.length
    ? `${r.children.length} of ${r.matching} hosts shown (filter to narrow)`
    : r.matching < r.total ? `${r.matching} of ${r.total} hosts match` : `${r.total} hosts`;
  await loadMetrics();
}

async function loadMetrics() {
  if (!S.host) { $("metric").replaceChildren(); S.metrics = []; return drawChart(); }
  const r = await api(storeUrl([S.cluster, S.host]));
  S.metrics = r.metrics;
  const names = r.metrics.map((m) => m.name);
  // Unless asked otherwise, open on a chart that moves: CPU utilisation, else the load. A
  // page opened before CPU utilisation had a value (a rate: the second poll) moves to it once
  // it has one, unless the metric was chosen (the URL, the select).
  const chosen = (!S.metricAuto && S.metric) || S.params.get("metric");
  const want = chosen || PREFERRED_METRICS.find((n) => names.includes(n)) || S.metric;
  S.metricAuto = !chosen;
  const info = Object.fromEntries(r.metrics.map((m) => [m.name, m]));
  S.metric = options($("metric"), names, want, (n) => info[n].below ? `${n} (${info[n].below} components)` : n);
  if (S.params.get("aggregate") === "1") { $("aggregate").checked = true; S.params.delete("aggregate"); }
  await drawChart();
}

async function drawChart() {
  // Draws overlap (the 5 s tick, a metric refresh, the user's choice): only the one started
  // last may render, or a slow answer for the metric before would replace the chart after.
  const draw = S.draws = (S.draws || 0) + 1;
  const box = $("chart");
  const m = S.metrics.find((x) => x.name === S.metric);
  if (!m) { WasmonChart.render(box, [], { empty: "nothing stored yet" }); $("legend").replaceChildren(); delete box.dataset.metric; return; }
  const windowS = Number($("window").value);
  const to = Math.floor(Date.now() / 1000), from = to - windowS;
  const resolution = windowS <= 3600 ? 0 : Math.ceil(windowS / 720 / 10) * 10;
  const aggregate = $("aggregate").checked && m.below > 0;
  const queries = [], names = [];
  if (m.here && !aggregate) { queries.push({ metric: m.name, host: S.host, resolution }); names.push(S.host); }
  if (m.below > 0 && (aggregate || queries.length < SERIES_SHOWN)) {
    const limit = aggregate ? 1000 : SERIES_SHOWN - queries.length;
    const comps = (await api(storeUrl([S.cluster, S.host], { metric: m.name, limit }))).children;
    if (comps.length && aggregate) {
      queries.push({ metric: m.name, host: S.host, type: "", "type-ids": comps, aggreg: true, resolution });
      names.push(`${S.host}: ${comps.length} components aggregated`);
    } else if (comps.length) {
      queries.push({ metric: m.name, host: S.host, type: "", "type-ids": comps, resolution });
      for (const c of comps) names.push(`${S.host}/${c}`);
    }
  }
  const r = await api("/api/query", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ cluster: S.cluster, from, to, "with-stats": false, "with-padding": false, queries }) });
  if (draw !== S.draws) return;
  const series = [];
  let k = 0;
  for (const row of r.results) for (const d of row) {
    const name = names[k++];
    if (!d.error && d.data) series.push({ name, from: d.from, resolution: d.resolution, data: d.data });
  }
  const legend = $("legend");
  const drawn = WasmonChart.render(box, series, { from, to, onHover: (t, vals) => {
    legend.replaceChildren(...vals.map((v, i) => el("span", { style: `--c:${drawn.colours[i]}` },
      `${v.name}: ${v.value === null ? "–" : WasmonChart.fmt(v.value)}`)),
    el("span", { class: "muted" }, WasmonChart.clock(t)));
  } });
  // What is drawn (the select may already name the next metric while this one is fetched).
  box.dataset.metric = m.name;
  if (drawn) legend.replaceChildren(...series.map((s, i) => {
    const last = [...s.data].reverse().find((v) => v !== null);
    return el("span", { style: `--c:${drawn.colours[i]}`, "data-legend": s.name },
      `${s.name}${last === undefined ? "" : " = " + WasmonChart.fmt(last)}`);
  }));
  else legend.replaceChildren();
}

// ---- namespace ----

async function nsChildren(name, ul) {
  const r = await api("/api/ns/children?name=" + encodeURIComponent(name));
  const filter = $("ns-filter").value;
  const kids = (r.children || []).filter((c) => !filter || c.name.includes(filter) || !c.leaf);
  const items = kids.slice(0, NS_SHOWN).map((c) => {
    const full = name ? `${name}.${c.name}` : c.name;
    const li = el("li", { "data-ns": full });
    const label = el("span", { class: "node" + (c.leaf ? " leaf" : "") }, (c.leaf ? "• " : "▸ ") + c.name);
    li.append(label);
    label.addEventListener("click", async () => {
      if (c.leaf) return showValues(full);
      const open = li.querySelector("ul");
      if (open) { open.remove(); label.textContent = "▸ " + c.name; return; }
      const sub = el("ul");
      li.append(sub);
      label.textContent = "▾ " + c.name;
      await nsChildren(full, sub).catch((e) => sub.append(el("li", { class: "muted" }, e.message)));
    });
    return li;
  });
  if (kids.length > NS_SHOWN) items.push(el("li", { class: "muted" }, `… and ${kids.length - NS_SHOWN} more (filter to narrow)`));
  if (r.error) items.push(el("li", { class: "muted" }, r.error));
  ul.replaceChildren(...items);
}

async function showValues(name) {
  const box = $("ns-values");
  const r = await api("/api/fetch?name=" + encodeURIComponent(name));
  box.replaceChildren(...r.map((m) => {
    if (m.error) return el("p", { class: "muted" }, `${m.name}: ${m.error}`);
    const vals = m.values || [];
    const t = el("table", { "data-fetched": m.name }, el("caption", {}, `${m.name} (${m.pmid}, ${m.semantics || ""} ${m.units || ""})`));
    t.append(...vals.slice(0, VALUES_SHOWN).map(([inst, v]) => el("tr", {}, el("td", {}, inst === null ? "—" : inst), el("td", { class: "num" }, v))));
    if (vals.length > VALUES_SHOWN) t.append(el("tr", {}, el("td", { class: "muted" }, `… ${vals.length - VALUES_SHOWN} more instances`)));
    return t;
  }));
}

// ---- processes ----

async function refreshProcs() {
  const q = new URLSearchParams({ sort: S.sort, limit: PROCS_SHOWN, filter: $("proc-filter").value });
  const r = await api("/api/ui/ps?" + q.toString());
  $("proc-count").textContent = `${r.procs.length} of ${r.matching} processes, by ${r.sort === "mem" ? "RSS" : "CPU"}`;
  for (const th of document.querySelectorAll("#proc-table th.sort")) th.classList.toggle("active", th.dataset.sort === r.sort);
  fill($("proc-table").tBodies[0], r.procs.map((p) => el("tr", { "data-pid": p.pid },
    el("td", { class: "num" }, p.pid), el("td", {}, p.comm), el("td", {}, p.state),
    el("td", { class: "num" }, p.threads), el("td", { class: "num" }, p.cpu.toFixed(1)),
    el("td", { class: "num" }, bytes(p.rss)))));
}

// ---- thresholds and notifications ----

async function refreshThresholds() {
  const q = new URLSearchParams({ filter: $("threshold-filter").value, limit: THRESHOLDS_SHOWN });
  const r = await api("/api/ui/thresholds?" + q.toString());
  $("threshold-count").textContent = r.matching > r.thresholds.length ? `${r.thresholds.length} of ${r.matching}` : `${r.total}`;
  fill($("threshold-table").tBodies[0], r.thresholds.map((t) => el("tr", { "data-handle": t.handle },
    el("td", { class: "num" }, t.handle), el("td", {}, t.metric), el("td", {}, t.instance || "all"),
    el("td", {}, `${t.direction === "rising" ? "≥" : "≤"} ${t.value}`), el("td", {}, t.owner),
    el("td", {}, el("button", { on: { click: () => api(`/api/notify/thresholds/${t.handle}`, { method: "DELETE" }).then(refreshThresholds).catch(report) } }, "×")))));
}

function addNotification(n, fresh) {
  const key = `${n.handle}/${n.instance}/${n.ts_ns}`;
  if (S.seen.has(key)) return;
  S.seen.add(key);
  const when = new Date(n.ts_ns / 1e6).toLocaleTimeString();
  const li = el("li", { class: fresh ? "fresh" : "", "data-metric": n.metric, "data-instance": n.instance },
    el("span", { class: "when" }, when),
    el("b", {}, `${n.metric}[${n.instance}]`), ` = ${WasmonChart.fmt(n.value)} `,
    n.direction === "rising" ? `rose above ${n.threshold}` : `fell below ${n.threshold}`,
    el("span", { class: "muted" }, ` → ${n.owner}`));
  const list = $("notification-list");
  list.prepend(li);
  while (list.children.length > FEED_KEPT) list.lastChild.remove();
}

function setStream(text, cls) { const b = $("stream-state"); b.textContent = text; b.className = "badge " + cls; }

// EventSource cannot send an Authorization header: read the SSE stream with fetch instead.
async function streamNotifications() {
  for (;;) {
    try {
      const recent = await api("/api/ui/notifications");
      for (const n of recent.notifications) addNotification(n, false);
      const r = await fetch("/api/ui/notifications/stream", { headers: headers() });
      if (!r.ok) throw new Error(String(r.status));
      setStream("live", "ok");
      const reader = r.body.getReader(), dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let event = "message", data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) event = line.slice(6).trim();
            else if (line.startsWith("data:")) data += line.slice(5).replace(/^ /, "");
          }
          if (event === "notification") addNotification(JSON.parse(data), true);
          else if (event === "dropped") $("notification-list").prepend(el("li", { class: "muted" }, `${JSON.parse(data).count} notifications dropped (page too slow)`));
        }
      }
    } catch (_) { /* reconnect below */ }
    setStream("reconnecting", "bad");
    await new Promise((r) => setTimeout(r, 3000));
  }
}

// ---- wiring ----

function report(e) { setStatus(false, e.message.slice(0, 60)); }

async function tick() {
  try {
    await refreshOverview();
    await Promise.all([drawChart(), refreshProcs(), refreshFleet()]);
    setStatus(true, "live");
  } catch (e) { report(e); }
}

function debounce(f, ms) { let t; return () => { clearTimeout(t); t = setTimeout(f, ms); }; }

function wire() {
  $("token").value = S.token;
  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    S.token = $("token").value.trim();
    if (S.token) sessionStorage.setItem(TOKEN_KEY, S.token); else sessionStorage.removeItem(TOKEN_KEY);
    start();
  });
  $("cluster").addEventListener("change", () => { S.cluster = $("cluster").value; S.host = ""; S.metric = ""; loadHosts().catch(report); });
  $("host").addEventListener("change", () => { S.host = $("host").value; loadMetrics().catch(report); });
  $("host-filter").addEventListener("input", debounce(() => { S.host = ""; loadHosts().catch(report); }, 300));
  $("metric").addEventListener("change", () => { S.metric = $("metric").value; S.metricAuto = false; drawChart().catch(report); });
  $("aggregate").addEventListener("change", () => drawChart().catch(report));
  $("window").addEventListener("change", () => drawChart().catch(report));
  $("ns-filter").addEventListener("input", debounce(() => nsChildren("", $("ns-tree")).catch(report), 300));
  $("proc-filter").addEventListener("input", debounce(() => refreshProcs().catch(report), 300));
  $("threshold-filter").addEventListener("input", debounce(() => refreshThresholds().catch(report), 300));
  for (const th of document.querySelectorAll("#proc-table th.sort")) {
    th.addEventListener("click", () => { S.sort = th.dataset.sort; refreshProcs().catch(report); });
  }
  $("threshold-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    const body = { subscriber: "wasmon.ui", metric: f.get("metric"), value: Number(f.get("value")), direction: f.get("direction") };
    if (f.get("instance")) body.instance = f.get("instance");
    api("/api/notify/thresholds", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })
      .then(() => { ev.target.reset(); return refreshThresholds(); }).catch(report);
  });
}

let started = false;
async function start() {
  try {
    await refreshOverview();
    await loadClusters();
    await Promise.all([refreshProcs(), refreshThresholds(), nsChildren("", $("ns-tree"))]);
    setStatus(true, "live");
  } catch (e) { report(e); }
  if (started) return;
  started = true;
  streamNotifications();
  setInterval(tick, REFRESH_MS);
  setInterval(() => refreshThresholds().catch(report), 2 * REFRESH_MS);
  setInterval(() => loadMetrics().catch(report), 6 * REFRESH_MS);
}

wire();
start();
