// What one point says: its session (time, image, stack, commit, host state), its verdict and
// band, each other measure with its own verdict, its links (report.md, results.json, the run
// records) and repro command; and a series' baseline files with the entries they replaced, an
// auto entry with the band a session judged against it used.
"use strict";
(function (RN50) {
  const esc = RN50.escape;
  const STACK = ["image", "device", "driver", "cuda", "cudnn", "nccl", "torch", "dali", "python",
                 "container", "os", "commit", "host"];

  function facts(pairs) {
    return '<dl class="facts">' + pairs.filter(([, value]) => value !== undefined && value !== null && value !== "")
      .map(([name, value]) => `<dt>${esc(name)}</dt><dd>${value}</dd>`).join("") + "</dl>";
  }

  function hostState(point, session) {
    const marked = Object.entries(point.marked_runs || {}).map(([run, reasons]) =>
      `run ${esc(run)}: ${esc([].concat(reasons).join("; "))}`);
    const throttled = (point.throttled_runs || []).length ? [`throttled runs: ${esc(point.throttled_runs.join(", "))}`] : [];
    const lines = marked.concat(throttled);
    if (session.preflight) lines.push(`preflight: ${esc(session.preflight)}`);
    return lines.length ? lines.join("<br>") : "no run marked";
  }

  function band(point, measure) {
    if (point.baseline === undefined) return null;
    const unit = measure.unit;
    const tolerance = point.tolerance === undefined ? "" : `, tolerance ${RN50.band(point.tolerance, measure)}${
      point.tolerance_reason ? ` (${esc(point.tolerance_reason)})` : ""}`;
    return `${RN50.percent(point.delta, true)} against ${RN50.number(point.baseline)} ${esc(unit)}${tolerance}`;
  }

  // Each measure beside the first: 'peak-memory': '42.56 GiB +12.0% against 38.00 GiB,
  // tolerance 10.0% regression'.
  function measureFacts(series, point) {
    return series.measures.slice(1).map((measure) => {
      const figures = RN50.figuresOf(series, measure, point);
      if (!figures) return [measure.title, null];
      const against = figures.baseline === undefined ? "" : ` ${RN50.percent(figures.delta, true)} against ${
        RN50.figure(figures.baseline, measure.unit)}${typeof figures.tolerance === "number"
        ? `, tolerance ${RN50.band(figures.tolerance, measure)}` : ""}`;
      return [measure.title, `${esc(RN50.figure(figures.value, measure.unit))}${esc(against)} ${RN50.badge(figures.verdict)}`];
    });
  }

  function drift(point) {
    const d = point.drift;
    if (!d) return null;
    return `${RN50.percent(d.delta, true)} since ${esc(d.since)} across ${esc(d.refreshes)} refreshes${
      d.changed ? ` (${esc(d.changed)})` : ""}`;
  }

  function links(point, session, series) {
    const base = `sessions/${encodeURIComponent(session.name)}/`;
    const files = session.files.map((name) => `<a href="${base}${name}">${name}</a>`);
    const runs = (point.run_files || []).map((name) =>
      `<a href="${base}${encodeURIComponent(series.case_id)}/${name}">${name.replace(".json", "")}</a>`);
    return files.concat(runs).join(" ") || '<span class="muted">no files kept with this session</span>';
  }

  RN50.pointPanel = function (series, point) {
    const session = RN50.session(point.session), environment = RN50.environment(session);
    const runs = point.runs.map((value) => RN50.number(value)).join(", ");
    const variables = Object.entries(environment.variables || {}).map(([k, v]) => `${k}=${v}`).join(" ");
    return `<h2>${esc(session.name)} <span class="muted">${esc(session.started_at || session.label)}</span></h2>
      <p>${RN50.badge(point.verdict)} ${RN50.number(point.value)} ${esc(series.unit)}${
        runs ? ` (${point.runs.length} runs: ${runs})` : ""}${point.measure_verdict
        ? ` <span class="muted">${esc(series.measures[0].title)} alone:</span> ${RN50.badge(point.measure_verdict)}` : ""}</p>
      ${point.message ? `<p class="mono">${esc(point.message)}</p>` : ""}
      ${facts([["band", band(point, series.measures[0] || { unit: series.unit })], ["drift", drift(point)],
               ["could detect", point.detects === undefined ? null : `a slowdown of ${RN50.percent(point.detects)}`],
               ...measureFacts(series, point),
               ["profile", esc(session.profile)], ["launcher", esc(session.launcher)],
               ["host state", hostState(point, session)]])}
      ${facts(STACK.map((key) => [key, environment[key] === undefined ? null : esc(environment[key])])
        .concat([["variables", esc(variables)]]))}
      <p>${links(point, session, series)}</p>
      ${point.repro ? `<p>repro:</p><pre class="repro">${esc(point.repro)}</pre>` : ""}`;
  };

  // An entry's band: its number; an auto one with the band the latest session judged against
  // it used, 'auto (±1.2%: 3 standard errors of the medians' difference, ...)'.
  RN50.bandText = function (entry) {
    if (entry.tolerance !== "auto") return RN50.percent(entry.tolerance);
    if (!entry.band) return "auto (no session here was judged against it)";
    const reason = String(entry.band.reason || "").replace(/^auto: /, "");
    return `auto (±${RN50.percent(entry.band.tolerance)}${reason ? `: ${reason}` : ""})`;
  };

  RN50.baselinePanel = function (series) {
    if (!series.baselines.length) return "";
    const [first, ...others] = series.measures;
    const held = others.filter((measure) => series.baselines.some((entry) => [entry].concat(entry.lineage || [])
      .some((old) => RN50.entryFigure(series, measure, old) !== undefined)));
    const row = (entry, file, runs) => `<tr><td class="mono">${esc(file)}</td><td class="number">${
      RN50.number(RN50.entryFigure(series, first, entry))}</td>${held.map((measure) => `<td class="number">${
      esc(RN50.figure(RN50.entryFigure(series, measure, entry), measure.unit))}</td>`).join("")}
      <td class="band">${esc(RN50.bandText(entry))}</td><td>${esc(entry.recorded_at)}</td><td>${esc(entry.source)}</td>
      <td class="number">${esc(runs)}</td><td class="mono">${file ? "" : esc(entry.changed)}</td></tr>`;
    const rows = series.baselines.map((entry) => row(entry, entry.file, entry.runs)
      + (entry.lineage || []).slice().reverse().map((old) => row(old, "", old.runs)).join("")).join("");
    return `<h2>Baselines</h2><table id="baselines"><thead><tr><th>file</th><th>${esc(series.unit)}</th>${
      held.map((measure) => `<th>${esc(measure.title)}</th>`).join("")}
      <th>tolerance</th><th>recorded</th><th>source</th><th>runs</th><th>changed since (lineage)</th></tr></thead>
      <tbody>${rows}</tbody></table>`;
  };
})(window.RN50);
