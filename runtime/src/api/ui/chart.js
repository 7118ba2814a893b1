// wasmon live view: a line chart in plain SVG (no library). `WasmonChart.render(box, series,
// opts)` replaces the chart in `box`; series are {name, from, resolution, data: [v|null]}.
// Each line carries data-series and data-points, so tests (and people) can read what is drawn.
"use strict";

const WasmonChart = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const COLOURS = ["#2f6fd0", "#d0572f", "#2fa36b", "#8e44ad", "#c49a00", "#16a2b8",
    "#c0392b", "#7f8c8d", "#e67e22", "#34495e", "#27ae60", "#d35400", "#1abc9c",
    "#9b59b6", "#f39c12", "#2c3e50"];
  // Most points drawn per line: beyond the chart's width in pixels they are invisible, and
  // a few thousand SVG points per line keep a redraw well under a frame.
  const MAX_POINTS = 1200;

  function svg(tag, attrs) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }

  function niceStep(span, ticks) {
    const raw = span / Math.max(1, ticks);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * mag >= raw) return m * mag;
    return 10 * mag;
  }

  function fmt(v) {
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(1) + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
    if (a >= 100 || v === 0) return v.toFixed(0);
    if (a >= 1) return v.toFixed(2);
    return v.toPrecision(3);
  }

  function clock(t) {
    const d = new Date(t * 1000);
    return d.toTimeString().slice(0, 8);
  }

  // Points of one series as [t, v], nulls dropped, thinned to MAX_POINTS by taking every k-th.
  function points(s) {
    const out = [];
    const k = Math.max(1, Math.ceil(s.data.length / MAX_POINTS));
    for (let i = 0; i < s.data.length; i += k) {
      const v = s.data[i];
      if (v !== null && v !== undefined && isFinite(v)) out.push([s.from + i * s.resolution, v]);
    }
    return out;
  }

  function render(box, series, opts) {
    opts = opts || {};
    const W = opts.width || 760, H = opts.height || 260;
    const L = 56, R = 12, T = 12, B = 28;
    const lines = series.map((s) => ({ name: s.name, pts: points(s) }));
    let t0 = Infinity, t1 = -Infinity, v0 = Infinity, v1 = -Infinity;
    for (const l of lines) for (const [t, v] of l.pts) {
      t0 = Math.min(t0, t); t1 = Math.max(t1, t);
      v0 = Math.min(v0, v); v1 = Math.max(v1, v);
    }
    if (opts.from !== undefined) { t0 = opts.from; t1 = opts.to; }
    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img",
      "data-series-count": String(lines.length) });
    box.replaceChildren(root);
    if (!isFinite(v0)) {
      const t = svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" });
      t.textContent = opts.empty || "no data in this window yet";
      root.appendChild(t);
      return;
    }
    if (v0 === v1) { v0 -= 1; v1 += 1; }
    if (v0 > 0 && v0 < v1 * 0.5) v0 = 0;
    const step = niceStep(v1 - v0, 4);
    v0 = Math.floor(v0 / step) * step;
    v1 = Math.ceil(v1 / step) * step;
    if (t1 <= t0) t1 = t0 + 1;
    const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
    const y = (v) => T + (1 - (v - v0) / (v1 - v0)) * (H - T - B);
    const grid = svg("g", { class: "grid" });
    for (let v = v0; v <= v1 + step / 2; v += step) {
      grid.appendChild(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v) }));
      const lab = svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" });
      lab.textContent = fmt(v);
      grid.appendChild(lab);
    }
    const tstep = niceStep(t1 - t0, 6);
    for (let t = Math.ceil(t0 / tstep) * tstep; t <= t1; t += tstep) {
      grid.appendChild(svg("line", { x1: x(t), x2: x(t), y1: T, y2: H - B, class: "v" }));
      const lab = svg("text", { x: x(t), y: H - B + 16, "text-anchor": "middle" });
      lab.textContent = clock(t);
      grid.appendChild(lab);
    }
    root.appendChild(grid);
    lines.forEach((l, i) => {
      const colour = COLOURS[i % COLOURS.length];
      const attrs = { fill: "none", stroke: colour, "stroke-width": "1.6",
        "data-series": l.name, "data-points": String(l.pts.length),
        points: l.pts.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ") };
      if (l.pts.length > 0) attrs["data-last"] = String(l.pts[l.pts.length - 1][1]);
      const pl = svg("polyline", attrs);
      const title = svg("title");
      title.textContent = l.name;
      pl.appendChild(title);
      root.appendChild(pl);
      if (l.pts.length === 1) {
        const [t, v] = l.pts[0];
        root.appendChild(svg("circle", { cx: x(t), cy: y(v), r: 2.5, fill: colour }));
      }
    });
    // Hover: a vertical rule and the values under the cursor.
    const rule = svg("line", { class: "rule", y1: T, y2: H - B, visibility: "hidden" });
    root.appendChild(rule);
    root.addEventListener("mousemove", (ev) => {
      const r = root.getBoundingClientRect();
      const px = ((ev.clientX - r.left) / r.width) * W;
      const t = t0 + ((px - L) / (W - L - R)) * (t1 - t0);
      rule.setAttribute("x1", px); rule.setAttribute("x2", px);
      rule.setAttribute("visibility", px >= L && px <= W - R ? "visible" : "hidden");
      if (opts.onHover) {
        opts.onHover(t, lines.map((l) => {
          let best = null;
          for (const p of l.pts) if (best === null || Math.abs(p[0] - t) < Math.abs(best[0] - t)) best = p;
          return { name: l.name, value: best ? best[1] : null };
        }));
      }
    });
    return { colours: lines.map((_, i) => COLOURS[i % COLOURS.length]) };
  }

  return { render, fmt, clock, COLOURS };
})();
