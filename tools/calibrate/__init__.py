"""`rn50-perf calibrate`: the gate measured on the machine at hand with real sessions and real
slowdowns (command), and its tables: the verdicts per scenario, and the GPU hours' runs replayed
through the protocol (tables)."""
