// The history site's views, chosen by the URL: the index (every series with its latest point
// and step changes, the A/B sessions, the sessions), one series (series.js), one A/B session.
"use strict";
(function (RN50) {
  const esc = RN50.escape, DATA = RN50.data;

  function sparkline(series, points) {
    const values = points.map((point) => point.value).filter((value) => value !== null && value !== undefined);
    if (values.length < 2) return "";
    const low = Math.min(...values), high = Math.max(...values), span = high - low || 1;
    const step = 120 / (values.length - 1);
    const path = values.map((value, i) => `${(i * step).toFixed(1)},${(22 - 20 * (value - low) / span).toFixed(1)}`);
    return `<svg class="sparkline" width="122" height="24"><polyline fill="none" stroke="#555" points="${path.join(" ")}"/></svg>`;
  }

  // The confirmed steps that hold, and those unconfirmed beside them: `2 (+1 unconfirmed)`.
  function stepCount(series) {
    const count = (state) => series.steps.filter((step) => step.state === state).length;
    const unconfirmed = count("unconfirmed");
    return count("confirmed") + (unconfirmed ? ` (+${unconfirmed} unconfirmed)` : "");
  }

  function seriesTable(state) {
    const rows = DATA.series.filter((series) => RN50.seriesShown(series, state)).map((series) => {
      const points = series.points.filter((point) => RN50.pointShown(series, point, state));
      const last = points[points.length - 1];
      const baseline = series.baselines[0];
      return `<tr data-series="${esc(series.id)}"><td>${esc(series.hardware)}</td>
        <td><a href="${RN50.href(Object.assign({}, state, { view: "case", series: series.id }))}">${esc(series.case_id)}</a></td>
        <td>${esc(series.kind)}</td><td class="number">${points.length}</td>
        <td class="number">${last ? RN50.number(last.value) : "-"}</td><td>${last ? RN50.badge(last.verdict) : ""}</td>
        <td>${sparkline(series, points)}</td><td class="number">${stepCount(series)}</td>
        <td class="number">${baseline ? RN50.number(baseline.median_ips) : "-"}</td><td>${esc(series.unit)}</td></tr>`;
    }).join("");
    return `<table id="series"><thead><tr><th>hardware</th><th>case</th><th>kind</th><th>sessions</th>
      <th>latest</th><th>verdict</th><th>history</th><th>steps</th><th>baseline</th><th>unit</th></tr></thead>
      <tbody>${rows}</tbody></table>`;
  }

  function stepsList(state) {
    const steps = [];
    for (const series of DATA.series.filter((one) => RN50.seriesShown(one, state))) {
      for (const step of series.steps) steps.push([series, step]);
    }
    steps.sort((x, y) => String(RN50.session(y[1].session).started_at).localeCompare(RN50.session(x[1].session).started_at));
    if (!steps.length) return `<p class="muted">${esc(DATA.steps_note || "No step change found.")}</p>`;
    return '<ul id="steps">' + steps.map(([series, step]) => `<li class="${step.state}"><a href="${RN50.href({ view: "case",
      series: series.id, a: RN50.session(step.before).name, b: RN50.session(step.session).name })}">${
      esc(series.hardware)}: ${esc(step.line)}</a></li>`).join("") + "</ul>";
  }

  function abTable() {
    if (!DATA.ab.length) return '<p class="muted">No A/B session.</p>';
    const rows = DATA.ab.slice().reverse().map((ab) => {
      const session = RN50.session(ab.session);
      return `<tr><td><a href="${RN50.href({ view: "ab", session: session.name })}">${esc(session.name)}</a></td>
        <td>${esc(session.label)}</td><td>${esc(session.reference)}</td><td>${esc(session.candidate)}</td>
        <td>${ab.cases.map((one) => `${esc(one.case_id)} ${RN50.badge(one.verdict)}`).join(" ")}</td></tr>`;
    }).join("");
    return `<table id="ab-sessions"><thead><tr><th>session</th><th>start</th><th>reference</th><th>candidate</th>
      <th>cases</th></tr></thead><tbody>${rows}</tbody></table>`;
  }

  function sessionsTable(state) {
    const shown = DATA.sessions.filter((session) => (!state.hardware || session.hardware === state.hardware)
      && (!state.launcher || session.launcher === state.launcher) && (!state.image || session.image === state.image));
    const rows = shown.slice(-200).reverse().map((session) => {
      const environment = RN50.environment(session);
      const files = session.files.map((name) => `<a href="sessions/${encodeURIComponent(session.name)}/${name}">${name}</a>`);
      return `<tr><td>${esc(session.label)}</td><td>${esc(session.name)}</td><td>${esc(session.hardware)}</td>
        <td>${esc(session.launcher)}</td><td>${esc(session.image)}</td><td>${esc(environment.torch)}</td>
        <td>${esc(environment.driver)}</td><td>${esc(environment.commit)}</td><td>${files.join(" ")}</td></tr>`;
    }).join("");
    const more = shown.length > 200 ? `<p class="muted">The latest 200 of ${shown.length} sessions.</p>` : "";
    return `${more}<table id="sessions"><thead><tr><th>start</th><th>session</th><th>hardware</th><th>launcher</th>
      <th>image</th><th>torch</th><th>driver</th><th>commit</th><th>files</th></tr></thead><tbody>${rows}</tbody></table>`;
  }

  function drawIndex(state) {
    const first = DATA.sessions[0], last = DATA.sessions[DATA.sessions.length - 1];
    const span = first ? ` from ${esc(first.label)} to ${esc(last.label)}` : "";
    const notes = DATA.notes.length ? `<div class="notes" id="notes"><b>Left out or renamed:</b><ul>${
      DATA.notes.map((note) => `<li>${esc(note)}</li>`).join("")}</ul></div>` : "";
    document.getElementById("view").innerHTML = `<h1>${DATA.sessions.length} sessions${span}</h1>${notes}
      <h2>Series</h2>${seriesTable(state)}<h2>Step changes</h2>${stepsList(state)}
      <h2>A/B sessions</h2>${abTable()}<h2>Sessions</h2>${sessionsTable(state)}
      <p class="muted">Built ${esc(DATA.built_at)} from ${DATA.sessions.length} sessions and ${
      DATA.baseline_files.length} baseline files. ${RN50.permalink()}</p>`;
  }

  function drawAb(ab) {
    const session = RN50.session(ab.session);
    const rows = ab.cases.map((one) => `<tr><td>${esc(one.case_id)}</td><td class="number">${one.pairs ?? "-"}</td>
      <td class="number">${RN50.number(one.reference.median_ips)}</td><td class="number">${RN50.number(one.candidate.median_ips)}</td>
      <td class="number">${RN50.number(one.ratio, 3)}</td><td class="number">${one.ratio_ci ? one.ratio_ci.map((v) => RN50.number(v, 3)).join("-") : "-"}</td>
      <td class="number">${RN50.percent(one.tolerance)}</td><td class="number">${one.min_detectable_slowdown === undefined ? "-" : RN50.percent(one.min_detectable_slowdown)}</td>
      <td>${RN50.badge(one.verdict)}</td><td class="mono">${esc(one.environment_diff)}</td></tr>`).join("");
    const lines = ab.cases.filter((one) => one.message).map((one) => `<li class="mono">${esc(one.message)}</li>`).join("");
    const files = session.files.map((name) => `<a href="sessions/${encodeURIComponent(session.name)}/${name}">${name}</a>`);
    document.getElementById("view").innerHTML = `<h1>A/B session ${esc(session.name)} <span class="muted">${
      esc(session.label)}</span></h1><p>reference <b>${esc(session.reference)}</b>, candidate <b>${esc(session.candidate)}</b>
      on ${esc(session.hardware)} ${files.join(" ")}</p>
      <table id="ab"><thead><tr><th>case</th><th>pairs</th><th>reference img/s</th><th>candidate img/s</th>
      <th>median pair ratio</th><th>95% CI</th><th>tolerance</th><th>detects</th><th>verdict</th><th>what differs</th></tr></thead>
      <tbody>${rows}</tbody></table><ul>${lines}</ul><div id="chart"></div><p>${RN50.permalink()}</p>`;
  }

  function drawAbChart(ab) {
    const traces = ["reference", "candidate"].map((side) => ({
      type: "box", name: side, boxpoints: "all", jitter: 0.3, pointpos: 0,
      x: ab.cases.flatMap((one) => one[side].runs.map(() => one.case_id)),
      y: ab.cases.flatMap((one) => one[side].runs) }));
    Plotly.newPlot("chart", traces, { boxmode: "group", margin: { l: 60, r: 20, t: 20, b: 40 },
      yaxis: { title: "img/s", rangemode: "tozero" } }, { displayModeBar: false, responsive: true });
  }

  function drawMissing(what) {
    document.getElementById("view").innerHTML = `<p>This site has ${esc(what)}: <a href="#">the index</a>.</p>`;
  }

  function draw() {
    const state = RN50.state();
    RN50.drawFilters(state, (key, value) => {
      const next = Object.assign(RN50.state(), { [key]: value });
      location.hash = RN50.href(next);
    });
    const series = DATA.series.find((one) => one.id === state.series);
    const ab = DATA.ab.find((one) => RN50.session(one.session).name === state.session);
    // A view with a chart asks for the chart library first: it loads while the text is drawn.
    if (state.view === "case" && series) {
      RN50.withCharts(() => finish(RN50.drawSeriesCharts(series, state)));
      RN50.drawSeries(series, state);
    } else if (state.view === "ab" && ab) {
      RN50.withCharts(() => finish(drawAbChart(ab)));
      drawAb(ab);
    } else if (state.view === "case" || state.view === "ab") {
      finish(drawMissing(state.view === "case" ? `no series ${state.series}` : `no A/B session ${state.session}`));
    } else {
      finish(drawIndex(state));
      // Once the index is up and the browser idle, the chart library, for the next view.
      (window.requestIdleCallback || setTimeout)(() => RN50.withCharts(() => {}));
    }
    if (RN50.textAt === undefined) RN50.textAt = performance.now();
  }

  // What the browser test and the benchmark wait for: drawn once, then once per view; the
  // text of the first view is up at RN50.textAt, its charts too at RN50.drawnAt.
  function finish() {
    if (RN50.drawnAt === undefined) RN50.drawnAt = performance.now();
    document.body.dataset.drawn = String(Number(document.body.dataset.drawn || 0) + 1);
  }

  window.addEventListener("hashchange", draw);
  draw();
})(window.RN50);
