// One case's series on one hardware: each session's runs and median coloured by its verdict,
// the band it was judged against, the baseline files' entries and their lineage, the step
// changes; a point's session, environment and links; the diff between two picked points.
"use strict";
(function (RN50) {
  const esc = RN50.escape;

  function shownPoints(series, state) {
    return series.points.filter((point) => RN50.pointShown(series, point, state));
  }
  const timeOf = (point) => RN50.plotTime(RN50.session(point.session).started_at);
  const nameOf = (point) => RN50.session(point.session).name;

  // The points where the band changes (and the last): drawn as steps, they draw the whole band.
  function bandChanges(points) {
    const judged = points.filter((point) => point.baseline !== undefined);
    return judged.filter((point, i) => i === 0 || i === judged.length - 1
      || point.baseline !== judged[i - 1].baseline || point.tolerance !== judged[i - 1].tolerance);
  }

  function bandTraces(points) {
    const judged = bandChanges(points);
    if (!judged.length) return [];
    const x = judged.map(timeOf);
    const edge = (sign) => judged.map((point) => point.tolerance === undefined ? null
      : point.baseline * (1 + sign * point.tolerance));
    const line = { shape: "hv", width: 0 };
    return [
      { x, y: edge(-1), mode: "lines", line, hoverinfo: "skip", showlegend: false },
      { x, y: edge(1), mode: "lines", line, fill: "tonexty", fillcolor: "rgba(44,160,44,0.13)",
        name: "baseline +- tolerance", hoverinfo: "skip" },
      { x, y: judged.map((point) => point.baseline), mode: "lines", name: "baseline judged against",
        line: { shape: "hv", color: "black", width: 1.5 }, hoverinfo: "skip" },
    ];
  }

  // Each baseline file's entry, after the entries it replaced (its lineage), as a step line.
  function lineageTraces(series, points) {
    const last = points.length ? timeOf(points[points.length - 1]) : null;
    return series.baselines.map((entry, number) => {
      const steps = (entry.lineage || []).concat([entry]);
      const x = steps.map((old) => RN50.plotTime(old.recorded_at));
      const y = steps.map((old) => old.median_ips);
      const text = steps.map((old, index) => `${esc(old.source || "")} ${old.runs || "?"} runs` + (
        index < steps.length - 1 && old.changed ? `<br>then: ${esc(old.changed)}` : ""));
      if (last && last > x[x.length - 1]) { x.push(last); y.push(entry.median_ips); text.push(""); }
      return { x, y, text, mode: "lines+markers", name: `baseline file ${number + 1} (lineage)`,
               line: { shape: "hv", dash: "dot", color: "#444" }, marker: { symbol: "square", size: 7 },
               hovertemplate: "%{y} " + esc(series.unit) + ", recorded %{x}<br>%{text}<extra></extra>" };
    });
  }

  // Up to this many runs a chart draws each as a dot; beyond, each session's runs are a whisker
  // from its slowest to its fastest run (as report.md's scaling plot draws them): thousands of
  // dots cost the first drawing most of its time and read as one cloud.
  RN50.RUN_DOTS = 2000;

  function whisker(points) {
    const range = (point, pick) => point.runs.length ? pick(...point.runs) : point.value;
    return { type: "data", symmetric: false, thickness: 1, width: 0, color: "rgba(0,0,0,0.35)",
             array: points.map((point) => range(point, Math.max) - point.value),
             arrayminus: points.map((point) => point.value - range(point, Math.min)) };
  }

  function pointTraces(series, points) {
    const runs = { x: [], y: [] };
    for (const point of points) {
      for (const value of point.runs) { runs.x.push(timeOf(point)); runs.y.push(value); }
    }
    const dots = runs.x.length <= RN50.RUN_DOTS;
    const measured = points.filter((point) => point.value !== null && point.value !== undefined);
    const traces = [
      { x: measured.map(timeOf), y: measured.map((point) => point.value), mode: "lines",
        line: { color: "#999", width: 1 }, hoverinfo: "skip", showlegend: false },
    ];
    if (dots) {
      traces.unshift({ x: runs.x, y: runs.y, mode: "markers", name: "one run", hoverinfo: "skip",
                       marker: { size: 4, color: "rgba(0,0,0,0.35)" } });
    }
    const verdicts = [...new Set(measured.map((point) => point.verdict))];
    for (const verdict of verdicts) {
      const mine = measured.filter((point) => point.verdict === verdict);
      traces.push({ x: mine.map(timeOf), y: mine.map((point) => point.value), mode: "markers",
        name: `median, ${verdict}` + (dots ? "" : " (whisker: its runs)"), customdata: mine.map(nameOf),
        error_y: dots ? undefined : whisker(mine),
        marker: { size: measured.length > 200 ? 5 : 9, color: RN50.VERDICT_COLOURS[verdict] || "#555" },
        hovertemplate: "%{customdata}<br>%{y} " + esc(series.unit) + "<extra>" + esc(verdict) + "</extra>" });
    }
    return traces;
  }

  function pickedTrace(picked) {
    return { x: picked.map(timeOf), y: picked.map((point) => point.value), text: ["A", "B"].slice(0, picked.length),
      mode: "markers+text", textposition: "top center", name: "picked", hoverinfo: "skip",
      marker: { size: 18, color: "rgba(0,0,0,0)", line: { color: "#e6a700", width: 3 } } };
  }

  // A confirmed step dashed, an unconfirmed one dotted and named so; a withdrawn one is only
  // listed, with why (tools/history/steps.py).
  function stepShapes(series) {
    const shapes = [], annotations = [];
    for (const step of series.steps.filter((one) => one.state !== "withdrawn")) {
      const before = Date.parse(RN50.session(step.before).started_at);
      const after = Date.parse(RN50.session(step.session).started_at);
      const x = RN50.plotTime(new Date((before + after) / 2).toISOString().slice(0, 19));
      const unconfirmed = step.state === "unconfirmed";
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1,
                    line: { color: "#9467bd", dash: unconfirmed ? "dot" : "dash", width: 1.5 } });
      annotations.push({ x, y: 1, xref: "x", yref: "paper", yanchor: "bottom", showarrow: false,
                         text: RN50.percent(step.change, true) + (unconfirmed ? " unconfirmed" : ""),
                         font: { color: "#9467bd" }, hovertext: esc(step.what_changed) });
    }
    return { shapes, annotations };
  }

  RN50.drawChart = function (series, state) {
    const points = shownPoints(series, state);
    const traces = bandTraces(points).concat(lineageTraces(series, points), pointTraces(series, points),
                                             [pickedTrace(picks(series, state))]);
    const layout = Object.assign({
      margin: { l: 60, r: 20, t: 30, b: 40 }, hovermode: "closest",
      xaxis: { type: "date", title: "session start (UTC)" },
      yaxis: { title: series.unit, rangemode: "tozero" }, legend: { orientation: "h", y: -0.18 },
    }, stepShapes(series));
    Plotly.newPlot("chart", traces, layout, { displayModeBar: false, responsive: true });
    document.getElementById("chart").on("plotly_click", (event) => {
      const name = event.points[0] && event.points[0].customdata;
      if (name) RN50.pick(series, name);
    });
  };

  function picks(series, state) {
    return ["a", "b"].map((key) => series.points.find((point) => nameOf(point) === state[key]))
      .filter(Boolean);
  }

  // A click on a point (chart or table): it becomes A, then B, then B moves to A.
  RN50.pick = function (series, name) {
    const state = RN50.state();
    if (!state.a || state.b) { state.a = state.b || state.a; state.b = name; }
    else state.b = name;
    if (!state.a || state.a === state.b) { state.a = name; delete state.b; }
    RN50.remember(state);
    RN50.showPicks(series, state);
    const picked = picks(series, state), chart = document.getElementById("chart");
    Plotly.restyle(chart, { x: [picked.map(timeOf)], y: [picked.map((point) => point.value)],
                            text: [["A", "B"].slice(0, picked.length)] }, [chart.data.length - 1]);
  };

  // The panels and the table's marks of the picked points (the chart draws them itself).
  RN50.showPicks = function (series, state) {
    const picked = picks(series, state);
    const shown = picked.length ? picked[picked.length - 1] : null;
    document.getElementById("point").innerHTML = shown ? RN50.pointPanel(series, shown)
      : '<p class="muted">Click a point on the chart or a row of the table for its session.</p>';
    document.getElementById("pair").innerHTML = pairPanel(series, picked);
    for (const row of document.querySelectorAll("#points tr.pickable")) {
      row.classList.toggle("picked", picked.some((point) => nameOf(point) === row.dataset.session));
    }
  };

  function pairPanel(series, picked) {
    if (picked.length < 2) {
      return '<p class="muted">Pick two points to see what changed between them, in the gate\'s words.</p>';
    }
    const [a, b] = picked;
    const ratio = a.value && b.value ? `${RN50.number(a.value)} -> ${RN50.number(b.value)} ${esc(series.unit)} (${
      RN50.percent(b.value / a.value - 1, true)})` : "";
    return `<h2>From A to B</h2><p>A: <b>${esc(nameOf(a))}</b> (${esc(RN50.session(a.session).label)}), B: <b>${
      esc(nameOf(b))}</b> (${esc(RN50.session(b.session).label)}) ${ratio}</p>
      <p class="mono" id="pair-diff">${esc(RN50.pairDiff(a, b))}</p><p>${RN50.permalink()}</p>`;
  }

  function pointsTable(series, state) {
    const rows = shownPoints(series, state).slice().reverse().map((point) => {
      const session = RN50.session(point.session), environment = RN50.environment(session);
      return `<tr class="pickable" data-session="${esc(session.name)}"><td>${esc(session.label)}</td>
        <td>${esc(session.name)}</td><td class="number">${point.runs.length}</td>
        <td class="number">${RN50.number(point.value)}</td><td>${RN50.badge(point.verdict)}</td>
        <td class="number">${RN50.percent(point.delta, true)}</td>
        <td>${esc(session.image)}</td><td>${esc(environment.torch)}</td><td>${esc(environment.driver)}</td></tr>`;
    }).join("");
    return `<table id="points"><thead><tr><th>session start</th><th>session</th><th>runs</th>
      <th>${esc(series.unit)}</th><th>verdict</th><th>delta</th><th>image</th><th>torch</th><th>driver</th>
      </tr></thead><tbody>${rows}</tbody></table>`;
  }

  function stepsList(series) {
    if (RN50.data.steps_note) return `<p class="muted">${esc(RN50.data.steps_note)}</p>`;
    if (!series.steps.length) return '<p class="muted">No step change found.</p>';
    return "<ul>" + series.steps.map((step) => `<li class="${step.state}"><a href="${RN50.href({ view: "case", series: series.id,
      a: RN50.session(step.before).name, b: RN50.session(step.session).name })}">${esc(step.line)}</a></li>`).join("") + "</ul>";
  }

  RN50.drawSeries = function (series, state) {
    const view = document.getElementById("view");
    view.innerHTML = `<h1>${esc(series.case_id)} <span class="muted">on ${esc(series.hardware)}, ${
      esc(series.kind)}, ${esc(series.unit)}</span></h1>
      <div id="chart"></div><div class="columns"><div class="panel" id="pair"></div>
      <div class="panel" id="point"></div></div>
      <h2>Step changes</h2>${stepsList(series)}${RN50.baselinePanel(series)}
      ${series.points.some((point) => point.busbw_gbps) ? '<h2>All-reduce bus bandwidth (GB/s)</h2><div id="busbw"></div>' : ""}
      <h2>Sessions</h2>${pointsTable(series, state)}`;
    document.getElementById("points").onclick = (event) => {
      const row = event.target.closest("tr.pickable");
      if (row && window.Plotly) RN50.pick(series, row.dataset.session);
    };
    RN50.showPicks(series, state);
  };

  // The charts, once the chart library has loaded (the text above is drawn before it).
  RN50.drawSeriesCharts = function (series, state) {
    RN50.drawChart(series, state);
    if (document.getElementById("busbw")) RN50.drawBusbw(series, state);
  };

  RN50.drawBusbw = function (series, state) {
    const points = shownPoints(series, state).filter((point) => point.busbw_gbps);
    Plotly.newPlot("busbw", [{ x: points.map(timeOf), y: points.map((point) => point.busbw_gbps),
      mode: "lines+markers", name: "busbw median", customdata: points.map(nameOf),
      hovertemplate: "%{customdata}<br>%{y} GB/s<extra></extra>" }],
      { margin: { l: 60, r: 20, t: 10, b: 40 }, xaxis: { type: "date" }, yaxis: { title: "GB/s", rangemode: "tozero" } },
      { displayModeBar: false, responsive: true });
  };
})(window.RN50);
