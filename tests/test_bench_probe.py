"""tools/bench/probe.py for real: one pair of 2-rank worker runs on the CPU (gloo), with the
interconnect probe and without it, and what it prints and writes."""
import json

import pytest

from conftest import run_tool


@pytest.mark.slow
def test_one_pair_with_and_without_the_probe(tmp_path):
    output = tmp_path / "probe.json"
    done = run_tool("bench-probe", "--pairs", 1, "--image-size", 32, "--batch", 2, "--warmup", 1,
                    "--iters", 2, "--threads", 1, "--output", output, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("; 2 ranks, probe 5 iterations a message against none")
    assert lines[2].split()[0] == "1" and lines[-1].startswith("with / without the probe: ")

    found = json.loads(output.read_text())
    assert found["settings"]["probe_iters"] == 5 and found["settings"]["nproc"] == 2
    assert found["ratio_of_medians"] > 0 and found["median_pair_ratio"] > 0
    [pair] = found["pairs"]
    assert pair["first"] == "without_probe"
    with_probe, without = pair["with_probe"], pair["without_probe"]
    assert with_probe["probe_seconds"] > 0 and with_probe["busbw_gbps"] > 0
    assert with_probe["interconnect"]["ranks"] == 2
    assert without["interconnect"] == {"skipped": "interconnect_iters is 0"}
    assert without["probe_seconds"] is None and without["busbw_gbps"] is None
    assert found["median_probe_seconds"] == with_probe["probe_seconds"]
    assert found["median_extra_wall_s"] == pytest.approx(with_probe["wall_s"] - without["wall_s"])
