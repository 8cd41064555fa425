// What one point says: its session (time, image, stack, commit, host state), its verdict and
// band, its links (report.md, results.json, the run records) and repro command; and a series'
// baseline files with the entries they replaced.
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

  function band(point, unit) {
    if (point.baseline === undefined) return null;
    const tolerance = point.tolerance === undefined ? "" : `, tolerance ${RN50.percent(point.tolerance)}${
      point.tolerance_reason ? ` (${esc(point.tolerance_reason)})` : ""}`;
    return `${RN50.percent(point.delta, true)} against ${RN50.number(point.baseline)} ${esc(unit)}${tolerance}`;
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
        runs ? ` (${point.runs.length} runs: ${runs})` : ""}</p>
      ${point.message ? `<p class="mono">${esc(point.message)}</p>` : ""}
      ${facts([["band", band(point, series.unit)], ["drift", drift(point)],
               ["could detect", point.detects === undefined ? null : `a slowdown of ${RN50.percent(point.detects)}`],
               ["busbw", point.busbw_gbps === undefined ? null : `${RN50.number(point.busbw_gbps)} GB/s`],
               ["profile", esc(session.profile)], ["launcher", esc(session.launcher)],
               ["host state", hostState(point, session)]])}
      ${facts(STACK.map((key) => [key, environment[key] === undefined ? null : esc(environment[key])])
        .concat([["variables", esc(variables)]]))}
      <p>${links(point, session, series)}</p>
      ${point.repro ? `<p>repro:</p><pre class="repro">${esc(point.repro)}</pre>` : ""}`;
  };

  RN50.baselinePanel = function (series) {
    if (!series.baselines.length) return "";
    const rows = series.baselines.map((entry) => {
      const replaced = (entry.lineage || []).slice().reverse().map((old) => `<tr><td></td><td class="number">${RN50.number(old.median_ips)}</td>
        <td class="number">${RN50.percent(old.tolerance)}</td><td>${esc(old.recorded_at)}</td><td>${esc(old.source)}</td>
        <td class="number">${esc(old.runs)}</td><td class="mono">${esc(old.changed)}</td></tr>`).join("");
      return `<tr><td class="mono">${esc(entry.file)}</td><td class="number">${RN50.number(entry.median_ips)}</td>
        <td class="number">${RN50.percent(entry.tolerance)}</td><td>${esc(entry.recorded_at)}</td>
        <td>${esc(entry.source)}</td><td class="number">${entry.runs}</td><td></td></tr>${replaced}`;
    }).join("");
    return `<h2>Baselines</h2><table id="baselines"><thead><tr><th>file</th><th>${esc(series.unit)}</th>
      <th>tolerance</th><th>recorded</th><th>source</th><th>runs</th><th>changed since (lineage)</th></tr></thead>
      <tbody>${rows}</tbody></table>`;
  };
})(window.RN50);
