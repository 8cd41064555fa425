// One case's series on one hardware: a chart per measure of the case (its kind's table,
// perf_tests/results/measures.py: throughput first, then peak memory, bus bandwidth...), each
// session's runs and median coloured by that measure's own verdict, the band it was judged
// against, the baseline files' entries and their lineage; the step changes on the first; a
// point's session, environment and links; the diff between two picked points.
"use strict";
(function (RN50) {
  const esc = RN50.escape;

  function shownPoints(series, state) {
    return series.points.filter((point) => RN50.pointShown(series, point, state));
  }
  const timeOf = (point) => RN50.plotTime(RN50.session(point.session).started_at);
  const nameOf = (point) => RN50.session(point.session).name;

  // A measure's figures at a point: the first measure's are the point's own (its verdict the
  // measure's where the case failed on another), the others' under point.measures.
  RN50.figuresOf = function (series, measure, point) {
    if (measure.slug === series.measures[0].slug) {
      return { value: point.value, runs: point.runs, baseline: point.baseline, delta: point.delta,
               tolerance: point.tolerance, verdict: point.measure_verdict || point.verdict };
    }
    return (point.measures || {})[measure.slug] || null;
  };

  // The points of a measure that have a figure: [point, its figures in the chart's unit] (an
  // absolute band too: it is in the measure's unit).
  function measured(series, measure, points) {
    const { factor } = RN50.chartUnit(measure.unit);
    const scale = (value) => typeof value === "number" ? value * factor : value;
    return points.map((point) => [point, RN50.figuresOf(series, measure, point)])
      .filter(([, figures]) => figures && figures.value !== null && figures.value !== undefined)
      .map(([point, figures]) => [point, factor === 1 ? figures : Object.assign({}, figures, {
        value: scale(figures.value), baseline: scale(figures.baseline), runs: (figures.runs || []).map(scale),
        tolerance: measure.band_is_absolute ? scale(figures.tolerance) : figures.tolerance })]);
  }

  // The points where the band changes (and the last): drawn as steps, they draw the whole band.
  function bandChanges(shown) {
    const judged = shown.filter(([, figures]) => figures.baseline !== undefined);
    return judged.filter(([, figures], i) => i === 0 || i === judged.length - 1
      || figures.baseline !== judged[i - 1][1].baseline || figures.tolerance !== judged[i - 1][1].tolerance);
  }

  // A band's edges: baseline +- band where the measure's band is absolute (top-1: 5 points),
  // else baseline x (1 +- band).
  RN50.bandEdge = function (measure, baseline, tolerance, sign) {
    if (typeof tolerance !== "number") return null;
    return measure.band_is_absolute ? baseline + sign * tolerance : baseline * (1 + sign * tolerance);
  };

  function bandTraces(measure, shown) {
    const judged = bandChanges(shown);
    if (!judged.length) return [];
    const x = judged.map(([point]) => timeOf(point));
    const edge = (sign) => judged.map(([, figures]) =>
      RN50.bandEdge(measure, figures.baseline, figures.tolerance, sign));
    const line = { shape: "hv", width: 0 };
    return [
      { x, y: edge(-1), mode: "lines", line, hoverinfo: "skip", showlegend: false },
      { x, y: edge(1), mode: "lines", line, fill: "tonexty", fillcolor: "rgba(44,160,44,0.13)",
        name: "baseline +- tolerance", hoverinfo: "skip" },
      { x, y: judged.map(([, figures]) => figures.baseline), mode: "lines", name: "baseline judged against",
        line: { shape: "hv", color: "black", width: 1.5 }, hoverinfo: "skip" },
    ];
  }

  // A baseline entry's (or lineage item's) figure of a measure: `figures` by slug; the median
  // img/s of an entry the site described before measures had slugs.
  RN50.entryFigure = function (series, measure, entry) {
    const figure = (entry.figures || {})[measure.slug];
    if (figure !== undefined) return figure;
    return measure.slug === series.measures[0].slug && series.kind === "throughput" ? entry.median_ips : undefined;
  };

  // Each baseline file's entry, after the entries it replaced (its lineage), as a step line.
  function lineageTraces(series, measure, points) {
    const last = points.length ? timeOf(points[points.length - 1]) : null;
    const chart = RN50.chartUnit(measure.unit);
    const figure = (entry) => {
      const value = RN50.entryFigure(series, measure, entry);
      return value === undefined ? value : value * chart.factor;
    };
    return series.baselines.filter((entry) => figure(entry) !== undefined).map((entry, number) => {
      const steps = (entry.lineage || []).concat([entry]).filter((old) => figure(old) !== undefined);
      const x = steps.map((old) => RN50.plotTime(old.recorded_at));
      const y = steps.map(figure);
      const text = steps.map((old, index) => `${esc(old.source || "")} ${old.runs || "?"} runs` + (
        index < steps.length - 1 && old.changed ? `<br>then: ${esc(old.changed)}` : ""));
      if (last && last > x[x.length - 1]) { x.push(last); y.push(figure(entry)); text.push(""); }
      return { x, y, text, mode: "lines+markers", name: `baseline file ${number + 1} (lineage)`,
               line: { shape: "hv", dash: "dot", color: "#444" }, marker: { symbol: "square", size: 7 },
               hovertemplate: "%{y} " + esc(chart.unit) + ", recorded %{x}<br>%{text}<extra></extra>" };
    });
  }

  // Up to this many runs a chart draws each as a dot; beyond, each session's runs are a whisker
  // from its slowest to its fastest run (as report.md's scaling plot draws them): thousands of
  // dots cost the first drawing most of its time and read as one cloud.
  RN50.RUN_DOTS = 2000;

  function whisker(shown) {
    const range = ([, figures], pick) => (figures.runs || []).length ? pick(...figures.runs) : figures.value;
    return { type: "data", symmetric: false, thickness: 1, width: 0, color: "rgba(0,0,0,0.35)",
             array: shown.map((one) => range(one, Math.max) - one[1].value),
             arrayminus: shown.map((one) => one[1].value - range(one, Math.min)) };
  }

  function pointTraces(measure, shown) {
    const runs = { x: [], y: [] };
    for (const [point, figures] of shown) {
      for (const value of figures.runs || []) { runs.x.push(timeOf(point)); runs.y.push(value); }
    }
    const dots = runs.x.length <= RN50.RUN_DOTS;
    const traces = [
      { x: shown.map(([point]) => timeOf(point)), y: shown.map(([, figures]) => figures.value), mode: "lines",
        line: { color: "#999", width: 1 }, hoverinfo: "skip", showlegend: false },
    ];
    if (dots && runs.x.length) {
      traces.unshift({ x: runs.x, y: runs.y, mode: "markers", name: "one run", hoverinfo: "skip",
                       marker: { size: 4, color: "rgba(0,0,0,0.35)" } });
    }
    const verdicts = [...new Set(shown.map(([, figures]) => figures.verdict))];
    for (const verdict of verdicts) {
      const mine = shown.filter(([, figures]) => figures.verdict === verdict);
      traces.push({ x: mine.map(([point]) => timeOf(point)), y: mine.map(([, figures]) => figures.value), mode: "markers",
        name: `median, ${verdict}` + (dots ? "" : " (whisker: its runs)"), customdata: mine.map(([point]) => nameOf(point)),
        error_y: dots ? undefined : whisker(mine),
        marker: { size: shown.length > 200 ? 5 : 9, color: RN50.VERDICT_COLOURS[verdict] || "#555" },
        hovertemplate: "%{customdata}<br>%{y} " + esc(RN50.chartUnit(measure.unit).unit) + "<extra>" + esc(verdict) + "</extra>" });
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

  // One measure's traces: its band, its baseline entries' lineage, its runs and medians.
  function measureTraces(series, measure, state) {
    const points = shownPoints(series, state), shown = measured(series, measure, points);
    return bandTraces(measure, shown).concat(lineageTraces(series, measure, points), pointTraces(measure, shown));
  }

  function plotLayout(measure, extra) {
    return Object.assign({
      margin: { l: 60, r: 20, t: 30, b: 40 }, hovermode: "closest",
      xaxis: { type: "date", title: "session start (UTC)" },
      yaxis: { title: RN50.chartUnit(measure.unit).unit, rangemode: "tozero" }, legend: { orientation: "h", y: -0.18 },
    }, extra);
  }

  function onClick(id, series) {
    document.getElementById(id).on("plotly_click", (event) => {
      const name = event.points[0] && event.points[0].customdata;
      if (name) RN50.pick(series, name);
    });
  }

  // The first measure's chart: with the step changes and the picked points.
  RN50.drawChart = function (series, state) {
    const measure = series.measures[0];
    const traces = measureTraces(series, measure, state).concat([pickedTrace(picks(series, state))]);
    Plotly.newPlot("chart", traces, plotLayout(measure, stepShapes(series)),
                   { displayModeBar: false, responsive: true });
    onClick("chart", series);
  };

  RN50.drawMeasureChart = function (series, measure, state) {
    const id = `chart-${measure.slug}`;
    Plotly.newPlot(id, measureTraces(series, measure, state), plotLayout(measure, { margin: { l: 60, r: 20, t: 10, b: 40 } }),
                   { displayModeBar: false, responsive: true });
    onClick(id, series);
  };

  // The other measures: a chart each, or one line for a measure that is the same at every
  // session (the speedup of one device).
  function charted(series) {
    return series.measures.slice(1).filter((measure) => new Set(
      series.points.map((point) => (RN50.figuresOf(series, measure, point) || {}).value)
        .filter((value) => value !== undefined)).size > 1);
  }

  function measureSections(series) {
    const drawn = charted(series);
    const same = series.measures.slice(1).filter((measure) => !drawn.includes(measure)).map((measure) => {
      const first = series.points.map((point) => RN50.figuresOf(series, measure, point)).find(Boolean);
      return `${esc(measure.title)} ${esc(RN50.figure(first.value, measure.unit))} at every session`;
    });
    return drawn.map((measure) => `<h2>${esc(measure.title)} (${esc(RN50.chartUnit(measure.unit).unit)})</h2>
      <div class="measure-chart" id="chart-${esc(measure.slug)}"></div>`).join("")
      + (same.length ? `<p class="muted" id="constant-measures">${same.join("; ")}</p>` : "");
  }

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
      <div id="chart"></div>${measureSections(series)}<div class="columns"><div class="panel" id="pair"></div>
      <div class="panel" id="point"></div></div>
      <h2>Step changes</h2>${stepsList(series)}${RN50.baselinePanel(series)}
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
    for (const measure of charted(series)) RN50.drawMeasureChart(series, measure, state);
  };
})(window.RN50);
