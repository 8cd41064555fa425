// What changed between two points, in the gate's own wording: perf_tests/differences.py's
// environment_diff and settings_diff, applied to the facts tools/history/site/pages.py stored
// (as text) with the constants it exported in data.diff_rule. The browser test holds this to
// the Python functions on the points it picks.
"use strict";
(function (RN50) {
  const rule = RN50.data.diff_rule;
  const has = (object, key) => Object.prototype.hasOwnProperty.call(object, key);

  function variableChanges(before, after) {
    const old = before[rule.variables], now = after[rule.variables];
    if (!old || !now) return [];
    const names = [...new Set([...Object.keys(old), ...Object.keys(now)])].sort();
    return names.filter((name) => old[name] !== now[name]).map((name) =>
      `${name} ${has(old, name) ? old[name] : rule.unset} -> ${has(now, name) ? now[name] : rule.unset}`);
  }

  RN50.environmentChanges = function (before, after) {
    const oldImage = has(before, rule.image) ? before[rule.image] : rule.no_image;
    const newImage = has(after, rule.image) ? after[rule.image] : rule.no_image;
    const changes = oldImage !== newImage ? [`${rule.image} ${oldImage} -> ${newImage}`] : [];
    for (const key of rule.keys) {
      if (has(before, key) && has(after, key) && before[key] !== after[key]) {
        changes.push(`${key} ${before[key]} -> ${after[key]}`);
      }
    }
    return changes.concat(variableChanges(before, after));
  };

  RN50.environmentDiff = function (before, after) {
    if (Object.keys(before).length === 0) return rule.no_environment;
    const changes = RN50.environmentChanges(before, after);
    if (changes.length) return changes.join(", ");
    const compared = (has(before, rule.image) && has(after, rule.image) ? [rule.image] : [])
      .concat(rule.named_when_unchanged.filter((key) => has(before, key)));
    if (has(before, rule.variables) && has(after, rule.variables)) compared.push(rule.variables);
    return `${rule.no_change} ${compared.join(", ")}`;
  };

  RN50.settingsDiff = function (before, after) {
    return rule.settings.filter((key) => before[key] !== undefined && before[key] !== null
      && before[key] !== "auto" && has(after, key) && before[key] !== after[key])
      .map((key) => `${key} ${before[key]} -> ${after[key] === null ? "None" : after[key]}`)
      .join(", ");
  };

  // `environment: torch 2.11.0 -> 2.13.0; settings: threads 2 -> 1`: from point a to point b.
  RN50.pairDiff = function (a, b) {
    const environment = RN50.environmentDiff(RN50.environment(RN50.session(a.session)),
                                             RN50.environment(RN50.session(b.session)));
    const settingsOf = (point) => point.settings === undefined ? {} : RN50.data.settings[point.settings];
    const settings = RN50.settingsDiff(settingsOf(a), settingsOf(b));
    return `environment: ${environment}` + (settings ? `; settings: ${settings}` : "");
  };
})(window.RN50);
