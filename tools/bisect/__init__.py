"""`rn50-perf bisect`: which change made the candidate stack slower, down to the component: the
command (command), the stacks it compares (stacks), the components that differ between them
(components), the search over them (search), one probe's rounds (rounds) and its decision rule
(rule)."""
