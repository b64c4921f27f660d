// Draws vram report's page from the JSON that `vram report` put inside it (src/vram/report/report_data.hpp
// says what each key holds). The memory chart is uPlot's where the page carries it, else a static SVG made
// by the C++ side; the allocator's state at a moment is drawn here, cell by cell, to scale.
(function () {
  'use strict';

  const data = JSON.parse(document.getElementById('vram-data').textContent);
  const colours = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22'];
  const check = { chart_library: data.chart_library, traces: [], errors: window.vramErrors };
  const pending = [];  // work the self-check waits for

  // ---- small helpers -------------------------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function bytes(n) {
    if (n === null || n === undefined) return '—';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let v = n, u = 0;
    while (Math.abs(v) >= 1024 && u < units.length - 1) { v /= 1024; ++u; }
    return (u === 0 ? String(v) : v.toPrecision(v >= 100 ? 4 : 3)) + ' ' + units[u];
  }

  // An axis tick: no trailing zeros, so that 800 MiB and 1000 MiB read alike.
  function tickBytes(n) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let v = n, u = 0;
    while (Math.abs(v) >= 1024 && u < units.length - 1) { v /= 1024; ++u; }
    return String(Number(v.toPrecision(4))) + ' ' + units[u];
  }

  function duration(s) {
    if (s < 1) return (s * 1000).toPrecision(3) + ' ms';
    if (s < 120) return s.toPrecision(4) + ' s';
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = Math.floor(s % 60);
    return h > 0 ? `${h}h${String(m).padStart(2, '0')}m` : `${m}m${String(r).padStart(2, '0')}s`;
  }

  function highest(values) {
    let m = 0;
    for (const v of values) if (v > m) m = v;
    return m;
  }

  // ---- the memory chart ----------------------------------------------------------------------------------

  // Wheel zooms around the cursor, shift-drag pans, a double click shows the whole trace (uPlot's own).
  function zoomAndPan(lo, hi) {
    return {
      hooks: {
        ready: (u) => {
          const over = u.over;
          over.addEventListener('wheel', (e) => {
            e.preventDefault();
            const { min, max } = u.scales.x;
            const at = u.posToVal(u.cursor.left, 'x');
            const f = e.deltaY < 0 ? 0.75 : 1 / 0.75;
            let a = at - (at - min) * f, b = at + (max - at) * f;
            if (b - a >= hi - lo) { a = lo; b = hi; }
            u.setScale('x', { min: Math.max(lo, a), max: Math.min(hi, b) });
          }, { passive: false });
          over.addEventListener('mousedown', (e) => {
            if (!e.shiftKey) return;
            e.stopPropagation();
            e.preventDefault();
            const x0 = e.clientX, { min, max } = u.scales.x;
            const per = (max - min) / u.bbox.width * devicePixelRatio;
            const move = (m) => {
              let d = (x0 - m.clientX) * per;
              d = Math.max(lo - min, Math.min(hi - max, d));
              u.setScale('x', { min: min + d, max: max + d });
            };
            const up = () => { document.removeEventListener('mousemove', move); document.removeEventListener('mouseup', up); };
            document.addEventListener('mousemove', move);
            document.addEventListener('mouseup', up);
          }, true);
        },
      },
    };
  }

  function undelta(deltas) {
    const out = new Array(deltas.length);
    let v = 0;
    for (let i = 0; i < deltas.length; ++i) out[i] = (v += deltas[i]);
    return out;
  }

  // The buckets of [i0, i1) in at most `most` points: the highest of each run of buckets, at the run's start.
  function reduce(times, lines, i0, i1, most) {
    const group = Math.max(1, Math.ceil((i1 - i0) / most));
    const xs = [], ys = lines.map(() => []);
    for (let i = i0; i < i1; i += group) {
      xs.push(times[i]);
      const end = Math.min(i1, i + group);
      lines.forEach((l, k) => {
        let m = 0;
        for (let j = i; j < end; ++j) if (l.values[j] > m) m = l.values[j];
        ys[k].push(m);
      });
    }
    return [xs].concat(ys);
  }

  function memoryChart(t, box, view) {
    const s = t.series;
    if (!s || !s.buckets) { box.append(el('p', { class: 'note', text: 'The trace has no allocation rows.' })); return null; }
    const times = new Array(s.buckets);
    for (let i = 0; i < s.buckets; ++i) times[i] = s.start_seconds + i * s.bucket_seconds;
    const lines = [{ name: 'live', values: undelta(s.live.high), colour: '#333333' }]
      .concat(s.reserved.map((r, i) => ({ name: r.policy + ' reserved', values: undelta(r.high), colour: colours[i % colours.length] })));
    const result = { series: lines.length, peaks: {} };
    for (const l of lines) result.peaks[l.name] = highest(l.values);

    if (typeof uPlot === 'undefined') {
      box.innerHTML = t.static_chart || '';
      box.append(el('p', { class: 'note', text: 'A static chart: this vram was built without its chart library. ' +
        'Run scripts/setup where npm is installed (it runs `npm ci` in web/), rebuild, and run vram report again ' +
        'for zoom, pan and a cursor that reads the values.' }));
      result.drawn = box.querySelectorAll('polyline.series').length;
      result.points = (box.querySelector('polyline.series')?.getAttribute('points') || '').trim().split(' ').length;
      return result;
    }
    const lo = times[0], hi = Math.max(t.seconds, times[times.length - 1]);
    const perView = 2000;  // points a line in any view: the buckets in view, reduced keeping each peak
    const visible = (min, max) => {
      const i0 = Math.max(0, Math.floor((min - s.start_seconds) / (s.bucket_seconds || 1)));
      const i1 = Math.min(s.buckets, Math.ceil((max - s.start_seconds) / (s.bucket_seconds || 1)) + 1);
      return reduce(times, lines, Math.min(i0, s.buckets - 1), Math.max(i1, i0 + 1), perView);
    };
    let down = null;
    const opts = {
      width: Math.max(600, box.clientWidth || 1000),
      height: 340,
      scales: { x: { time: false, min: lo, max: hi, range: (u, a, b) => [a, b] } },
      // A double click shows the whole trace (below): uPlot's own would fit the points of the current view.
      cursor: { drag: { x: true, y: false }, bind: { dblclick: () => null } },
      legend: { live: true },
      axes: [
        { label: "seconds from the trace's start" },
        // Ticks at 1, 2 or 5 times a binary unit (20 GiB, 50 MiB), which read as round figures.
        { label: 'bytes', size: 80, values: (u, ticks) => ticks.map(tickBytes),
          incrs: [1, 1024, 1048576, 1073741824, 1099511627776].flatMap((unit) => [1, 2, 5, 10, 20, 50, 100, 200, 500].map((m) => m * unit)) },
      ],
      series: [{ label: 'time', value: (u, v) => (v === null ? '—' : duration(v)) }].concat(lines.map((l) => ({
        label: l.name, stroke: l.colour, width: l.name === 'live' ? 2 : 1.5, value: (u, v) => bytes(v),
      }))),
      hooks: {
        setScale: [(u, key) => {
          // A new view: the buckets in it, reduced again, so that zooming in shows more detail. After this
          // redraw, not inside it (uPlot is still drawing the points it had); then the same range again, so
          // that uPlot takes the new points' extent (setData alone keeps the old one).
          if (key !== 'x' || u.vramQueued) return;
          const { min, max } = u.scales.x;
          if (u.vramRange && u.vramRange[0] === min && u.vramRange[1] === max) return;
          u.vramQueued = true;
          setTimeout(() => {
            u.vramQueued = false;
            u.vramRange = [min, max];
            u.setData(visible(min, max), false);
            u.setScale('x', { min, max });
          }, 0);
        }],
        draw: [(u) => {
          // The moments the page can show, as thin lines; the one shown, red.
          const ctx = u.ctx;
          ctx.save();
          for (const m of t.moments) {
            const x = Math.round(u.valToPos(m.seconds, 'x', true));
            if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
            const shown = m === view.moment;
            ctx.strokeStyle = shown ? '#d62728' : 'rgba(0,0,0,0.18)';
            ctx.lineWidth = shown ? 2 : 1;
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
          }
          ctx.restore();
        }],
      },
      plugins: [zoomAndPan(lo, hi)],
    };
    const u = new uPlot(opts, visible(lo, hi), box);
    u.over.addEventListener('dblclick', () => u.setScale('x', { min: lo, max: hi }));
    // A click (not a drag) shows the moment nearest to it.
    u.over.addEventListener('mousedown', (e) => { down = e.clientX; });
    u.over.addEventListener('click', (e) => {
      if (down !== null && Math.abs(e.clientX - down) > 3) return;
      const at = u.posToVal(u.cursor.left, 'x');
      let best = null;
      for (const m of t.moments) if (best === null || Math.abs(m.seconds - at) < Math.abs(best.seconds - at)) best = m;
      if (best) view.show(best);
    });
    view.redraw = () => u.redraw(false);
    box.append(el('p', { class: 'note', text: 'Drag to zoom, wheel to zoom around the cursor, shift-drag to pan, ' +
      'double-click for the whole trace; click to show the allocators at the nearest marked moment. Each point is ' +
      'the highest value in its slice of time, so every peak shows at its exact height.' }));
    result.drawn = u.series.length - 1;
    result.points = u.data[0].length;
    // For the self-check: the first sixteenth of the trace, as a zoom shows it (the buckets in view, reduced
    // again once uPlot has applied the scale), then the whole trace again.
    pending.push(new Promise((resolve) => {
      u.setScale('x', { min: lo, max: lo + (hi - lo) / 16 });
      setTimeout(() => setTimeout(() => {
        result.zoom_points = u.data[0].length;
        u.setScale('x', { min: lo, max: hi });
        setTimeout(() => setTimeout(() => {
          result.points_after_zoom = u.data[0].length;
          result.last_x = u.data[0][u.data[0].length - 1];
          result.drawn_to = u.series[1].idxs ? u.series[1].idxs[1] : null;  // the last point uPlot drew
          resolve();
        }, 0), 0);
      }, 0), 0);
    }));
    // What the chart itself holds, for the browser test.
    for (let k = 1; k < u.series.length; ++k) result.peaks[u.series[k].label] = highest(u.data[k]);
    return result;
  }

  // ---- the allocators' state at a moment -----------------------------------------------------------------

  const cellsPerRow = 480, cellWidth = 2, rowHeight = 7;

  function decode(cells) {
    const out = [];
    if (!cells) return out;
    for (const token of cells.split(' ')) {
      const star = token.indexOf('*');
      const digit = Number(star < 0 ? token : token.slice(0, star));
      const n = star < 0 ? 1 : Number(token.slice(star + 1));
      for (let i = 0; i < n; ++i) out.push(digit);
    }
    return out;
  }

  function shade(digit) {
    // 0: held with nothing live (orange); 8: all live (blue); between, the live share in eighths.
    const a = [0xf4, 0xa2, 0x61], b = [0x1f, 0x77, 0xb4], f = digit / 8;
    return `rgb(${a.map((v, i) => Math.round(v + (b[i] - v) * f)).join(',')})`;
  }

  function drawState(state, cellBytes, box) {
    const figure = el('div', { class: 'map' });
    const caption = el('div', { class: 'caption' });
    caption.append(el('b', { text: state.policy }));
    if (state.held_bytes === undefined) {
      caption.append(': not reached (its replay ended before this moment).');
      figure.append(caption);
      box.append(figure);
      return false;
    }
    const ratio = state.live_bytes > 0 ? (state.reserved_bytes / state.live_bytes).toFixed(3) + 'x live' : '';
    // The map draws the strips at their addresses; the allocator counts what it holds of the device. They differ
    // where a handle is mapped at two addresses (aliasing), where held memory is not mapped at this moment, and
    // where the device rounds cudaMalloc's blocks up to whole 2 MiB pages.
    const drawn = state.held_bytes, counted = state.reserved_bytes;
    const mapped = state.strips.some((s) => s[2] === 'mapped');
    const why = drawn === counted ? ''
      : mapped && drawn > counted ? ', as memory mapped at two addresses is drawn at both'
      : mapped ? ', as the handles it holds unmapped (spare) are not drawn'
      : drawn > counted ? ', as the device holds cudaMalloc\'s blocks in whole 2 MiB pages' : '';
    const held = `: holds ${bytes(counted)} of the device${ratio ? ' (' + ratio + ')' : ''}` +
      (drawn === counted ? '' : `; the map draws ${bytes(drawn)}${why}`);
    caption.append(held + `; live ${bytes(state.held_live_bytes)}; free inside ${bytes(state.free_bytes)} in ` +
      `${state.free_pieces} piece${state.free_pieces === 1 ? '' : 's'}, the largest ${bytes(state.largest_free)}; ` +
      `${bytes(state.device_free)} of ${bytes(state.device_total)} free on the device.`);
    if (state.failed) caption.append(' ', el('span', { class: 'failed', text: 'This row failed here.' }));
    else if (state.failed_before) caption.append(' ', el('span', { class: 'failed', text: 'Failed earlier.' }));
    figure.append(caption);

    // Strips flow left to right, row by row, one empty cell between two strips.
    const strips = state.strips.map(([va, size, kind, regions, cells]) => ({ va, size, kind, regions, cells: decode(cells) }));
    let at = 0;
    for (const s of strips) { s.start = at; at += s.cells.length + 1; }
    const rows = Math.max(1, Math.ceil(at / cellsPerRow));
    const canvas = el('canvas');
    const ratio2 = window.devicePixelRatio || 1;
    canvas.width = cellsPerRow * cellWidth * ratio2;
    canvas.height = rows * rowHeight * ratio2;
    canvas.style.width = cellsPerRow * cellWidth + 'px';
    canvas.style.height = rows * rowHeight + 'px';
    const ctx = canvas.getContext('2d');
    ctx.scale(ratio2, ratio2);
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, cellsPerRow * cellWidth, rows * rowHeight);
    for (const s of strips) {
      for (let i = 0; i < s.cells.length; ++i) {
        const p = s.start + i, r = Math.floor(p / cellsPerRow), c = p % cellsPerRow;
        ctx.fillStyle = shade(s.cells[i]);
        ctx.fillRect(c * cellWidth, r * rowHeight, cellWidth, rowHeight - 1);
      }
    }
    const hover = el('div', { class: 'hover' });
    canvas.addEventListener('mousemove', (e) => {
      const rect = canvas.getBoundingClientRect();
      const p = Math.floor((e.clientY - rect.top) / rowHeight) * cellsPerRow + Math.floor((e.clientX - rect.left) / cellWidth);
      const s = strips.find((x) => p >= x.start && p < x.start + x.cells.length);
      if (!s) { hover.textContent = ''; return; }
      const off = (p - s.start) * cellBytes;
      const what = { segment: 'a segment (cudaMalloc)', page: 'a 2 MiB page of small cudaMalloc blocks',
        mapped: `${s.regions} mapped handle${s.regions === 1 ? '' : 's'}` }[s.kind] || s.kind;
      hover.textContent = `${what} at ${s.va}, ${bytes(s.size)}; this cell: +${bytes(off)}, ` +
        `${Math.round(s.cells[p - s.start] / 8 * 100)}% live`;
    });
    figure.append(canvas, hover);
    box.append(figure);
    return true;
  }

  // ---- one trace -----------------------------------------------------------------------------------------

  function renderTrace(t, index) {
    const section = el('section', { id: 'trace-' + index });
    section.append(el('h2', { text: t.name }));
    section.append(el('p', { class: 'meta', text: `${t.events.toLocaleString()} rows (${t.program_rows.toLocaleString()} ` +
      `allocations and frees) over ${duration(t.seconds)}; replayed on ${data.device.name}.` }));
    for (const n of t.notes || []) section.append(el('p', { class: 'note', text: 'note: ' + n }));

    if (t.failures.length === 0) {
      section.append(el('p', { class: 'ok', text: 'No allocation failed under any policy on this device.' }));
    }
    for (const f of t.failures) section.append(el('p', { class: 'alert', text: f.sentence }));
    const unmatched = Math.max(0, ...t.results.map((r) => r.unmatched_frees || 0));
    if (unmatched > 0) {
      section.append(el('p', { class: 'alert', text: `${unmatched.toLocaleString()} row` +
        `${unmatched === 1 ? '' : 's'} of the trace match${unmatched === 1 ? 'es' : ''} no block (a free of no live ` +
        'block, a double free, an allocation at an address still live): the replays skipped ' +
        `${unmatched === 1 ? 'it' : 'them'}; vram check names ${unmatched === 1 ? 'it' : 'them'}.` }));
    }

    // One line per policy: what a person compares first.
    const cards = el('table', { class: 'cards' });
    cards.append(el('tr', {}, ...['policy', 'peak reserved', 'reserved / live', 'fits on', 'driver time', 'failed']
      .map((h) => el('th', { text: h }))));
    const fitTexts = [];
    for (const r of t.results) {
      const fitText = r.fit_bytes === undefined ? 'not run'
        : (r.fit_bytes === null ? 'none up to ' + bytes(data.device.capacity) : bytes(r.fit_bytes));
      cards.append(el('tr', {}, ...[r.policy, bytes(r.peak_reserved_bytes), r.reserved_over_live.toFixed(3) + 'x',
        fitText, (r.driver_share_of_trace * 100).toFixed(2) + '%', String(r.failed_allocations)]
        .map((v) => el('td', { text: v }))));
      fitTexts.push(fitText);
    }
    section.append(el('h3', { text: 'Memory over time' }));
    const chartBox = el('div', { class: 'chart' });
    section.append(chartBox);

    // The moment shown below the chart.
    const view = { moment: null, redraw: () => {} };
    const controls = el('div', { class: 'controls' });
    const select = el('select', { 'aria-label': 'moment' });
    t.moments.forEach((m, i) => {
      const label = `${duration(m.seconds)} (row ${m.row.toLocaleString()})` + (m.labels.length ? ': ' + m.labels.join(', ') : '');
      select.append(el('option', { value: String(i), text: label }));
    });
    const prev = el('button', { type: 'button', text: '◀' }), next = el('button', { type: 'button', text: '▶' });
    controls.append('The allocators at', select, prev, next);
    const maps = el('div');
    view.show = (m) => {
      view.moment = m;
      select.value = String(t.moments.indexOf(m));
      maps.textContent = '';
      let drawn = 0;
      for (const s of m.states) drawn += drawState(s, t.cell_bytes, maps) ? 1 : 0;
      view.drawn = drawn;
      view.redraw();
    };
    select.addEventListener('change', () => view.show(t.moments[Number(select.value)]));
    prev.addEventListener('click', () => view.show(t.moments[Math.max(0, t.moments.indexOf(view.moment) - 1)]));
    next.addEventListener('click', () => view.show(t.moments[Math.min(t.moments.length - 1, t.moments.indexOf(view.moment) + 1)]));

    const result = memoryChart(t, chartBox, view) || { series: 0, drawn: 0, peaks: {} };
    if (t.moments.length > 0) {
      section.append(el('h3', { text: 'Where the memory is' }), controls);
      section.append(el('div', { class: 'legend' },
        el('span', { style: '--c: #1f77b4', text: 'live blocks' }),
        el('span', { style: '--c: #f4a261', text: 'held, nothing live (free in a segment, or mapped and unused)' }),
        el('span', { style: '--c: rgb(138,141,139)', text: 'partly live (the shade is the share)' }),
        el('span', { style: '--c: #ffffff', text: 'a gap: the next segment or run of handles' })));
      section.append(el('p', { class: 'note', text: `Drawn to scale: one cell is ${bytes(t.cell_bytes)}. Each strip is ` +
        'memory held at contiguous addresses: a cudaMalloc segment, a 2 MiB page of small cudaMalloc blocks, or handles ' +
        'mapped side by side. Orange holes are external fragmentation: held, free, and too small or too scattered.' }));
      section.append(maps);
      const failure = t.moments.find((m) => m.labels.some((l) => l.startsWith('first failure')));
      const peak = t.moments.find((m) => m.labels.includes('peak live'));
      view.show(failure || peak || t.moments[0]);
    }
    section.append(cards);
    if (t.curve_svg) {
      section.append(el('h3', { text: "vram's trade-off: memory against driver time" }));
      const fig = el('figure');
      fig.innerHTML = t.curve_svg;
      fig.append(el('figcaption', { text: "vram's pool replayed over a grid of its settings: peak reserved over peak " +
        'live against the modelled time of its driver calls, as a share of the trace. The filled point is the defaults.' }));
      section.append(fig);
    }
    section.append(el('h3', { text: 'The table of vram replay' }), el('pre', { class: 'table', text: t.table }));
    document.getElementById('traces').append(section);
    const entry = { name: t.name, series: result.series, drawn: result.drawn, peaks: result.peaks,
      buckets: t.series ? t.series.buckets : 0, points: result.points || 0,
      moments: t.moments.length, maps: view.drawn || 0, failures: t.failures.length,
      fits: fitTexts, unmatched_said: unmatched,
      curve_settings: (t.curve || []).length,
      curve_points: t.curve_svg ? section.querySelectorAll('circle.point').length : 0 };
    check.traces.push(entry);
    entry.zoom = () => [result.zoom_points || 0, result.points_after_zoom || 0, result.last_x, result.drawn_to];
  }

  // ---- the page ------------------------------------------------------------------------------------------

  const policies = data.traces.length ? data.traces[0].results.map((r) => r.policy) : [];
  document.title = 'vram report: ' + data.traces.map((t) => t.name).join(', ');
  document.getElementById('summary').textContent = `${data.traces.length} trace${data.traces.length === 1 ? '' : 's'}` +
    ` under ${policies.join(', ')}, on ${data.device.name} (${bytes(data.device.capacity)}).` +
    (data.command ? ` Made by: ${data.command}` : '');
  data.traces.forEach(renderTrace);

  if (data.architecture_svg) {
    const details = el('details');
    details.append(el('summary', { text: 'From a call to the hardware: how vram and the allocators it emulates reach the GPU' }));
    const fig = el('div');
    fig.innerHTML = data.architecture_svg;
    details.append(fig, el('p', { class: 'note', text: 'docs/architecture.md in vram\'s source says more.' }));
    document.getElementById('architecture').append(details);
  }

  check.render_ms = performance.now();
  Promise.all(pending).then(() => {
    for (const entry of check.traces) [entry.zoom_points, entry.points_after_zoom, entry.last_x, entry.drawn_to] = entry.zoom();
    if (window.vramErrors.length) {
      const box = document.getElementById('errors');
      box.hidden = false;
      box.textContent = 'The page met errors: ' + window.vramErrors.join('; ');
    }
    document.getElementById('vram-self-check').textContent = JSON.stringify(check);
    window.vramReport = check;
  });
})();
