// What every view of the history site shares: the data (data.js), the view's state as the URL
// holds it (a permalink), the filters, and small formatting helpers.
"use strict";
window.RN50 = window.RN50 || {};
(function (RN50) {
  const DATA = window.RN50_HISTORY;
  RN50.data = DATA;
  RN50.dataAt = performance.now();   // data.js evaluated (the benchmark reports it)

  // The colours tools/history.py's plot gives the verdicts, and the others'.
  RN50.VERDICT_COLOURS = {
    "pass": "#2ca02c", "regression": "#d62728", "improvement": "#1f77b4",
    "inconclusive": "#ff7f0e", "no-baseline": "#7f7f7f", "host-unfit": "#9467bd",
    "oom": "#8c564b", "error": "#111111", "skipped": "#bbbbbb", "recorded": "#555555",
  };
  RN50.FILTERS = [
    ["hardware", "hardware"], ["precision", "precision"], ["topology", "nodes x GPUs"],
    ["launcher", "launcher"], ["image", "image"],
  ];

  RN50.escape = function (value) {
    return String(value === undefined || value === null ? "" : value).replace(
      /[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  };
  RN50.number = function (value, digits) {
    if (value === undefined || value === null) return "-";
    const places = digits === undefined ? (Math.abs(value) >= 100 ? 1 : 2) : digits;
    return Number(value).toFixed(places);
  };
  // The unit a chart draws a measure in, and the factor from the stored figure: bytes in GiB.
  RN50.chartUnit = function (unit) {
    return unit === "B" ? { unit: "GiB", factor: 2 ** -30 } : { unit, factor: 1 };
  };
  // A measure's figure in its unit: bytes as GiB or MiB, the rest as RN50.number.
  RN50.figure = function (value, unit) {
    if (value === undefined || value === null) return "-";
    if (unit === "B") {
      const gib = value / 2 ** 30;
      return gib >= 1 ? `${gib.toFixed(2)} GiB` : `${(value / 2 ** 20).toFixed(0)} MiB`;
    }
    return `${RN50.number(value)} ${unit}`;
  };
  RN50.percent = function (value, signed) {
    if (value === undefined || value === null) return "-";
    const text = (100 * value).toFixed(1) + "%";
    return signed && value > 0 ? "+" + text : text;
  };
  // A measure's band as a line says it: +-5 % where it is absolute (in the measure's unit),
  // else a percentage of the baseline.
  RN50.band = function (tolerance, measure) {
    return measure && measure.band_is_absolute ? `±${RN50.figure(tolerance, measure.unit)}`
      : RN50.percent(tolerance);
  };
  RN50.badge = function (verdict) {
    const colour = RN50.VERDICT_COLOURS[verdict] || "#555";
    return `<span class="verdict" style="background:${colour}">${RN50.escape(verdict || "-")}</span>`;
  };
  // Plotly reads "2026-11-28 09:12:00"; results.json writes "2026-11-28T09:12:00Z" (UTC).
  RN50.plotTime = function (iso) {
    return iso ? iso.replace("T", " ").replace("Z", "") : null;
  };
  // The chart library, loaded the first time a view draws a chart (the index draws none, and
  // opens without parsing its 4.8 MB).
  RN50.withCharts = function (draw) {
    if (window.Plotly) return draw();
    let script = document.getElementById("chart-library");
    if (!script) {
      script = document.createElement("script");
      script.id = "chart-library";
      script.src = "plotly.min.js";
      document.head.appendChild(script);
    }
    script.addEventListener("load", draw, { once: true });
  };
  RN50.session = (index) => DATA.sessions[index];
  RN50.environment = (session) => DATA.environments[session.environment] || {};

  // -- the view's state: the URL's hash, e.g. #view=case&series=nvidia-h200/1n1g_amp_b256&a=X&b=Y
  RN50.state = function () {
    const params = new URLSearchParams(location.hash.replace(/^#/, ""));
    return Object.fromEntries(params.entries());
  };
  RN50.href = function (state) {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(state)) {
      if (value !== undefined && value !== null && value !== "") params.set(key, value);
    }
    return "#" + params.toString();
  };
  // A new hash without drawing the view again (a pick, a filter the view applies itself).
  RN50.remember = function (state) {
    history.replaceState(null, "", RN50.href(state));
    const link = document.getElementById("permalink");
    if (link) link.href = location.href;
  };
  RN50.permalink = function () {
    return `<a id="permalink" href="${RN50.escape(location.href)}">permalink</a>`;
  };

  // -- filters: a session's launcher and image, a series' hardware, precision and topology
  RN50.filterValue = function (series, point, key) {
    if (key === "launcher" || key === "image") {
      return point ? RN50.session(point.session)[key] : null;
    }
    return series[key];
  };
  RN50.pointShown = function (series, point, state) {
    return RN50.FILTERS.every(([key]) => !state[key]
      || String(RN50.filterValue(series, point, key)) === state[key]);
  };
  RN50.seriesShown = function (series, state) {
    const own = ["hardware", "precision", "topology"].every(
      (key) => !state[key] || String(series[key]) === state[key]);
    if (!own) return false;
    if (!state.launcher && !state.image) return true;
    return series.points.some((point) => RN50.pointShown(series, point, state));
  };
  RN50.filterOptions = function () {
    const options = Object.fromEntries(RN50.FILTERS.map(([key]) => [key, new Set()]));
    for (const series of DATA.series) {
      for (const key of ["hardware", "precision", "topology"]) {
        if (series[key]) options[key].add(String(series[key]));
      }
    }
    for (const session of DATA.sessions) {
      if (session.launcher) options.launcher.add(session.launcher);
      options.image.add(session.image);
    }
    return options;
  };
  RN50.drawFilters = function (state, onChange) {
    const options = RN50.filterOptions();
    const form = document.getElementById("filters");
    form.innerHTML = RN50.FILTERS.map(([key, label]) => {
      const values = [...options[key]].sort();
      const choices = values.map((value) => `<option value="${RN50.escape(value)}"${
        state[key] === value ? " selected" : ""}>${RN50.escape(value)}</option>`).join("");
      return `<label>${label}<select name="${key}" id="filter-${key}"><option value="">all</option>${
        choices}</select></label>`;
    }).join("");
    form.onchange = (event) => onChange(event.target.name, event.target.value);
  };
})(window.RN50);
