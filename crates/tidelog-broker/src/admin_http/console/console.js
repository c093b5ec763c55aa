// The tidelog console: draws this node's /v1 views. No framework and no build step;
// every text that comes from the cluster (topic, group, config names) goes in as
// textContent, never as HTML.
"use strict";

const REFRESH_MS = 3000;
const SVG_NS = "http://www.w3.org/2000/svg";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  for (const child of children) node.append(child);
  return node;
}

// Why the port refused: its JSON {"error": ...} (401: who you are; 403: what your
// ACLs allow), else the status.
async function refusal(path, response) {
  const text = await response.text();
  try { return JSON.parse(text).error || text; } catch (_) { return text.trim() || `${path} answered ${response.status}`; }
}

async function api(path) {
  const response = await fetch(path, { cache: "no-store" });
  if (response.status === 503) throw new Error("this node is not ready (starting, or cut off from the controller quorum)");
  if (response.status === 404) return null;
  if (!response.ok) throw new Error(await refusal(path, response));
  return response.json();
}

// Seconds as a person reads them.
function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.max(0, seconds);
  if (s < 90) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

function bytes(n) {
  if (n === undefined || n === null) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

function num(n) {
  return n === undefined || n === null ? "–" : Number(n).toLocaleString("en-US");
}

function time(ms) {
  return new Date(ms).toISOString().slice(11, 19);
}

// A table: columns are [heading, value-of-row, numeric?].
function table(caption, columns, rows, extra) {
  const head = el("tr", {}, columns.map(([name, , numeric]) => el("th", { scope: "col", class: numeric ? "num" : null }, name)));
  const body = rows.map((row) => el("tr", {}, columns.map(([, value, numeric]) => {
    const cell = value(row);
    return el("td", { class: numeric ? "num" : null }, cell);
  })));
  return el("div", { class: `scroll${extra && extra.tall ? " tall" : ""}` },
    el("table", extra && extra.id ? { id: extra.id } : {}, el("caption", { class: "visually-hidden" }, caption), el("thead", {}, head), el("tbody", {}, body)));
}

function figures(items) {
  return el("ul", { class: "figures" }, items.map(([label, value, bad]) => el("li", {}, label, el("b", { class: bad ? "bad" : null }, value))));
}

// --- views ---------------------------------------------------------------------

// The quorum's figures, or why they are missing: the cluster view still shows the rest.
async function quorum() {
  try {
    return await api("/v1/quorum");
  } catch (error) {
    return { error: error.message };
  }
}

function quorumSection(q) {
  if (q.error) return [el("h3", {}, "Controller quorum"), el("p", { class: "bad" }, `Not known: ${q.error}`)];
  return [
    el("h3", {}, "Controller quorum"),
    figures([["Leader", q.leader === null ? "none" : q.leader, q.leader === null], ["Epoch (term)", q.term], ["Applied end", num(q.applied_end)]]),
    table("Controller quorum voters", [
      ["Voter", (v) => v.node_id, true],
      ["Address", (v) => v.address],
      ["Role", (v) => (v.node_id === q.leader ? "leader" : "follower")],
      ["Log end", (v) => num(v.log_end), true],
      ["Lag (entries)", (v) => el("span", { class: v.lag > 0 ? "bad" : null }, num(v.lag)), true],
    ], q.voters, { id: "voters" }),
  ];
}

// Each broker's byte counters as last seen ({at, in, out, rate}): two samples taken at
// different times (its own clock) give its rates, which stay until a newer sample.
const traffic = new Map();

function trafficRate(b) {
  if (b.bytes_in_total === null || b.traffic_sampled_at_ms === null) return null;
  const now = { at: b.traffic_sampled_at_ms, in: b.bytes_in_total, out: b.bytes_out_total, rate: null };
  const before = traffic.get(b.node_id);
  if (before && now.at === before.at) return before.rate;
  const seconds = before ? (now.at - before.at) / 1000 : 0;
  // A restart (counters back to zero) starts again.
  if (before && seconds > 0 && now.in >= before.in && now.out >= before.out) {
    now.rate = { in: (now.in - before.in) / seconds, out: (now.out - before.out) / seconds };
  }
  traffic.set(b.node_id, now);
  return now.rate;
}

async function clusterView() {
  const [c, q] = await Promise.all([api("/v1/cluster"), quorum()]);
  // Another broker's counters come with its heartbeats (every couple of seconds).
  const rates = new Map(c.brokers.map((b) => [b.node_id, trafficRate(b)]));
  const rate = (b, which) => (b.bytes_in_total === null ? el("span", { class: "muted", title: "no heartbeat figures yet" }, "–")
    : rates.get(b.node_id) ? `${bytes(rates.get(b.node_id)[which])}/s` : "…");
  return [
    el("h2", {}, "Cluster ", c.cluster_id),
    figures([
      ["This node", c.node_id],
      ["Metadata offset", num(c.metadata_offset)],
      ["Topics", num(c.topics)],
      ["Partitions", num(c.partitions)],
      ["Led here", num(c.leader_partitions)],
      ["Under-replicated", num(c.under_replicated_partitions), c.under_replicated_partitions > 0],
      ["Under min ISR", num(c.under_min_isr_partitions), c.under_min_isr_partitions > 0],
      ["Offline", num(c.offline_partitions), c.offline_partitions > 0],
    ]),
    el("h3", {}, "Brokers"),
    table("Brokers", [
      ["Node", (b) => b.node_id, true],
      ["Host", (b) => `${b.host}:${b.port}`],
      ["Rack", (b) => b.rack || "–"],
      ["State", (b) => (b.fenced ? el("span", { class: "bad" }, "fenced") : el("span", { class: "good" }, "active"))],
      ["Partitions led", (b) => num(b.partitions_led), true],
      ["Bytes in", (b) => rate(b, "in"), true],
      ["Bytes out", (b) => rate(b, "out"), true],
    ], c.brokers, { id: "brokers" }),
    quorumSection(q),
  ];
}

async function topicsView() {
  const { topics } = await api("/v1/topics");
  const shown = topics.filter((t) => !t.internal);
  const internal = topics.length - shown.length;
  return [
    el("h2", {}, `Topics (${shown.length}${internal ? `, and ${internal} internal` : ""})`),
    shown.length === 0 ? el("p", {}, "No topics yet.") : null,
    shown.map((t) => el("details", { class: "topic", "data-topic": t.name, open: shown.length <= 5 ? "" : null },
      el("summary", {}, `${t.name} · ${t.partitions.length} partition${t.partitions.length === 1 ? "" : "s"}`),
      table(`Partitions of ${t.name}`, [
        ["Partition", (p) => p.partition, true],
        ["Leader", (p) => p.leader, true],
        ["Replicas", (p) => p.replicas.join(", ")],
        ["ISR", (p) => p.isr.join(", ")],
        ["Log start", (p) => num(p.log_start_offset), true],
        ["Log end", (p) => num(p.log_end_offset), true],
        ["High watermark", (p) => num(p.high_watermark), true],
        ["Size", (p) => bytes(p.size_bytes), true],
        ["Records", (p) => (p.high_watermark === undefined ? "–" : el("a", { href: `#tail/${encodeURIComponent(t.name)}/${p.partition}` }, "tail"))],
      ], t.partitions),
      t.configs === null ? el("p", { class: "muted" }, "Configs: not shown (they need DESCRIBE_CONFIGS on the topic).")
        : Object.keys(t.configs).length === 0 ? el("p", {}, "Configs: the broker defaults.")
        : table(`Configs of ${t.name}`, [["Config", (e) => e[0]], ["Value", (e) => e[1]]], Object.entries(t.configs)),
    )),
  ];
}

function groupTotals(g) {
  let lag = 0;
  let seconds = 0;
  let headroom = null;
  for (const p of g.partitions) {
    lag += p.lag_messages;
    seconds = Math.max(seconds, p.time_lag_seconds);
    if (p.retention_headroom_seconds !== null) headroom = headroom === null ? p.retention_headroom_seconds : Math.min(headroom, p.retention_headroom_seconds);
  }
  return { lag, seconds, headroom };
}

async function groupsView() {
  const [{ groups }, history] = await Promise.all([api("/v1/groups"), api("/v1/lag-history")]);
  const risk = new Map(history.groups.map((h) => [h.group, h]));
  return [
    el("h2", {}, `Groups (${groups.length})`),
    groups.length === 0 ? el("p", {}, "No group is coordinated by this node.") : table("Groups", [
      ["Group", (g) => el("a", { href: `#group/${encodeURIComponent(g.group)}` }, g.group)],
      // classic, consumer (KIP-848) or share (KIP-932: no committed offsets, so no lag here).
      ["Type", (g) => g.group_type || "classic"],
      ["State", (g) => g.state],
      ["Members", (g) => g.members, true],
      ["Generation", (g) => g.generation, true],
      ["Lag (messages)", (g) => num(groupTotals(g).lag), true],
      ["Lag (seconds)", (g) => duration(groupTotals(g).seconds), true],
      ["Retention headroom", (g) => duration(groupTotals(g).headroom), true],
      ["At risk", (g) => (risk.get(g.group) && risk.get(g.group).at_risk ? el("span", { class: "bad" }, "yes") : "no")],
    ], groups, { id: "groups" }),
  ];
}

async function groupView(name) {
  const [{ groups }, summary] = await Promise.all([api("/v1/groups"), api("/v1/lag-history")]);
  // A group not sampled yet has no history to ask for.
  const sampled = summary.groups.some((g) => g.group === name);
  const history = sampled ? await api(`/v1/groups/${encodeURIComponent(name)}/lag-history`) : null;
  const group = groups.find((g) => g.group === name);
  if (!group) return [el("h2", {}, "Group ", name), el("p", {}, "This node does not coordinate this group.")];
  const out = [el("h2", {}, "Group ", el("span", { id: "group-name" }, name))];
  if (history && history.at_risk) out.push(el("div", { class: "banner", role: "alert", id: "group-risk" }, history.risk_message));
  out.push(figures([
    ["State", group.state],
    ["Members", group.members],
    ["Generation", group.generation],
    ["Rebalances seen", group.rebalances],
    ["Lag (messages)", num(groupTotals(group).lag)],
    ["Lag (seconds)", duration(groupTotals(group).seconds)],
    ["Trend", history ? `${history.trend_messages_per_second.toFixed(1)} msg/s` : "–", history && history.trend_messages_per_second > 0],
    ["Retention headroom", duration(history ? history.retention_headroom_seconds : null), history && history.at_risk],
  ]));
  out.push(el("h3", {}, "Lag over time"));
  out.push(history && history.samples.length > 0 ? lagChart(name, history) : el("p", {}, "No samples yet."));
  if (history && history.samples.length > 0) {
    out.push(el("h3", {}, "Lag over time, as a table"));
    out.push(table(`Lag samples of ${name}`, [
      ["Time (UTC)", (s) => time(s.at_ms)],
      ["Lag (messages)", (s) => num(s.lag_messages), true],
      ["Lag (seconds)", (s) => s.lag_seconds.toFixed(1), true],
      ["Retention headroom (seconds)", (s) => (s.retention_headroom_seconds === null ? "–" : s.retention_headroom_seconds.toFixed(0)), true],
    ], history.samples.slice().reverse(), { tall: true, id: "lag-table" }));
  }
  out.push(membersSection(group));
  out.push(el("h3", {}, "Partitions"));
  out.push(table(`Partitions of ${name}`, [
    ["Topic", (p) => p.topic],
    ["Partition", (p) => p.partition, true],
    ["Committed", (p) => num(p.committed_offset), true],
    ["High watermark", (p) => num(p.high_watermark), true],
    ["Lag (messages)", (p) => num(p.lag_messages), true],
    ["Lag (seconds)", (p) => duration(p.time_lag_seconds), true],
    ["Drain time", (p) => duration(p.drain_time_seconds), true],
    ["Trend (msg/s)", (p) => p.lag_trend_per_second.toFixed(1), true],
    ["Retention headroom", (p) => duration(p.retention_headroom_seconds), true],
  ], group.partitions, { id: "group-partitions" }));
  return out;
}

// "orders: 0, 2; audit: 1" for a member's partitions; null (unreadable) as "–".
function assignment(topics) {
  if (!topics) return "–";
  return topics.map((t) => `${t.topic}: ${t.partitions.join(", ")}`).join("; ") || "none";
}

// Each member with its partitions and their lag (the group's figures for them).
function membersSection(group) {
  const members = group.member_details || [];
  const lagOf = new Map(group.partitions.map((p) => [`${p.topic}\u0000${p.partition}`, p]));
  const owned = (m) => (m.assigned || []).flatMap((t) => t.partitions.map((p) => lagOf.get(`${t.topic}\u0000${p}`)).filter((p) => p));
  const consumerProtocol = group.group_type === "consumer";
  const columns = [
    ["Member", (m) => m.member_id],
    ["Client id", (m) => m.client_id],
    ["Host", (m) => m.client_host],
    ["Instance id", (m) => m.instance_id || "–"],
    ["Epoch", (m) => (m.member_epoch === null ? "–" : m.member_epoch), true],
    ["Assigned", (m) => assignment(m.assigned)],
  ];
  if (consumerProtocol) {
    columns.push(["Target", (m) => assignment(m.target)], ["Reconciliation", (m) => m.reconciliation || "–"]);
  }
  columns.push(
    ["Lag (messages)", (m) => num(owned(m).reduce((n, p) => n + p.lag_messages, 0)), true],
    ["Lag (seconds)", (m) => duration(owned(m).reduce((s, p) => Math.max(s, p.time_lag_seconds), 0)), true],
  );
  const shown = members.length < group.members ? ` (the first ${members.length} of ${group.members})` : "";
  return [
    el("h3", {}, `Members${shown}`),
    members.length === 0 ? el("p", {}, "No members.") : table(`Members of ${group.group}`, columns, members, { id: "group-members" }),
  ];
}

const TAIL_RECORDS = 50;

function shownBytes(shown) {
  if (!shown) return el("span", { class: "muted" }, "null");
  const cut = shown.encoding === "hex" ? shown.data.length / 2 < shown.size : shown.data.length < shown.size;
  return `${shown.encoding === "hex" ? "0x" : ""}${shown.data}${cut ? ` … (${bytes(shown.size)})` : ""}`;
}

// Records of one partition, at most TAIL_RECORDS a page. `page` is null for the newest
// page (read again at every refresh, so it follows the end), or ["before", O] / ["from", O]
// for the page older than O / starting at O, which the Older and Newer links step through.
async function tailView(topic, partition, page) {
  const at = page === null ? "" : page[0] === "before" ? `&before=${page[1]}` : `&offset=${page[1]}`;
  const path = `/v1/topics/${encodeURIComponent(topic)}/partitions/${partition}/records?limit=${TAIL_RECORDS}${at}`;
  const response = await fetch(path, { cache: "no-store" });
  const heading = el("h2", {}, "Records of ", el("span", { id: "tail-partition" }, `${topic}-${partition}`));
  if (response.status === 403) return [heading, el("p", { class: "bad", id: "tail-refused" }, await refusal(path, response))];
  if (response.status === 404) return [heading, el("p", {}, "This node hosts no replica of this partition.")];
  if (!response.ok) throw new Error(await refusal(path, response));
  const tail = await response.json();
  const base = `#tail/${encodeURIComponent(topic)}/${partition}`;
  const first = tail.records.length ? tail.records[0].offset : tail.from_offset;
  const link = (id, href, text, enabled) => (enabled ? el("a", { id, href }, text) : el("span", { id, class: "muted", "aria-disabled": "true" }, text));
  const pager = el("nav", { class: "pager", "aria-label": "Pages of records" },
    link("tail-older", `${base}/before/${first}`, "← Older", first > tail.log_start_offset),
    link("tail-newer", `${base}/from/${tail.next_offset}`, "Newer →", page !== null && tail.next_offset < tail.high_watermark),
    link("tail-newest", base, "Newest", page !== null));
  const range = tail.records.length ? `offsets ${num(first)} to ${num(tail.records[tail.records.length - 1].offset)}` : "no records";
  return [
    heading,
    el("p", { id: "tail-range" }, page === null
      ? `The newest ${tail.records.length} records below the high watermark ${num(tail.high_watermark)} (log start ${num(tail.log_start_offset)}), newest first; refreshed with the page.`
      : `${range} of ${num(tail.log_start_offset)} to ${num(tail.high_watermark)}, newest first.`),
    pager,
    table(`Records of ${topic}-${partition}`, [
      ["Offset", (r) => num(r.offset), true],
      ["Timestamp (UTC)", (r) => new Date(r.timestamp).toISOString().replace("T", " ").slice(0, 23)],
      ["Key", (r) => shownBytes(r.key)],
      ["Value", (r) => shownBytes(r.value)],
      ["Headers", (r) => r.headers.map((h) => `${h.key.data}=${h.value ? h.value.data : "null"}`).join(", ") || "–"],
    ], tail.records.slice().reverse(), { tall: true, id: "tail" }),
  ];
}

async function transactionsView() {
  const { transactions, truncated } = await api("/v1/transactions");
  return [
    el("h2", {}, `Open transactions (${transactions.length}${truncated ? ", the oldest shown" : ""})`),
    transactions.length === 0 ? el("p", {}, "No transaction is open on a coordinator this node leads.") : table("Open transactions", [
      ["Transactional id", (t) => t.transactional_id],
      ["Producer id", (t) => t.producer_id, true],
      ["Epoch", (t) => t.producer_epoch, true],
      ["State", (t) => t.state],
      ["Age", (t) => el("span", { class: t.age_seconds * 1000 > t.timeout_ms ? "bad" : null }, duration(t.age_seconds)), true],
      ["Timeout", (t) => duration(t.timeout_ms / 1000), true],
      ["Partitions", (t) => t.partitions.map((p) => `${p.topic}-${p.partition}`).join(", ") || "–"],
    ], transactions, { id: "transactions" }),
  ];
}

// Time lag against the retention edge (time lag + headroom: the age at which retention
// deletes the oldest unread record), in seconds on one axis: where the two lines meet,
// unread records are gone. The dotted line carries the current trend forward.
function lagChart(name, history) {
  const W = 720;
  const H = 260;
  const pad = { left: 56, right: 12, top: 12, bottom: 28 };
  const samples = history.samples;
  const t0 = samples[0].at_ms;
  const tEnd = samples[samples.length - 1].at_ms;
  const span = Math.max(tEnd - t0, history.interval_ms || 1000);
  // An at-risk group gets a third more room on the right for its trend carried forward.
  const loss = history.projected_loss_seconds;
  const ahead = loss !== null && loss > 0 ? Math.min(loss * 1000, span / 2) : 0;
  const domain = span + ahead;
  const edge = samples.map((s) => (s.retention_headroom_seconds === null ? null : s.lag_seconds + s.retention_headroom_seconds));
  const top = Math.max(1, ...samples.map((s) => s.lag_seconds), ...edge.filter((e) => e !== null)) * 1.08;
  const x = (ms) => pad.left + ((ms - t0) / domain) * (W - pad.left - pad.right);
  const y = (v) => pad.top + (1 - v / top) * (H - pad.top - pad.bottom);
  const points = (values) => values.map(([ms, v]) => `${x(ms).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
  const title = `Lag in seconds of group ${name} over the last ${duration(span / 1000)}`;
  const chart = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": "lag-chart-title", id: "lag-chart" },
    svg("title", { id: "lag-chart-title" }, document.createTextNode(title)));
  for (let i = 0; i <= 4; i += 1) {
    const v = (top / 4) * i;
    chart.append(svg("line", { class: "axis", x1: pad.left, x2: W - pad.right, y1: y(v), y2: y(v) }));
    chart.append(svg("text", { x: pad.left - 6, y: y(v) + 4, "text-anchor": "end" }, document.createTextNode(duration(v))));
  }
  chart.append(svg("text", { x: pad.left, y: H - 8 }, document.createTextNode(time(t0))));
  chart.append(svg("text", { x: x(tEnd), y: H - 8, "text-anchor": ahead > 0 ? "middle" : "end" }, document.createTextNode(time(tEnd))));
  const edgePoints = samples.map((s, i) => [s.at_ms, edge[i]]).filter(([, e]) => e !== null);
  if (edgePoints.length > 0) {
    chart.append(svg("polyline", { class: "edge", points: points(edgePoints), "data-series": "retention-edge" }));
  }
  chart.append(svg("polyline", { class: "lag", points: points(samples.map((s) => [s.at_ms, s.lag_seconds])), "data-series": "lag-seconds", "data-points": String(samples.length) }));
  const last = samples[samples.length - 1];
  if (ahead > 0) {
    // The trend carried forward, and where it meets the retention edge when that is
    // on the chart.
    const rise = Math.min(1, history.trend_seconds_per_second) * (ahead / 1000);
    chart.append(svg("polyline", { class: "projection", "data-series": "projection", points: points([[last.at_ms, last.lag_seconds], [last.at_ms + ahead, Math.min(top, last.lag_seconds + rise)]]) }));
    const lastEdge = edge[edge.length - 1];
    if (lastEdge !== null) {
      chart.append(svg("polyline", { class: "edge", points: points([[last.at_ms, lastEdge], [last.at_ms + ahead, lastEdge]]) }));
    }
    const label = loss * 1000 <= ahead ? "unread records deleted" : `deleted in ${duration(loss)} →`;
    chart.append(svg("text", { x: W - pad.right, y: pad.top + 12, "text-anchor": "end", class: "risk-label" }, document.createTextNode(label)));
  }
  return el("figure", {},
    chart,
    el("figcaption", {},
      el("span", { class: "legend" },
        el("span", { class: "swatch-lag" }, "━ lag (age of the oldest unread record)"),
        el("span", { class: "swatch-edge" }, "╍ retention edge (lag + headroom)"),
        history.at_risk ? el("span", { class: "swatch-lag" }, "┈ at the current trend") : null),
      ` ${samples.length} samples, one every ${duration((history.interval_ms || 0) / 1000)}; the table below has every figure.`));
}

// --- actions (only with admin.console.actions.enabled=true) ----------------------

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Tidelog-Console": "1" },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  let answer;
  try { answer = JSON.parse(text); } catch (_) { answer = { error: text.trim() }; }
  if (!response.ok) throw new Error(answer.error || `${path} answered ${response.status}`);
  return answer;
}

function configsOf(text) {
  const configs = {};
  for (const line of text.split("\n").map((l) => l.trim()).filter((l) => l)) {
    const at = line.indexOf("=");
    if (at <= 0) throw new Error(`not name=value: ${line}`);
    configs[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return configs;
}

// A form whose "Check" sends the action as a check only (validate_only / dry_run) and
// shows what it would do; only then does the confirming button appear, and it sends the
// same request for real. `spec.request(check)` gives [path, body]; `spec.plan(answer)`
// and `spec.done(answer)` say what the check found and what was done.
function checkedForm(spec) {
  const result = el("p", { id: `${spec.id}-result`, class: "result", role: "status" });
  const check = el("button", { type: "submit", id: `${spec.id}-check` }, "Check");
  const form = el("form", { "aria-label": spec.label, id: `${spec.id}-form` },
    el("strong", { class: "form-title" }, spec.label), spec.fields, check, result);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    result.replaceChildren("Checking…");
    try {
      const [path, body] = spec.request(true);
      const plan = await post(path, body);
      const confirm = el("button", { type: "button", id: `${spec.id}-confirm` }, spec.confirmText(plan));
      confirm.addEventListener("click", async () => {
        confirm.disabled = true;
        try {
          const [again, real] = spec.request(false);
          result.replaceChildren(spec.done(await post(again, real)));
          render();
        } catch (error) {
          result.replaceChildren(el("span", { class: "bad" }, `Not done: ${error.message}`));
        }
      });
      result.replaceChildren(spec.plan(plan), " ", confirm);
    } catch (error) {
      result.replaceChildren(el("span", { class: "bad" }, `Refused: ${error.message}`));
    }
  });
  return form;
}

const topicPath = (topic) => `/v1/topics/${encodeURIComponent(topic)}`;

function createTopicForm() {
  const name = el("input", { id: "create-name", required: "", autocomplete: "off" });
  const partitions = el("input", { id: "create-partitions", type: "number", min: "1", value: "1" });
  const replication = el("input", { id: "create-replication", type: "number", min: "1", placeholder: "broker default" });
  const configs = el("textarea", { id: "create-configs", rows: "2", placeholder: "retention.ms=86400000" });
  return checkedForm({
    id: "create",
    label: "Create a topic",
    fields: [el("label", {}, "New topic", name), el("label", {}, "Partitions", partitions),
      el("label", {}, "Replication factor", replication), el("label", {}, "Configs (name=value lines)", configs)],
    request: (check) => {
      const body = { name: name.value.trim(), partitions: Number(partitions.value || -1), configs: configsOf(configs.value), validate_only: check };
      if (replication.value) body.replication_factor = Number(replication.value);
      return ["/v1/topics", body];
    },
    confirmText: (plan) => `Create topic ${plan.name}`,
    plan: (plan) => `Creates ${plan.name}: ${plan.partitions} partition(s), replication factor ${plan.replication_factor}${Object.keys(plan.configs).length ? `, ${Object.entries(plan.configs).map(([k, v]) => `${k}=${v}`).join(", ")}` : ""}.`,
    done: (created) => `Created topic ${created.name} with ${created.partitions} partition(s).`,
  });
}

// The topic the change forms act on: a list of this cluster's topics, read again when
// the list is opened (a topic created meanwhile is there).
function topicChooser(id, topics) {
  const options = (names) => names.map((t) => el("option", { value: t }, t));
  const chooser = el("select", { id, required: "" }, options(topics));
  chooser.addEventListener("focus", async () => {
    const chosen = chooser.value;
    const names = (await api("/v1/topics")).topics.filter((t) => !t.internal).map((t) => t.name);
    chooser.replaceChildren(...options(names));
    if (names.includes(chosen)) chooser.value = chosen;
  });
  return chooser;
}

function addPartitionsForm(topics) {
  const topic = topicChooser("partitions-topic", topics);
  const count = el("input", { id: "partitions-count", type: "number", min: "1", required: "" });
  return checkedForm({
    id: "partitions",
    label: "Add partitions",
    fields: [el("label", {}, "Topic", topic), el("label", {}, "New partition count", count)],
    request: (check) => [`${topicPath(topic.value)}/partitions`, { count: Number(count.value), validate_only: check }],
    confirmText: (plan) => `Add ${plan.partitions - plan.partitions_before} partition(s) to ${plan.topic}`,
    plan: (plan) => `${plan.topic} goes from ${plan.partitions_before} to ${plan.partitions} partitions; keyed records of the new partitions' keys go to other partitions from now on.`,
    done: (done) => `${done.topic} has ${done.partitions} partitions.`,
  });
}

function alterConfigsForm(topics) {
  const topic = topicChooser("configs-topic", topics);
  const set = el("textarea", { id: "configs-set", rows: "2", placeholder: "retention.ms=86400000" });
  const remove = el("input", { id: "configs-delete", autocomplete: "off", placeholder: "cleanup.policy, segment.bytes" });
  const changes = (configs) => Object.entries(configs).map(([k, v]) => `${k}=${v}`).join(", ") || "the broker defaults";
  return checkedForm({
    id: "configs",
    label: "Alter topic configs",
    fields: [el("label", {}, "Topic", topic), el("label", {}, "Set (name=value lines)", set), el("label", {}, "Delete (names)", remove)],
    request: (check) => [`${topicPath(topic.value)}/configs`, {
      set: configsOf(set.value),
      delete: remove.value.split(",").map((n) => n.trim()).filter((n) => n),
      validate_only: check,
    }],
    confirmText: (plan) => `Change the configs of ${plan.topic}`,
    plan: (plan) => `${plan.topic}: overrides ${changes(plan.configs_before)} become ${changes(plan.configs)}.`,
    done: (done) => `${done.topic} now has ${changes(done.configs)}.`,
  });
}

function deleteRecordsForm(topics) {
  const topic = topicChooser("delete-topic", topics);
  const partition = el("input", { id: "delete-partition", type: "number", min: "0", value: "0", required: "" });
  const before = el("input", { id: "delete-before", type: "number", min: "-1", value: "-1", required: "" });
  const summary = (plan, verb) => plan.partitions.map((p) =>
    `${plan.topic}-${p.partition}: ${verb} ${num(p.records_deleted)} record(s), log start ${num(p.log_start_offset)} → ${num(p.new_log_start_offset)}`).join("; ");
  return checkedForm({
    id: "delete",
    label: "Delete records",
    fields: [el("label", {}, "Topic", topic), el("label", {}, "Partition", partition),
      el("label", {}, "Before offset (-1: all)", before)],
    request: (check) => [`${topicPath(topic.value)}/delete-records`, {
      offsets: { [partition.value]: Number(before.value) }, dry_run: check,
    }],
    confirmText: (plan) => `Delete ${num(plan.partitions.reduce((n, p) => n + p.records_deleted, 0))} record(s) for good`,
    plan: (plan) => `${summary(plan, "deletes")}.`,
    done: (done) => `${summary(done, "deleted")}.`,
  });
}

function resetOffsetsForm(group, topics) {
  const topic = el("input", { id: "reset-topic", required: "", autocomplete: "off", list: "reset-topics", value: topics[0] || "" });
  const to = el("select", { id: "reset-to" }, [["earliest", "the earliest offset"], ["latest", "the latest offset"],
    ["offset", "an offset"], ["timestamp", "a time (epoch ms)"], ["shift-by", "a shift of the committed offset"]]
    .map(([value, text]) => el("option", { value }, text)));
  const value = el("input", { id: "reset-value", type: "number", placeholder: "for offset, time or shift" });
  const partitions = el("input", { id: "reset-partitions", autocomplete: "off", placeholder: "all" });
  const rows = (plan) => table(`New offsets of ${plan.group}`, [
    ["Partition", (p) => p.partition, true],
    ["Committed", (p) => (p.committed_offset === null ? "–" : num(p.committed_offset)), true],
    ["New", (p) => num(p.new_offset), true],
    ["Log start", (p) => num(p.log_start_offset), true],
    ["Log end", (p) => num(p.log_end_offset), true],
  ], plan.partitions, { id: "reset-plan" });
  return checkedForm({
    id: "reset",
    label: `Reset the offsets of ${group}`,
    fields: [el("datalist", { id: "reset-topics" }, topics.map((t) => el("option", { value: t }))),
      el("label", {}, "Topic", topic), el("label", {}, "To", to), el("label", {}, "Value", value),
      el("label", {}, "Partitions (comma list)", partitions)],
    request: (check) => {
      const body = { topic: topic.value.trim(), to: to.value, dry_run: check,
        partitions: partitions.value.split(",").map((p) => p.trim()).filter((p) => p).map(Number) };
      if (value.value !== "") body.value = Number(value.value);
      return [`/v1/groups/${encodeURIComponent(group)}/reset-offsets`, body];
    },
    confirmText: (plan) => `Commit these offsets for ${plan.group}`,
    plan: (plan) => el("span", {}, `Group ${plan.group} is ${plan.state}; the new offsets:`, rows(plan)),
    done: (done) => el("span", {}, `Committed for ${done.group}:`, rows(done)),
  });
}

let consoleInfo = null;

// Built once per route, outside #view, so the refresh keeps what was typed.
async function renderActions(route) {
  const section = document.getElementById("actions");
  const acting = route === "topics" || route.startsWith("group/");
  if (!acting) {
    section.replaceChildren();
    delete section.dataset.route;
    return;
  }
  if (!consoleInfo.actions_enabled || section.dataset.route === route) return;
  section.dataset.route = route;
  if (route === "topics") {
    const topics = (await api("/v1/topics")).topics.filter((t) => !t.internal).map((t) => t.name);
    const forms = [createTopicForm()];
    if (topics.length) forms.push(addPartitionsForm(topics), alterConfigsForm(topics), deleteRecordsForm(topics));
    section.replaceChildren(...forms);
  } else {
    const group = route.slice("group/".length);
    const { groups } = await api("/v1/groups");
    const known = groups.find((g) => g.group === group);
    const topics = known ? [...new Set(known.partitions.map((p) => p.topic))] : [];
    section.replaceChildren(resetOffsetsForm(group, topics));
  }
}

// --- the page ------------------------------------------------------------------

async function renderRisks(shownGroup) {
  const risks = document.getElementById("risks");
  const history = await api("/v1/lag-history");
  // The group on screen has its own banner above its chart.
  const atRisk = history.groups.filter((g) => g.at_risk && g.group !== shownGroup);
  risks.replaceChildren(...atRisk.map((g) => el("div", { class: "banner", role: "alert", "data-group": g.group },
    el("a", { href: `#group/${encodeURIComponent(g.group)}` }, g.risk_message))));
}

let rendering = false;

async function render() {
  if (rendering) return;
  rendering = true;
  const status = document.getElementById("status");
  const route = decodeURIComponent(location.hash.slice(1)) || "cluster";
  for (const link of document.querySelectorAll("nav a")) {
    const section = route.startsWith("tail/") ? "topics" : route.startsWith("group/") ? "groups" : route;
    if (section === link.dataset.view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  try {
    if (consoleInfo === null) consoleInfo = await api("/v1/console");
    await renderRisks(route.startsWith("group/") ? route.slice("group/".length) : null);
    await renderActions(route);
    let content;
    if (route.startsWith("group/")) content = await groupView(route.slice("group/".length));
    else if (route.startsWith("tail/")) {
      // tail/<topic>/<partition>[/before|from/<offset>]: topic names hold no "/".
      const [, topic, partition, mode, offset] = route.split("/");
      const page = (mode === "before" || mode === "from") && /^\d+$/.test(offset || "") ? [mode, Number(offset)] : null;
      content = await tailView(topic, partition, page);
    }
    else if (route === "topics") content = await topicsView();
    else if (route === "groups") content = await groupsView();
    else if (route === "transactions") content = await transactionsView();
    else content = await clusterView();
    const view = document.getElementById("view");
    const open = new Set([...view.querySelectorAll("details[open]")].map((d) => d.dataset.topic));
    view.replaceChildren(...content.flat().filter((c) => c));
    for (const d of view.querySelectorAll("details")) if (open.has(d.dataset.topic)) d.open = true;
    const who = consoleInfo.principal ? ` · signed in as ${consoleInfo.principal}` : "";
    status.textContent = `updated ${new Date().toLocaleTimeString()}${who}`;
  } catch (error) {
    status.textContent = `not updated: ${error.message}`;
  } finally {
    rendering = false;
  }
}

window.addEventListener("hashchange", render);
render();
setInterval(render, REFRESH_MS);
