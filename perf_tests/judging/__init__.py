"""Everything that turns runs into a verdict: the rules and their band (verdicts, tolerance_band),
the gate's protocol, its run counts and when one more run is wanted (gate_protocol), a throughput
case's verdict from what its mode gathered (throughput_verdict), what a verdict could have seen
(detectable), memory and energy beside the speed (footprint), the host's marks on runs
(host_marks), where a scaling loss went (scaling_loss), the A/B verdict (paired) and the protocol
replayed on recorded runs (protocol_replay). Pure functions of runs, entries and rows: it may
import core, runs, environment, baselines and results, never a mode, the command line or the
session."""
