'use strict';
// Gatehouse live dashboard: polls this admin listener every second and
// shows what it reads. No other host is ever contacted.
(function () {
  const TOKEN_KEY = 'gatehouse.admin-token';
  const WINDOW_MS = 120000;
  const DASH = '\u2014';
  const MAX_EVENTS = 100;
  const st = {
    prev: null, cur: null, scrapes: 0, history: [], events: [],
    reloads: null, backends: null, writers: null, failovers: new Map(),
  };

  // ---- the admin token: from the URL fragment (never sent to the server)
  // or the form, kept for this tab only.
  function takeFragmentToken() {
    const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
    if (m) {
      try { sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1])); } catch (e) { /* storage off */ }
      history.replaceState(null, '', location.pathname + location.search);
    }
  }
  function token() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; }
  }
  class NeedToken extends Error {}

  async function get(path, json) {
    const headers = {};
    const t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    const r = await fetch(path, { headers, cache: 'no-store', credentials: 'omit' });
    if (r.status === 401) throw new NeedToken(path);
    if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
    return json ? r.json() : r.text();
  }

  // ---- the Prometheus text exposition: name, labels, value; comments ignored.
  function parseValue(s) {
    if (s === '+Inf' || s === 'Inf') return Infinity;
    if (s === '-Inf') return -Infinity;
    return Number(s);
  }
  function parseLine(line) {
    const m = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
    if (!m) return null;
    const name = m[0];
    const labels = {};
    let i = name.length;
    if (line[i] === '{') {
      i++;
      for (;;) {
        while (line[i] === ' ' || line[i] === ',') i++;
        if (i >= line.length) return null;
        if (line[i] === '}') { i++; break; }
        const lm = /^([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"/.exec(line.slice(i));
        if (!lm) return null;
        i += lm[0].length;
        let v = '';
        while (i < line.length && line[i] !== '"') {
          if (line[i] === '\\' && i + 1 < line.length) {
            const c = line[i + 1];
            v += c === 'n' ? '\n' : c;
            i += 2;
          } else {
            v += line[i++];
          }
        }
        if (line[i] !== '"') return null;
        i++;
        labels[lm[1]] = v;
      }
    }
    const rest = line.slice(i).trim().split(/\s+/);
    if (!rest[0]) return null;
    const value = parseValue(rest[0]);
    return Number.isNaN(value) && rest[0] !== 'NaN' ? null : { name, labels, value };
  }
  function seriesKey(name, labels) {
    return name + '{' + Object.keys(labels).sort().map((k) => k + '=' + JSON.stringify(labels[k])).join(',') + '}';
  }
  function matches(labels, where) {
    return !where || Object.keys(where).every((k) => labels[k] === where[k]);
  }
  class Scrape {
    constructor(text, t) {
      this.t = t;
      this.by = new Map();
      this.index = new Map();
      for (const raw of text.split('\n')) {
        const line = raw.trim();
        if (!line || line[0] === '#') continue;
        const s = parseLine(line);
        if (!s) continue;
        if (!this.by.has(s.name)) this.by.set(s.name, []);
        this.by.get(s.name).push(s);
        this.index.set(seriesKey(s.name, s.labels), s.value);
      }
    }
    has(name) { return this.by.has(name); }
    series(name, where) { return (this.by.get(name) || []).filter((s) => matches(s.labels, where)); }
    sum(name, where) {
      if (!this.has(name)) return null;
      return this.series(name, where).reduce((a, s) => a + s.value, 0);
    }
  }

  // A counter's increase since the previous scrape (a reset counts from 0;
  // a series new since then counts whole).
  function increase(name, s) {
    const p = st.prev.index.get(seriesKey(name, s.labels)) || 0;
    return s.value >= p ? s.value - p : s.value;
  }
  function interval() {
    if (!st.prev || !st.cur) return null;
    const dt = (st.cur.t - st.prev.t) / 1000;
    return dt > 0 ? dt : null;
  }
  // Per-second rate of the sum of `name`'s series matching `where`.
  function rate(name, where) {
    const dt = interval();
    if (!st.cur.has(name) || dt === null) return null;
    return st.cur.series(name, where).reduce((a, s) => a + increase(name, s), 0) / dt;
  }
  // Series of `name` summed by the labels `keys`: [{labels, total, rate}].
  function groups(name, keys) {
    const dt = interval();
    const out = new Map();
    for (const s of st.cur.series(name)) {
      const labels = {};
      for (const k of keys) labels[k] = s.labels[k] || '';
      const k = seriesKey('', labels);
      const g = out.get(k) || { labels, total: 0, rate: dt === null ? null : 0 };
      g.total += s.value;
      if (dt !== null) g.rate += increase(name, s) / dt;
      out.set(k, g);
    }
    return [...out.values()];
  }
  // Like histogram_quantile over the last interval's bucket increases:
  // linear within the bucket; null when no sample fell in the interval.
  function quantile(q, base) {
    const name = base + '_bucket';
    if (!st.cur.has(name) || interval() === null) return null;
    const buckets = new Map();
    for (const s of st.cur.series(name)) {
      const le = parseValue(s.labels.le);
      buckets.set(le, (buckets.get(le) || 0) + increase(name, s));
    }
    const les = [...buckets.keys()].filter((le) => !Number.isNaN(le)).sort((a, b) => a - b);
    if (!les.length || les[les.length - 1] !== Infinity) return null;
    const total = buckets.get(Infinity);
    if (!(total > 0)) return null;
    const rank = q * total;
    let lower = 0;
    let below = 0;
    for (let i = 0; i < les.length; i++) {
      const le = les[i];
      const count = buckets.get(le);
      if (count >= rank) {
        if (le === Infinity) return i > 0 ? les[i - 1] : null;
        if (i === 0 && le <= 0) return le;
        const inside = count - below;
        return inside > 0 ? lower + (le - lower) * (rank - below) / inside : le;
      }
      lower = le;
      below = count;
    }
    return null;
  }

  // ---- formatting: numbers only (units stay outside the data-metric element)
  function fmtCount(v) { return v === null || v === undefined ? DASH : String(Math.round(v)); }
  function fmtRate(v) {
    if (v === null || v === undefined || !Number.isFinite(v)) return DASH;
    return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
  }
  function fmtMs(seconds) {
    if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return DASH;
    const v = seconds * 1000;
    return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v >= 1 ? v.toFixed(2) : v.toFixed(3);
  }
  function fmtTime(ms) {
    return new Date(ms).toLocaleTimeString([], { hour12: false });
  }
  function show(metric, text) {
    for (const el of document.querySelectorAll('[data-metric="' + metric + '"]')) {
      if (el.closest('[data-labels]')) continue;
      el.textContent = text;
    }
  }
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v; else e.setAttribute(k, v);
    }
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function labelText(labels) {
    return Object.keys(labels).map((k) => k + '=' + labels[k]).join(',');
  }

  // ---- what the page computes from one scrape
  function databaseConnections(where) {
    const newer = st.cur.has('gatehouse_database_connections');
    const name = newer ? 'gatehouse_database_connections' : 'gatehouse_pool_connections';
    if (!st.cur.has(name)) return { all: null, busy: null, idle: null };
    return {
      all: st.cur.sum(name, where),
      busy: st.cur.sum(name, Object.assign({ state: newer ? 'borrowed' : 'leased' }, where)),
      idle: st.cur.sum(name, Object.assign({ state: 'idle' }, where)),
    };
  }

  function renderCards() {
    const c = st.cur;
    const clients = c.sum('gatehouse_client_connections');
    const db = databaseConnections();
    show('client_connections', fmtCount(clients));
    show('accepted_total', fmtCount(c.sum('gatehouse_client_connections_accepted_total')));
    show('accepted_per_second', fmtRate(rate('gatehouse_client_connections_accepted_total')));
    show('database_connections', fmtCount(db.all));
    show('database_connections_busy', fmtCount(db.busy));
    show('database_connections_idle', fmtCount(db.idle));
    const tps = rate('gatehouse_transactions_total');
    const qps = rate('gatehouse_queries_total');
    const lps = rate('gatehouse_backend_routed_total');
    show('transactions_per_second', fmtRate(tps));
    show('queries_per_second', fmtRate(qps));
    show('leases_per_second', fmtRate(lps));
    show('query_p50_ms', fmtMs(quantile(0.5, 'gatehouse_query_seconds')));
    show('query_p99_ms', fmtMs(quantile(0.99, 'gatehouse_query_seconds')));
    show('database_response_p99_ms', fmtMs(quantile(0.99, 'gatehouse_database_response_seconds')));
    show('lease_wait_p50_ms', fmtMs(quantile(0.5, 'gatehouse_lease_wait_seconds')));
    show('lease_wait_p99_ms', fmtMs(quantile(0.99, 'gatehouse_lease_wait_seconds')));
    show('waiting_clients', fmtCount(c.sum('gatehouse_cluster_waiting_sessions')));
    show('parked_sessions', fmtCount(c.sum('gatehouse_parked_sessions')));
    show('pinned_now', fmtCount(c.sum('gatehouse_sessions_pinned')));
    show('pinned_total', fmtCount(c.sum('gatehouse_pinned_sessions_total')));
    show('errors_total', fmtCount(c.sum('gatehouse_client_errors_total')));
    show('errors_per_second', fmtRate(rate('gatehouse_client_errors_total')));
    show('backends_up', fmtCount(c.sum('gatehouse_backend_up')));
    show('backends_total', fmtCount(c.has('gatehouse_backend_up') ? c.series('gatehouse_backend_up').length : null));
    show('failovers_total', fmtCount(c.sum('gatehouse_cluster_failovers_total')));
    show('reloads_applied', fmtCount(c.sum('gatehouse_reloads_total', { result: 'applied' })));
    show('reloads_refused', fmtCount(c.sum('gatehouse_reloads_total', { result: 'refused' })));
    const kb = (name) => { const r = rate(name); return r === null ? null : r / 1000; };
    show('client_kb_received_per_second', fmtRate(kb('gatehouse_client_bytes_received_total')));
    show('client_kb_sent_per_second', fmtRate(kb('gatehouse_client_bytes_sent_total')));
    show('setups_succeeded_per_second', fmtRate(rate('gatehouse_client_connections_setup_succeeded_total')));
    show('setups_failed_per_second', fmtRate(rate('gatehouse_client_connections_setup_failed_total')));
    st.history.push({ t: Date.now(), client: clients, db: db.all, tps, qps, lps });
    const oldest = Date.now() - WINDOW_MS;
    while (st.history.length && st.history[0].t < oldest) st.history.shift();
  }

  function fillRows(tbody, rows, columns, empty) {
    const out = rows.map((r) => {
      const tr = el('tr', { 'data-labels': labelText(r.labels) });
      for (const col of r.cells) {
        const attrs = {};
        if (col.metric) attrs['data-metric'] = col.metric;
        if (col.cls) attrs.class = col.cls;
        if (col.title) attrs.title = col.title;
        tr.appendChild(el('td', attrs, col.text));
      }
      return tr;
    });
    if (!out.length) {
      const tr = el('tr');
      tr.appendChild(el('td', { colspan: String(columns), class: 'none' }, empty));
      out.push(tr);
    }
    tbody.replaceChildren(...out);
  }

  function renderPins() {
    const totals = groups('gatehouse_pinned_sessions_total', ['reason']);
    const now = st.cur.has('gatehouse_sessions_pinned') ? groups('gatehouse_sessions_pinned', ['reason']) : null;
    const reasons = new Set(totals.map((g) => g.labels.reason).concat((now || []).map((g) => g.labels.reason)));
    const rows = [...reasons].sort().map((reason) => {
      const t = totals.find((g) => g.labels.reason === reason);
      const n = now && now.find((g) => g.labels.reason === reason);
      return {
        labels: { reason },
        cells: [
          { text: reason },
          { metric: 'pinned_now', cls: 'n', text: now ? fmtCount(n ? n.total : 0) : DASH },
          { metric: 'pinned_total', cls: 'n', text: fmtCount(t ? t.total : 0) },
          { metric: 'pinned_per_second', cls: 'n', text: fmtRate(t ? t.rate : interval() === null ? null : 0) },
        ],
      };
    });
    fillRows(document.getElementById('pins'), rows, 4, 'no session pinned yet');
  }

  function renderErrors() {
    const rows = groups('gatehouse_client_errors_total', ['kind', 'condition'])
      .sort((a, b) => b.total - a.total)
      .map((g) => ({
        labels: g.labels,
        cells: [
          { text: g.labels.kind },
          { text: g.labels.condition },
          { metric: 'errors_total', cls: 'n', text: fmtCount(g.total) },
          { metric: 'errors_per_second', cls: 'n', text: fmtRate(g.rate) },
        ],
      }));
    fillRows(document.getElementById('errors'), rows, 4, 'no error yet');
  }

  function renderBackends(list) {
    if (!list) return;
    const rows = [];
    for (const engine of list) {
      for (const b of engine.backends || []) {
        const where = { engine: engine.engine, cluster: b.cluster, backend: b.backend };
        const lag = b.lag_seconds === null || b.lag_seconds === undefined ? DASH : b.lag_seconds.toFixed(3);
        const health = b.up ? 'up' : 'down';
        rows.push({
          labels: where,
          cells: [
            { text: b.cluster },
            { text: b.backend },
            { text: b.role },
            { metric: 'backend_up', cls: b.up ? 'up' : 'down', text: b.fenced ? health + ' (fenced)' : health },
            { metric: 'backend_elected_writer', text: b.elected ? 'elected' : '' },
            { metric: 'backend_leases', cls: 'n', text: fmtCount(b.leases) },
            { metric: 'backend_routed_per_second', cls: 'n', text: fmtRate(rate('gatehouse_backend_routed_total', where)) },
            { metric: 'backend_connections', cls: 'n', text: fmtCount(databaseConnections(where).all) },
            { metric: 'backend_lag_seconds', cls: 'n', text: lag },
            { cls: 'err', text: b.last_error || '', title: b.last_error || '' },
          ],
        });
      }
    }
    fillRows(document.getElementById('backends'), rows, 10, 'no backend');
  }

  // ---- events: failovers (with their times), and what the page saw change.
  function addEvent(t, kind, text, key) {
    if (key) {
      const old = st.events.find((e) => e.key === key);
      if (old) { old.text = text; old.t = t; return; }
    }
    st.events.push({ t, kind, text, key });
    st.events.sort((a, b) => (b.t || 0) - (a.t || 0));
    if (st.events.length > MAX_EVENTS) st.events.length = MAX_EVENTS;
  }
  function noteClusters(list) {
    if (!list) return;
    for (const engine of list) {
      for (const c of engine.clusters || []) {
        for (const f of c.failovers || []) {
          const key = 'failover ' + engine.engine + ' ' + c.cluster + ' ' + f.lost_at;
          let text = c.cluster + ': writer ' + (f.lost || '?') + ' lost';
          text += f.elected
            ? '; ' + f.elected + ' elected' + (typeof f.seconds_without_writer === 'number' ? ' after ' + f.seconds_without_writer.toFixed(2) + ' s' : '')
            : '; no writer yet';
          addEvent(f.lost_at * 1000, 'failover', text, key);
        }
      }
    }
  }
  function noteBackends(list) {
    if (!list) return;
    const now = Date.now();
    const health = new Map();
    const writers = new Map();
    for (const engine of list) {
      for (const b of engine.backends || []) {
        health.set(b.cluster + ' ' + b.backend, b);
        if (b.elected) writers.set(b.cluster, b.backend);
      }
    }
    for (const [k, b] of health) {
      const before = st.backends && st.backends.get(k);
      if (st.backends === null ? !b.up : before && before.up !== b.up) {
        const text = b.cluster + ': ' + b.backend + (b.up ? ' is up' : ' is down' + (b.last_error ? ' (' + b.last_error + ')' : ''));
        addEvent(now, b.up ? 'up' : 'down', text);
      }
    }
    if (st.writers !== null) {
      for (const [cluster, w] of writers) {
        if (st.writers.get(cluster) !== w) addEvent(now, 'writer', cluster + ': writer is now ' + w);
      }
    }
    st.backends = health;
    st.writers = writers;
  }
  function noteStats(stats) {
    if (!stats || !stats.reloads) return;
    const r = stats.reloads;
    if (st.reloads === null) {
      if (r.applied + r.refused > 0) {
        addEvent(null, 'reload', r.applied + ' applied, ' + r.refused + ' refused before this page opened');
      }
    } else {
      if (r.applied > st.reloads.applied) addEvent(Date.now(), 'reload', 'configuration reload applied');
      if (r.refused > st.reloads.refused) addEvent(Date.now(), 'reload', 'configuration reload refused');
    }
    st.reloads = { applied: r.applied, refused: r.refused };
  }
  function renderEvents() {
    const items = st.events.map((e) => {
      const li = el('li', { 'data-labels': 'kind=' + e.kind });
      li.appendChild(el('time', {}, e.t === null ? DASH : fmtTime(e.t)));
      li.appendChild(el('span', { class: 'kind ' + e.kind }, e.kind));
      li.appendChild(document.createTextNode(e.text));
      return li;
    });
    if (!items.length) items.push(el('li', { class: 'none' }, 'no failover, reload or health change seen'));
    document.getElementById('events').replaceChildren(...items);
  }

  // ---- charts on <canvas>: the last 120 s, drawn by hand.
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }
  function drawChart(id, lines) {
    const canvas = document.getElementById(id);
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth;
    const h = canvas.clientHeight;
    if (!w || !h) return;
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const css = getComputedStyle(document.documentElement);
    const left = 40, right = 8, top = 8, bottom = 18;
    const pw = w - left - right, ph = h - top - bottom;
    const now = Date.now();
    let max = 0;
    for (const l of lines) for (const p of st.history) if (p[l.field] !== null && p[l.field] > max) max = p[l.field];
    const ymax = niceMax(max);
    g.font = '11px system-ui, sans-serif';
    g.fillStyle = css.getPropertyValue('--muted');
    g.strokeStyle = css.getPropertyValue('--line');
    g.lineWidth = 1;
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    for (let i = 0; i <= 4; i++) {
      const y = top + ph - (ph * i) / 4;
      g.beginPath(); g.moveTo(left, y + 0.5); g.lineTo(left + pw, y + 0.5); g.stroke();
      const v = (ymax * i) / 4;
      g.fillText(v >= 10 ? v.toFixed(0) : String(Math.round(v * 100) / 100), left - 6, y);
    }
    g.textBaseline = 'top';
    for (let s = 120; s >= 0; s -= 30) {
      g.textAlign = s === 120 ? 'left' : s === 0 ? 'right' : 'center';
      g.fillText(s ? '-' + s + ' s' : 'now', left + pw - (pw * s * 1000) / WINDOW_MS, top + ph + 4);
    }
    const x = (t) => left + pw - (pw * (now - t)) / WINDOW_MS;
    const y = (v) => top + ph - (ph * v) / ymax;
    g.lineWidth = 2;
    g.lineJoin = 'round';
    for (const l of lines) {
      g.strokeStyle = css.getPropertyValue(l.color);
      g.beginPath();
      let drawing = false;
      for (const p of st.history) {
        const v = p[l.field];
        if (v === null || v === undefined) { drawing = false; continue; }
        if (drawing) g.lineTo(x(p.t), y(v)); else g.moveTo(x(p.t), y(v));
        drawing = true;
      }
      g.stroke();
    }
  }
  function drawCharts() {
    drawChart('chart-connections', [{ field: 'client', color: '--client' }, { field: 'db', color: '--db' }]);
    drawChart('chart-throughput', [
      { field: 'tps', color: '--tps' }, { field: 'qps', color: '--qps' }, { field: 'lps', color: '--lps' },
    ]);
  }

  // ---- the loop
  function setStatus(cls, text) {
    const s = document.getElementById('status');
    s.className = 'status ' + cls;
    s.textContent = text;
  }
  function askToken(refused) {
    const form = document.getElementById('login');
    form.hidden = false;
    document.getElementById('login-note').textContent = refused ? 'that token was refused' : '';
    setStatus('token', 'token needed');
    document.getElementById('token-input').focus();
  }
  async function tick() {
    const started = performance.now();
    const [metrics, backends, clusters, stats] = await Promise.allSettled([
      get('/metrics'), get('/api/backends', true), get('/api/clusters', true), get('/api/stats', true),
    ]);
    const all = [metrics, backends, clusters, stats];
    if (all.some((r) => r.status === 'rejected' && r.reason instanceof NeedToken)) {
      askToken(token() !== '');
      return;
    }
    const ok = (r) => (r.status === 'fulfilled' ? r.value : null);
    if (metrics.status === 'fulfilled') {
      st.prev = st.cur;
      st.cur = new Scrape(metrics.value, performance.now());
      st.scrapes += 1;
      renderCards();
      renderPins();
      renderErrors();
      renderBackends(ok(backends));
      drawCharts();
      show('scrapes', String(st.scrapes));
      document.getElementById('updated').textContent = fmtTime(Date.now());
      setStatus('live', 'live');
    } else {
      setStatus('down', 'unreachable: ' + metrics.reason.message);
    }
    noteBackends(ok(backends));
    noteClusters(ok(clusters));
    noteStats(ok(stats));
    renderEvents();
    setTimeout(tick, Math.max(100, 1000 - (performance.now() - started)));
  }

  document.getElementById('login').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const input = document.getElementById('token-input');
    try { sessionStorage.setItem(TOKEN_KEY, input.value.trim()); } catch (e) { /* storage off */ }
    input.value = '';
    document.getElementById('login').hidden = true;
    tick();
  });
  window.addEventListener('resize', drawCharts);
  window.addEventListener('hashchange', () => { takeFragmentToken(); });
  takeFragmentToken();
  tick();
})();
