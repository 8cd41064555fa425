"""Tests for the report and baseline-promotion tools and the published reference figures.

Results files are written here by hand in the shape the suite writes (several topologies and
precisions, with skipped, error and oom cases); the tools run in-process for the exact numbers
and as real subprocesses for the command line and its exit codes.
"""
from __future__ import annotations

import json
import re
import statistics
import struct
from pathlib import Path

import pytest
from matplotlib.container import ErrorbarContainer
from matplotlib.transforms import Bbox

from conftest import REPO_ROOT, run_tool
from perf_tests.baselines.file import load_baseline_file
from perf_tests.report.ab import pair_ratio_panel, plot_sources
from perf_tests.report.plot_style import MARKED_LABEL, WHISKER_LABEL, NoPlot
from perf_tests.report.plots import scaling_figure, scaling_plot
from perf_tests.session.report import markdown_report, terminal_table
from tools import promote_baseline
from tools.report import command as report

ENVIRONMENT = {"device": "NVIDIA H200", "driver": "580.159", "cuda": "13.0", "torch": "2.11.0",
               "dali": "1.52.0", "nccl": "2.27.7"}
SETTINGS = {"device_type": "cuda", "image_size": 224, "data_backend": "synthetic",
            "warmup_iters": 20, "timed_iters": 100}


def measured(nodes, gpus, precision, batch, runs, speedup, baseline=None, baseline_speedup=None,
             verdict="pass"):
    runs_sorted = sorted(runs)
    median = runs_sorted[len(runs) // 2]
    mean = sum(runs) / len(runs)
    stdev = (sum((value - mean) ** 2 for value in runs) / (len(runs) - 1)) ** 0.5
    row = {"nodes": nodes, "gpus_per_node": gpus, "batch_per_device": batch,
           "precision": precision, "image_size": 224, "data_backend": "synthetic",
           "runs_ips": runs, "median_ips": median, "mean_ips": mean, "min_ips": runs_sorted[0],
           "max_ips": runs_sorted[-1], "stdev_ips": stdev, "cv": stdev / mean,
           "speedup": speedup, "efficiency": speedup / (nodes * gpus), "tolerance": 0.05,
           "verdict": verdict, "message": "...", "settings": SETTINGS}
    if baseline is not None:
        row.update(baseline_ips=baseline, delta=median / baseline - 1,
                   baseline_speedup=baseline_speedup)
    return row


def unmeasured(nodes, gpus, precision, batch, verdict, message):
    return {"nodes": nodes, "gpus_per_node": gpus, "batch_per_device": batch,
            "precision": precision, "image_size": 224, "data_backend": "synthetic",
            "runs_ips": [], "tolerance": 0.05, "verdict": verdict, "message": message,
            "settings": SETTINGS}


def results_document(scale: float = 1.0) -> dict:
    """A full-profile session on one 4-GPU node; `scale` multiplies every fp32 run."""
    def fp32(runs):
        return [round(value * scale, 2) for value in runs]
    cases = {
        "1n1g_fp32_b128": measured(1, 1, "fp32", 128, fp32([1000.0, 1010.0, 990.0]), 1.0,
                                   baseline=1000.0, baseline_speedup=1.0),
        "1n2g_fp32_b128": measured(1, 2, "fp32", 128, fp32([1980.0, 1990.0, 2000.0]), 1.99,
                                   baseline=1960.0, baseline_speedup=1.96),
        "1n4g_fp32_b128": measured(1, 4, "fp32", 128, fp32([3900.0, 3920.0, 3940.0]), 3.92,
                                   baseline=3950.0, baseline_speedup=3.95),
        "1n8g_fp32_b128": unmeasured(1, 8, "fp32", 128, "skipped",
                                     "1n8g_fp32_b128 skipped: needs 8 CUDA devices, found 4"),
        "2n4g_fp32_b128": unmeasured(2, 4, "fp32", 128, "error",
                                     "2n4g_fp32_b128: rank 5 exited with code 1"),
        "1n1g_amp_b256": measured(1, 1, "amp", 256, [3000.0, 3030.0, 2970.0], 1.0,
                                  baseline=2800.0, baseline_speedup=1.0, verdict="improvement"),
        "1n2g_amp_b256": measured(1, 2, "amp", 256, [5900.0, 5950.0, 5850.0], 1.9667),
        "1n4g_amp_b256": unmeasured(1, 4, "amp", 256, "oom",
                                    "1n4g_amp_b256: out of memory on rank 2"),
    }
    for row in cases.values():
        if row["verdict"] == "pass" and "baseline_ips" not in row:
            row["verdict"] = "no-baseline"
    return {"schema_version": 1, "hardware": "nvidia-h200", "profile": "full",
            "environment": ENVIRONMENT, "launcher": "local",
            "baseline_file": "/repo/baselines/nvidia-h200.json",
            "started_at": "2026-11-22T10:00:00Z", "cases": cases}


def write_json(path: Path, payload) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2))
    return path


def write_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def table_lines(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("|")]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def assert_real_plot(path: Path) -> None:
    width, height = png_size(path)
    assert (width, height) == (1400, 600)
    assert path.stat().st_size > 30_000  # two panels of lines, bars and text, not a blank page


@pytest.fixture
def results_file(tmp_path) -> Path:
    return write_json(tmp_path / "session" / "results.json", results_document())


EXTRACTED = {"rn50": {
    "1n1g": {"average_speed": 367.1, "median_speed": 367.29, "speedup": 1.0,
             "batch_size_per_device": 128},
    "1n4g": {"average_speed": 1449.0, "median_speed": 1449.48, "speedup": 3.95,
             "batch_size_per_device": 128},
    "2n8g": {"average_speed": 5716.0, "median_speed": 5716.79, "speedup": 15.56,
             "batch_size_per_device": 128},
}}


# -- reports ---------------------------------------------------------------------------------

def test_report_of_a_results_file_as_a_subprocess(results_file):
    done = run_tool("report", results_file)
    assert done.returncode == 0, done.stderr
    folder = results_file.parent
    markdown = (folder / "report.md").read_text()
    assert markdown == markdown_report(results_document())  # what the suite itself writes
    first, scaling = table_lines(markdown)[:10], table_lines(markdown)[10:]
    assert first == [
        "| node_num | gpu_num_per_node | batch_size_per_device | precision | samples/s | spread "
        "| speedup | baseline samples/s | delta | verdict |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|---|",
        "| 1 | 1 | 256 | amp | 3000.00 | 1.0% | 1.00 | 2800.00 | +7.1% | improvement |",
        "| 1 | 2 | 256 | amp | 5900.00 | 0.8% | 1.97 | - | - | no-baseline |",
        "| 1 | 4 | 256 | amp | - | - | - | - | - | oom |",
        "| 1 | 1 | 128 | fp32 | 1000.00 | 1.0% | 1.00 | 1000.00 | +0.0% | pass |",
        "| 1 | 2 | 128 | fp32 | 1990.00 | 0.5% | 1.99 | 1960.00 | +1.5% | pass |",
        "| 1 | 4 | 128 | fp32 | 3920.00 | 0.5% | 3.92 | 3950.00 | -0.8% | pass |",
        "| 1 | 8 | 128 | fp32 | - | - | - | - | - | skipped |",
        "| 2 | 4 | 128 | fp32 | - | - | - | - | - | error |",
    ]
    # The scaling loss of the measured multi-device cases against their 1n1g's: no probe
    # figures in this file, so nothing said of the all-reduce.
    assert scaling[0].startswith("| case | devices | ideal img/s | measured img/s |")
    assert scaling[2:] == [
        "| 1n2g_amp_b256 | 2 | 6000.0 | 5900.0 | 98% | 0.0868 | 0.0853 | 0.00145 | - | - | - |",
        "| 1n2g_fp32_b128 | 2 | 2000.0 | 1990.0 | 100% | 0.129 | 0.128 | 0.000643 | - | - | - |",
        "| 1n4g_fp32_b128 | 4 | 4000.0 | 3920.0 | 98% | 0.131 | 0.128 | 0.00261 | - | - | - |"]
    assert "Environment: device NVIDIA H200, driver 580.159, cuda 13.0, torch 2.11.0" in markdown
    not_passed = markdown.split("## Cases that did not pass\n\n")[1].splitlines()
    assert not_passed[2:5] == ["- **oom** 1n4g_amp_b256: out of memory on rank 2",
                               "- **skipped** 1n8g_fp32_b128 skipped: needs 8 CUDA devices, "
                               "found 4",
                               "- **error** 2n4g_fp32_b128: rank 5 exited with code 1"]
    assert len(not_passed) == 5  # the three passing cases are not listed
    assert_real_plot(folder / "scaling.png")
    assert "1n4g_amp_b256" in done.stdout and f"wrote {folder / 'report.md'}" in done.stdout


def test_terminal_table_lists_every_case_with_its_verdict():
    lines = terminal_table(results_document()["cases"])
    assert lines[0].split() == ["case", "runs", "img/s", "spread", "speedup", "eff.",
                                "baseline", "delta", "detects", "verdict"]
    assert lines[2].split() == ["1n1g_amp_b256", "3", "3000.0", "1.0%", "1.00", "100%",
                                "2800.0", "+7.1%", "-", "improvement"]
    assert lines[9].split() == ["2n4g_fp32_b128"] + ["-"] * 8 + ["error"]
    assert lines[10:] == ["1n1g_amp_b256, 1n1g_fp32_b128, 1n2g_fp32_b128, 1n4g_fp32_b128 "
                          "judged with tolerance 5%"]


def test_report_of_extracted_logs_takes_the_precision_from_the_label(tmp_path, capsys):
    extracted = write_json(tmp_path / "result" / "pytorch_result.json", EXTRACTED)
    assert report.main([str(extracted), "--label", "ngc-fp32"]) == 0
    markdown = (tmp_path / "result" / "pytorch_result_report.md").read_text()
    assert table_lines(markdown) == [
        "| node_num | gpu_num_per_node | batch_size_per_device | precision | samples/s "
        "| speedup |",
        "|---:|---:|---:|---|---:|---:|",
        "| 1 | 1 | 128 | fp32 | 367.29 | 1.00 |",
        "| 1 | 4 | 128 | fp32 | 1449.48 | 3.95 |",
        "| 2 | 8 | 128 | fp32 | 5716.79 | 15.56 |",
    ]
    assert "## ngc-fp32" in markdown and "precision fp32 from the label" in markdown
    assert_real_plot(tmp_path / "result" / "pytorch_result_scaling.png")


def test_extracted_logs_without_a_precision_leave_it_out(tmp_path, capsys):
    extracted = write_json(tmp_path / "mxnet_result.json", EXTRACTED)
    assert report.main([str(extracted), "--output-dir", str(tmp_path / "out")]) == 0
    markdown = (tmp_path / "out" / "mxnet_result_report.md").read_text()
    assert "## mxnet" in markdown and "precision not stated" in markdown
    assert table_lines(markdown)[:3] == [
        "| node_num | gpu_num_per_node | batch_size_per_device | samples/s | speedup |",
        "|---:|---:|---:|---:|---:|",
        "| 1 | 1 | 128 | 367.29 | 1.00 |",
    ]


def test_several_inputs_and_published_figures_side_by_side(tmp_path, results_file, capsys):
    extracted = write_json(tmp_path / "pytorch_result.json", EXTRACTED)
    code = report.main([str(results_file), str(extracted), "--label", "h200",
                        "--label", "ngc-fp32", "--published",
                        "dlperf-ngc-pytorch,dlperf-mindspore", "--output-dir",
                        str(tmp_path / "out")])
    assert code == 0
    markdown = (tmp_path / "out" / "combined_report.md").read_text()
    # Every input's hardware, not one of them: the extracted logs do not state theirs.
    assert markdown.startswith("# ResNet50 v1.5 training throughput: nvidia-h200 vs hardware "
                               "not stated vs tesla-v100-sxm2-16gb\n")
    for heading in ("## h200", "## ngc-fp32", "## dlperf-ngc-pytorch (published)",
                    "## dlperf-mindspore (published)", "## Side by side"):
        assert f"\n{heading}\n" in markdown
    assert "DLPerf (github.com/Oneflow-Inc/DLPerf)" in markdown
    assert "| 1 | 8 | 128 | fp32 | 2887.65 | 7.86 |" in table_lines(markdown)
    side_by_side = markdown.split("## Side by side")[1]
    assert table_lines(side_by_side) == [
        "| node_num | gpu_num_per_node | h200 amp b256 | h200 fp32 b128 | ngc-fp32 fp32 b128 "
        "| dlperf-ngc-pytorch (published) fp32 b128 | dlperf-mindspore (published) fp32 b128 |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        "| 1 | 1 | 3000.00 (1.00) | 1000.00 (1.00) | 367.29 (1.00) | 367.29 (1.00) "
        "| 369.81 (1.00) |",
        "| 1 | 2 | 5900.00 (1.97) | 1990.00 (1.99) | - | - | 710.68 (1.92) |",
        "| 1 | 4 | oom | 3920.00 (3.92) | 1449.48 (3.95) | 1449.48 (3.95) | 1418.66 (3.84) |",
        "| 1 | 8 | - | skipped | - | 2887.65 (7.86) | 2773.82 (7.50) |",
        "| 2 | 4 | - | error | - | - | - |",
        "| 2 | 8 | - | - | 5716.79 (15.56) | 5716.79 (15.56) | 5483.22 (14.83) |",
        "| 4 | 8 | - | - | - | 10917.09 (29.72) | 10731.78 (29.02) |",
    ]
    assert_real_plot(tmp_path / "out" / "combined_scaling.png")


def test_published_figures_are_the_dlperf_v100_medians():
    expected = {
        "dlperf-ngc-pytorch": {"1n1g": 367.29, "1n4g": 1449.48, "1n8g": 2887.65,
                               "2n8g": 5716.79, "4n8g": 10917.09},
        "dlperf-mxnet-gluoncv": {"1n1g": 384.19, "1n2g": 749.04, "1n4g": 1494.58,
                                 "1n8g": 2556.03, "2n8g": 4855.34, "4n8g": 9579.74},
        "dlperf-mindspore": {"1n1g": 369.81, "1n2g": 710.68, "1n4g": 1418.66, "1n8g": 2773.82,
                             "2n8g": 5483.22, "4n8g": 10731.78},
    }
    assert report.published_names() == sorted([*expected, "ngc-pytorch-time-to-train"])
    for name, medians in expected.items():
        published = load_baseline_file(REPO_ROOT / "tools" / "published" / f"{name}.json")
        assert published.hardware == "tesla-v100-sxm2-16gb"
        assert {case_id: entry["median_ips"] for case_id, entry in published.entries.items()} \
            == {f"{topology}_fp32_b128": median for topology, median in medians.items()}
        for entry in published.entries.values():
            assert entry["speedup"] == round(entry["median_ips"] / medians["1n1g"], 4)
            assert entry["source"].startswith("published: DLPerf")
            assert entry["settings"] == {"device_type": "cuda", "image_size": 224}
            assert "recorded_at" not in entry


def test_comparison_of_two_results_files(tmp_path, capsys, monkeypatch):
    first = write_json(tmp_path / "old" / "results.json", results_document())
    second_document = results_document(scale=1.05)
    second_document["environment"] = {**ENVIRONMENT, "driver": "590.10"}
    del second_document["cases"]["1n2g_amp_b256"]
    second = write_json(tmp_path / "new" / "results.json", second_document)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert report.main(["--compare", str(first), str(second), "--label", "old",
                        "--label", "new"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[:3] == [f"A = old (`{first}`)", f"B = new (`{second}`)",
                           "environment: driver 580.159 -> 590.10"]
    row = next(line for line in printed if line.startswith("1n2g_fp32_b128"))
    assert row.split() == ["1n2g_fp32_b128", "1990.00", "2089.50", "+5.00%", "1.99", "1.99",
                           "too", "few", "runs", "(3+3", "runs", "cannot", "reach", "1%)"]
    assert "only in A: 1n2g_amp_b256" in printed
    # Written where the user is, never into a results folder (those are never reused).
    assert sorted(path.name for path in first.parent.iterdir()) == ["results.json"]
    assert sorted(path.name for path in second.parent.iterdir()) == ["results.json"]
    markdown = (here / "comparison.md").read_text()
    assert "- environment: driver 580.159 -> 590.10" in markdown
    too_few = "too few runs (3+3 runs cannot reach 1%)"
    assert table_lines(markdown) == [
        "| case | A img/s | B img/s | delta (B/A-1) | A speedup | B speedup "
        "| runs differ (Mann-Whitney, 1%) |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| 1n1g_amp_b256 | 3000.00 | 3000.00 | +0.00% | 1.00 | 1.00 | {too_few} |",
        "| 1n4g_amp_b256 | oom | oom | - | - | - | - |",
        f"| 1n1g_fp32_b128 | 1000.00 | 1050.00 | +5.00% | 1.00 | 1.00 | {too_few} |",
        f"| 1n2g_fp32_b128 | 1990.00 | 2089.50 | +5.00% | 1.99 | 1.99 | {too_few} |",
        f"| 1n4g_fp32_b128 | 3920.00 | 4116.00 | +5.00% | 3.92 | 3.92 | {too_few} |",
        "| 1n8g_fp32_b128 | skipped | skipped | - | - | - | - |",
        "| 2n4g_fp32_b128 | error | error | - | - | - | - |",
    ]
    assert "only in A: 1n2g_amp_b256." in markdown
    assert_real_plot(here / "comparison.png")


def test_comparison_says_whether_the_runs_differ(tmp_path):
    """Ten runs a side: a 3% slowdown in every run is significant, noise of the same size is
    not; run as a user does, from the folder that gets the comparison."""
    steady = [1000.0, 1004.0, 996.0, 1002.0, 998.0, 1001.0, 999.0, 1003.0, 997.0, 1000.5]
    first_document, second_document = results_document(), results_document()
    for document, fp32_runs, amp_runs in (
            (first_document, steady, steady),
            (second_document, [value * 0.97 for value in steady],
             [960.0, 1040.0, 980.0, 1020.0, 1000.0, 990.0, 1010.0, 970.0, 1030.0, 1001.0])):
        document["cases"]["1n1g_fp32_b128"]["runs_ips"] = fp32_runs
        document["cases"]["1n1g_amp_b256"]["runs_ips"] = amp_runs
    first = write_json(tmp_path / "a" / "results.json", first_document)
    second = write_json(tmp_path / "b" / "results.json", second_document)
    here = tmp_path / "review"
    here.mkdir()
    done = run_tool("report", "--compare", first, second, "--label", "a", "--label", "b",
                    cwd=here)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if "_b" in line}
    assert rows["1n1g_fp32_b128"].endswith("B slower (p 5.4e-06)")
    assert rows["1n1g_amp_b256"].endswith("not significant (p 0.49)")
    assert "environment: no change in device, driver, cuda, nccl, torch" in done.stdout
    assert (here / "comparison.md").is_file() and (here / "comparison.png").is_file()
    out = tmp_path / "out"
    done = run_tool("report", "--compare", first, second, "--output-dir", out, cwd=here)
    assert done.returncode == 0 and (out / "comparison.md").is_file()


def test_comparison_of_extracted_logs_against_published_figures(tmp_path, capsys):
    extracted = write_json(tmp_path / "mine_result.json", {"rn50": {
        "1n1g": {"average_speed": 400.0, "median_speed": 404.02, "speedup": 1.0,
                 "batch_size_per_device": 128}}})
    published = REPO_ROOT / "tools" / "published" / "dlperf-ngc-pytorch.json"
    code = report.main(["--compare", str(published), str(extracted), "--label", "ngc",
                        "--label", "mine-fp32", "--output-dir", str(tmp_path)])
    assert code == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("1n1g_fp32_b128"))
    # Published medians and extracted logs carry no runs to test.
    assert row.split() == ["1n1g_fp32_b128", "367.29", "404.02", "+10.00%", "1.00", "1.00", "-"]


@pytest.mark.parametrize("make_input, arguments, expected", [
    (lambda tmp: tmp / "missing.json", [], "missing.json does not exist"),
    (lambda tmp: write_text(tmp / "bad.json", "{not json"), [], "bad.json is not valid JSON"),
    (lambda tmp: write_json(tmp / "list.json", [1, 2]), [], "does not hold a JSON object"),
    (lambda tmp: write_json(tmp / "other.json", {"speed": 1}), [], "is none of a results.json"),
    (lambda tmp: write_json(tmp / "shape.json", {"rn50": {"eight": {}}}), [],
     "has configuration 'eight', not <N>n<G>g"),
    (lambda tmp: write_json(tmp / "cases.json", {"cases": {"1n1g_fp32_b8": {"nodes": "one"}}}),
     [], "case 1n1g_fp32_b8 has nodes 'one'"),
    (lambda tmp: write_json(tmp / "r.json", EXTRACTED), ["--published", "dlperf-tensorflow"],
     "--published dlperf-tensorflow: no "),
    (lambda tmp: write_json(tmp / "r.json", EXTRACTED), ["--label", "a", "--label", "b"],
     "2 --label given for 1 input(s)"),
])
def test_bad_report_input_is_one_line_and_exit_2(tmp_path, capsys, make_input, arguments,
                                                 expected):
    path = make_input(tmp_path)
    assert report.main([str(path), *arguments]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and expected in error
    assert error.startswith("rn50-perf report: error: ")
    assert "Traceback" not in error


def test_bad_report_inputs_from_the_command_line(tmp_path):
    done = run_tool("report", tmp_path / "missing.json")
    assert done.returncode == 2
    assert done.stderr == (f"rn50-perf report: error: input {tmp_path / 'missing.json'} "
                           "does not exist; check the path\n")
    done = run_tool("report", "--published", "nope")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "choose from dlperf-mindspore, dlperf-mxnet-gluoncv, dlperf-ngc-pytorch" in done.stderr
    done = run_tool("report", "--compare", tmp_path / "only-one.json")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "see --help" in done.stderr


def test_scaling_plot_with_the_suites_call(tmp_path):
    """plugin.py's call: one unnamed source."""
    path = scaling_plot({"": results_document()["cases"]}, tmp_path / "scaling.png",
                        "ResNet50 v1.5 on nvidia-h200")
    assert path == tmp_path / "scaling.png"
    assert_real_plot(path)


def cpu_session_cases() -> dict:
    """A smoke session: 1n2g and 2n1g share a device count, every baseline above its median."""
    def row(nodes, gpus, precision, batch, median, speedup, baseline, baseline_speedup):
        return {"nodes": nodes, "gpus_per_node": gpus, "batch_per_device": batch,
                "precision": precision, "runs_ips": [median * 0.98, median, median * 1.02],
                "median_ips": median, "speedup": speedup, "baseline_ips": baseline,
                "baseline_speedup": baseline_speedup, "verdict": "pass"}
    return {"1n1g_fp32_b8": row(1, 1, "fp32", 8, 20.0, 1.0, 21.0, 1.0),
            "1n2g_fp32_b8": row(1, 2, "fp32", 8, 34.0, 1.7, 36.0, 1.72),
            "2n1g_fp32_b8": row(2, 1, "fp32", 8, 33.5, 1.675, 35.0, 1.69),
            "1n1g_bf16_b4": row(1, 1, "bf16", 4, 2.6, 1.0, 2.8, 1.0)}


def line_extent(collection) -> Bbox:
    """Where a collection of straight lines (a baseline mark, a whisker) is drawn, in pixels,
    its line width included."""
    points = collection.get_transform().transform(
        [point for segment in collection.get_segments() for point in segment])
    half_width = collection.get_linewidth()[0] * collection.figure.dpi / 72 / 2
    return Bbox([points.min(axis=0), points.max(axis=0)]).padded(half_width)


def test_scaling_plot_labels_clear_of_marks_and_every_mark_in_the_legend():
    figure = scaling_figure({"": cpu_session_cases()}, "ResNet50 v1.5 on cpu-amd-epyc")
    speed_axis, bar_axis = figure.axes
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()

    # Each bar's value is written at its top (the median), whatever the baseline, and neither
    # the baseline mark nor the whisker strikes it through.
    labels = {text.get_text(): text for text in bar_axis.texts}
    assert labels["34"].xy[1] == 34.0 and labels["33.5"].xy[1] == 33.5
    assert labels["20"].xy[1] == 20.0 and labels["2.6"].xy[1] == 2.6
    assert len(bar_axis.collections) == 8   # a baseline mark and a whisker per bar
    marks = [line_extent(collection) for collection in bar_axis.collections]
    marks += [cap.get_window_extent(renderer) for cap in bar_axis.lines]
    for name in ("34", "33.5", "20"):
        extent = labels[name].get_window_extent(renderer)
        assert not any(extent.overlaps(mark) for mark in marks), name

    # 1n2g and 2n1g (both 2 devices, speedups 1.7 and 1.675) are apart, as are their names.
    names = {text.get_text(): text.get_window_extent(renderer) for text in speed_axis.texts}
    assert set(names) == {"1n2g", "2n1g"} and not names["1n2g"].overlaps(names["2n1g"])
    diamond = next(line for line in speed_axis.lines if line.get_marker() == "D")
    circle = next(line for line in speed_axis.lines if line.get_marker() == "o"
                  and len(line.get_xdata()) == 2)
    diamond_x = diamond.get_transform().transform((2, 1.675))[0]
    circle_x = circle.get_transform().transform((2, 1.7))[0]
    assert diamond_x - circle_x >= 10  # pixels

    # The legend shows the diamond and the baseline mark as drawn: black on both panels.
    legend = {text.get_text(): handle for text, handle in
              zip(figure.legends[0].get_texts(), figure.legends[0].legend_handles)}
    assert legend["another nodes x devices shape of that device count"].get_marker() == "D"
    assert legend["baseline"].get_color() == "black"
    baseline_ticks = [line for line in speed_axis.lines if line.get_marker() == "_"]
    assert len(baseline_ticks) == 2 and {line.get_color() for line in baseline_ticks} == {"black"}
    assert bar_axis.get_yscale() == "linear"


def whiskers(axis) -> list[tuple[float, float, float]]:
    """(x, low, high) of each whisker drawn on `axis`, x to 6 places."""
    spans = []
    for container in axis.containers:
        if isinstance(container, ErrorbarContainer):
            (x, low), (_, high) = container.lines[2][0].get_segments()[0]
            spans.append((round(float(x), 6), float(low), float(high)))
    return sorted(spans)


def legend_texts(figure) -> list[str]:
    return [text.get_text() for text in figure.legends[0].get_texts()]


def test_a_single_device_session_draws_the_throughput_panel_alone(tmp_path):
    """Nothing ran on more than one device: no speedup to draw, so no empty scaling panel."""
    cases = {"1n1g_fp32_b8": cpu_session_cases()["1n1g_fp32_b8"]}
    figure = scaling_figure({"": cases}, "ResNet50 v1.5 on cpu-amd-epyc")
    (bar_axis,) = figure.axes
    assert bar_axis.get_title().startswith("Throughput\n(no scaling panel: speedup needs cases "
                                           "measured on several devices)")
    assert len(bar_axis.patches) == 1
    assert legend_texts(figure) == ["fp32 b8", "baseline", WHISKER_LABEL]
    path = scaling_plot({"": cases}, tmp_path / "scaling.png", "title")
    assert png_size(path) == (800, 600)
    # Two device counts, one of them with a speedup: both panels.
    assert len(scaling_figure({"": cpu_session_cases()}, "title").axes) == 2


def ab_row(nodes, gpus, reference, candidate, speedups=None) -> dict:
    """A case of an A/B session as ab.py's judge writes it: the top-level figures are the
    candidate's, each side's runs and median under its name, a side's speedup only beyond one
    device."""
    median = statistics.median
    row = {"nodes": nodes, "gpus_per_node": gpus, "batch_per_device": 8, "precision": "fp32",
           "runs_ips": candidate, "median_ips": median(candidate), "min_ips": min(candidate),
           "max_ips": max(candidate), "verdict": "pass", "pairs": len(candidate),
           "reference": {"runs_ips": reference, "median_ips": median(reference)},
           "candidate": {"runs_ips": candidate, "median_ips": median(candidate)}}
    if speedups:
        row["reference"]["speedup"], row["candidate"]["speedup"] = speedups
        row["speedup"] = speedups[1]
    else:
        row["speedup"] = 1.0
    return row


AB_1N1G = ab_row(1, 1, [20.1, 19.5, 20.7, 20.0, 19.8], [18.2, 18.9, 18.0, 18.5, 19.0])


def test_an_ab_session_plots_each_side_with_its_own_runs():
    figure = scaling_figure(plot_sources({"1n1g_fp32_b8": AB_1N1G}), "A/B")
    (bar_axis,) = figure.axes   # one device count: no scaling panel
    bars = sorted((round(patch.get_x() + patch.get_width() / 2, 6), patch.get_height())
                  for patch in bar_axis.patches)
    assert [height for _, height in bars] == [20.0, 18.5]   # reference, candidate side by side
    assert whiskers(bar_axis) == [(bars[0][0], 19.5, 20.7), (bars[1][0], 18.0, 19.0)]
    assert legend_texts(figure) == ["reference: fp32 b8", "candidate: fp32 b8", WHISKER_LABEL]

    cases = {"1n1g_fp32_b8": AB_1N1G,
             "1n2g_fp32_b8": ab_row(1, 2, [34.0, 35.1, 33.2], [30.0, 31.5, 29.8],
                                    speedups=(1.7, 1.65))}
    speed_axis, bar_axis = scaling_figure(plot_sources(cases), "A/B").axes
    lines = sorted((list(line.get_xdata()), list(line.get_ydata()))
                   for line in speed_axis.lines if line.get_marker() == "o")
    # Each side's speedup line starts at its 1n1g case (1 by definition).
    assert lines == [([1, 2], [1.0, 1.65]), ([1, 2], [1.0, 1.7])]
    assert len(whiskers(bar_axis)) == 4


def test_an_ab_figure_names_the_stacks_and_draws_the_pair_ratios_the_verdict_judges():
    """Issue 60: the legend said `reference: fp32 b8` / `candidate: fp32 b8`, the reference's
    whisker ran from its busy pair's 3 img/s to 31, and the pair ratios were not drawn."""
    busy = {2: ["other processes used 1.8 of 2 cores"]}
    row = ab_row(1, 1, [30.1, 3.0, 31.0, 30.4, 29.8], [24.2, 2.5, 24.9, 24.0, 25.0])
    row["reference"]["marked_runs"] = row["candidate"]["marked_runs"] = busy
    row.update(reference_stack="image /images/a (bwrap)", candidate_stack="image /images/b "
               "(bwrap)", ratio=0.8, ratio_ci=[0.79, 0.83], tolerance=0.05, verdict="regression")
    cases = {"1n1g_fp32_b8": row}
    figure = scaling_figure(plot_sources(cases), "A/B", first_panel=pair_ratio_panel(cases))
    ratio_axis, bar_axis = figure.axes
    assert legend_texts(figure) == [
        "one pair's ratio", "a pair the host marked", "median pair ratio, 95% CI: regression",
        "1 +- tolerance", "reference: image /images/a (bwrap): fp32 b8",
        "candidate: image /images/b (bwrap): fp32 b8", WHISKER_LABEL, MARKED_LABEL]
    # The whiskers span the runs the host did not mark; the busy pair's runs are crosses.
    assert [(low, high) for _, low, high in whiskers(bar_axis)] == [(29.8, 31.0), (24.0, 25.0)]
    crosses = sorted(float(y) for line in bar_axis.lines if line.get_marker() == "x"
                     for y in line.get_ydata())
    assert crosses == [2.5, 3.0]
    # Each pair's ratio, the busy one crossed, and the median with its 95% interval.
    pairs = sorted(round(float(y), 4) for line in ratio_axis.lines
                   if line.get_marker() in (".", "x") for y in line.get_ydata())
    assert pairs == sorted(round(c / r, 4) for r, c in zip(row["reference"]["runs_ips"],
                                                           row["candidate"]["runs_ips"]))
    assert whiskers(ratio_axis) == [(0.12, 0.79, 0.83)]


def test_every_measured_bar_has_a_whisker_from_its_slowest_to_its_fastest_run():
    cases = results_document()["cases"]
    published = report.published_sources("dlperf-ngc-pytorch")[0]
    figure = scaling_figure({"h200": cases, published.label: published.cases}, "title",
                            references={published.label})
    bar_axis = figure.axes[1]
    # The five measured cases, not the published medians (no runs) nor the unmeasured cases.
    spans = sorted((low, high) for _, low, high in whiskers(bar_axis))
    assert spans == sorted((min(row["runs_ips"]), max(row["runs_ips"]))
                           for row in cases.values() if row["runs_ips"])
    assert len(spans) == 5 and WHISKER_LABEL in legend_texts(figure)
    # Whiskers end inside the axis, and one run has no spread to draw.
    assert bar_axis.get_ylim()[1] > max(high for _, high in spans)
    single = dict(cpu_session_cases()["1n1g_fp32_b8"], runs_ips=[20.0])
    figure = scaling_figure({"": {"1n1g_fp32_b8": single}}, "title")
    assert whiskers(figure.axes[0]) == [] and WHISKER_LABEL not in legend_texts(figure)


def test_cpu_figures_beside_published_v100_ones_get_a_log_axis(tmp_path):
    write_json(tmp_path / "cpu" / "results.json",
               {"schema_version": 1, "hardware": "cpu-amd-epyc", "profile": "smoke",
                "environment": {}, "cases": cpu_session_cases()})
    assert report.main([str(tmp_path / "cpu" / "results.json"), "--label", "cpu",
                        "--published", "dlperf-ngc-pytorch", "--output-dir",
                        str(tmp_path / "out")]) == 0
    markdown = (tmp_path / "out" / "combined_report.md").read_text()
    title = "ResNet50 v1.5 training throughput: cpu-amd-epyc vs tesla-v100-sxm2-16gb"
    assert markdown.startswith(f"# {title}\n")
    assert_real_plot(tmp_path / "out" / "combined_scaling.png")
    published = report.published_sources("dlperf-ngc-pytorch")[0]
    figure = scaling_figure({"cpu": cpu_session_cases(), published.label: published.cases},
                            title, references={published.label})
    bar_axis = figure.axes[1]
    assert bar_axis.get_yscale() == "log"
    assert bar_axis.get_ylim()[0] > 0 and bar_axis.get_ylim()[1] > 10917
    assert bar_axis.get_ylabel().endswith(", log scale")
    assert figure.texts[0].get_text() == title  # the suptitle


def test_a_session_with_only_skipped_cases_draws_no_plot_and_says_so(tmp_path):
    document = results_document()
    document["cases"] = {case_id: row for case_id, row in document["cases"].items()
                         if row["verdict"] == "skipped"}
    results = write_json(tmp_path / "session" / "results.json", document)
    with pytest.raises(NoPlot, match="no case was measured"):
        scaling_plot({"": document["cases"]}, tmp_path / "scaling.png", "title")
    done = run_tool("report", results)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ("rn50-perf report: no plot written: no case was measured "
                           "(every case skipped or failed)\n")
    assert sorted(path.name for path in results.parent.iterdir()) == ["report.md",
                                                                        "results.json"]
    assert done.stdout.endswith(f"wrote {results.parent / 'report.md'}\n")


# -- baseline promotion ----------------------------------------------------------------------

OTHER_ENTRY = {"median_ips": 12345.0, "runs_ips": [12300.0, 12345.0, 12400.0], "speedup": 7.9,
               "tolerance": 0.05, "recorded_at": "2026-11-01T00:00:00Z", "source": "measured"}


@pytest.fixture
def baseline_file(tmp_path) -> Path:
    return write_json(tmp_path / "baselines" / "nvidia-h200.json", {
        "schema_version": 1, "hardware": "nvidia-h200", "entries": {
            "1n8g_amp_b256": OTHER_ENTRY,
            "1n1g_fp32_b128": {"median_ips": 950.0, "tolerance": 0.05},
        }})


def test_promotion_round_trip_as_a_subprocess(results_file, baseline_file):
    # The fixture's cases have 3 runs each, fewer than the 10 a baseline is recorded from.
    done = run_tool("promote", results_file, "--baseline-file", baseline_file,
                    "--force")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["case", "old", "img/s", "new", "img/s", "delta", "runs", "cv",
                                "old", "tolerance", "new", "tolerance"]
    rows = {line.split()[0]: line.split() for line in lines[2:]
            if re.match(r"\dn\dg_\w+ ", line)}
    assert rows["1n1g_fp32_b128"] == ["1n1g_fp32_b128", "950.0", "1000.0", "+5.3%", "3", "1.0%",
                                      "0.05", "auto"]
    # The entry it replaced is in its lineage, and the lineage it extends is printed.
    assert "1n1g_fp32_b128: lineage 950.0 (?) -> 1000.0 img/s" in lines
    assert rows["1n2g_fp32_b128"][1:4] == ["none", "1990.0", "new"]
    assert set(rows) == {"1n1g_amp_b256", "1n2g_amp_b256", "1n1g_fp32_b128", "1n2g_fp32_b128",
                         "1n4g_fp32_b128"}
    assert ("not promoted (not measured): 1n4g_amp_b256 (oom), 1n8g_fp32_b128 (skipped), "
            "2n4g_fp32_b128 (error)") in lines
    assert lines[-1].startswith(f"wrote 5 entries to {baseline_file} (kept 1 other entry)")

    written = json.loads(baseline_file.read_text())
    assert written["hardware"] == "nvidia-h200"
    assert written["entries"]["1n8g_amp_b256"] == OTHER_ENTRY
    assert set(written["entries"]) == set(rows) | {"1n8g_amp_b256"}
    entry = written["entries"]["1n2g_fp32_b128"]
    cv = results_document()["cases"]["1n2g_fp32_b128"]["cv"]
    assert entry["median_ips"] == 1990.0
    assert entry["runs_ips"] == [1980.0, 1990.0, 2000.0]
    assert entry["cv"] == round(cv, 5)
    assert entry["speedup"] == 1.99
    assert entry["tolerance"] == "auto"   # each gate derives the band from the runs' noise
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", entry["recorded_at"])
    assert entry["source"] == f"promoted from {results_file.resolve()}"
    assert entry["environment"] == ENVIRONMENT
    assert entry["settings"] == SETTINGS
    assert load_baseline_file(baseline_file).entry("1n2g_fp32_b128").median_ips == 1990.0


def test_promotion_stores_a_given_tolerance_and_keeps_the_lineage(results_file, baseline_file,
                                                                  capsys):
    lineage = [{"median_ips": 900.0, "recorded_at": "2026-11-01T00:00:00Z",
                "changed": "torch 2.10.0 -> 2.10.5"}]
    document = json.loads(baseline_file.read_text())
    document["entries"]["1n1g_fp32_b128"].update(
        recorded_at="2026-11-20T00:00:00Z", lineage=lineage,
        environment={"torch": "2.10.5"})
    write_json(baseline_file, document)
    assert promote_baseline.main([str(results_file), "--baseline-file", str(baseline_file),
                                  "-k", "1n1g_fp32", "--force", "--tolerance", "0.03"]) == 0
    out = capsys.readouterr().out
    assert "1n1g_fp32_b128: lineage 900.0 (2026-11-01) -> 950.0 (2026-11-20) -> 1000.0 img/s" \
        in out
    entry = json.loads(baseline_file.read_text())["entries"]["1n1g_fp32_b128"]
    assert entry["tolerance"] == 0.03
    assert entry["lineage"] == lineage + [{
        "median_ips": 950.0, "recorded_at": "2026-11-20T00:00:00Z", "tolerance": 0.05,
        "changed": "torch 2.10.5 -> 2.11.0"}]


def test_promotion_with_a_keyword_expression(results_file, baseline_file, capsys):
    code = promote_baseline.main([str(results_file), "--baseline-file", str(baseline_file),
                                  "-k", "fp32 and not 1n1g or 1n2g_amp", "--tolerance", "0.1",
                                  "--force"])
    assert code == 0
    out = capsys.readouterr().out
    entries = json.loads(baseline_file.read_text())["entries"]
    assert set(entries) == {"1n8g_amp_b256", "1n1g_fp32_b128", "1n2g_fp32_b128",
                            "1n4g_fp32_b128", "1n2g_amp_b256"}
    assert entries["1n1g_fp32_b128"] == {"median_ips": 950.0, "tolerance": 0.05}  # not selected
    assert entries["1n4g_fp32_b128"]["tolerance"] == 0.1
    assert "1n8g_fp32_b128 (skipped), 2n4g_fp32_b128 (error)" in out
    assert "1n4g_amp_b256" not in out


@pytest.mark.parametrize("expression, selected", [
    ("1n1g", {"1n1g_fp32_b128", "1n1g_amp_b256"}),
    ("1N1G or 1n2g_amp", {"1n1g_fp32_b128", "1n1g_amp_b256", "1n2g_amp_b256"}),
    ("amp and not (1n1g or 1n2g)", {"1n4g_amp_b256"}),
    ("not fp32 and not amp", set()),
])
def test_keyword_expressions_select_as_pytest_k_does(expression, selected):
    matches = promote_baseline.keyword_matcher(expression)
    assert {case_id for case_id in results_document()["cases"] if matches(case_id)} == selected


@pytest.mark.parametrize("expression", ["", "and", "fp32 or", "(fp32", "fp32 )", "not"])
def test_bad_keyword_expressions_are_input_errors(expression):
    with pytest.raises(report.InputError, match="-k"):
        promote_baseline.keyword_matcher(expression)


def test_dry_run_writes_nothing(results_file, baseline_file, capsys):
    before = baseline_file.read_bytes()
    assert promote_baseline.main([str(results_file), "--baseline-file", str(baseline_file),
                                  "--dry-run", "--force"]) == 0
    out = capsys.readouterr().out
    assert baseline_file.read_bytes() == before
    assert re.search(r"^1n1g_fp32_b128\s+950\.0\s+1000\.0\s+\+5\.3%", out, re.MULTILINE)
    assert f"dry run: {baseline_file} not changed (5 entries would be written, 1 other " \
        "entry kept)" in out


def test_default_baseline_file_is_named_by_the_results_hardware(tmp_path, capsys):
    document = results_document()
    document["hardware"] = "test-only-hardware-key"
    results = write_json(tmp_path / "results.json", document)
    assert promote_baseline.main([str(results), "--dry-run", "-k", "1n1g_fp32", "--force"]) == 0
    assert (f"dry run: {REPO_ROOT / 'baselines' / 'test-only-hardware-key.json'} not changed"
            in capsys.readouterr().out)
    assert not (REPO_ROOT / "baselines" / "test-only-hardware-key.json").exists()


def test_nothing_measured_to_promote(results_file, baseline_file, capsys):
    before = baseline_file.read_bytes()
    assert promote_baseline.main([str(results_file), "--baseline-file", str(baseline_file),
                                  "-k", "1n8g or 2n4g"]) == 1
    assert "not measured: 1n8g_fp32_b128 (skipped), 2n4g_fp32_b128 (error)" \
        in capsys.readouterr().out
    assert baseline_file.read_bytes() == before


TEN_RUNS = [990.0, 995.0, 1000.0, 1000.0, 1005.0, 1010.0, 998.0, 1002.0, 1001.0, 999.0]


def test_promotion_of_fewer_runs_than_a_baseline_needs_force(results_file, baseline_file):
    before = baseline_file.read_bytes()
    done = run_tool("promote", results_file, "--baseline-file", baseline_file,
                    "-k", "fp32")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "rn50-perf promote: error: not promoted: 1n1g_fp32_b128, 1n2g_fp32_b128, "
        "1n4g_fp32_b128 have 3 runs, fewer than the 10 a baseline is recorded from (rerun with "
        "--perf-runs 10); pass --force to promote anyway, or leave those cases out with -k\n")
    assert baseline_file.read_bytes() == before
    done = run_tool("promote", results_file, "--baseline-file", baseline_file,
                    "-k", "fp32", "--force")
    assert done.returncode == 0, done.stderr
    assert "wrote 3 entries" in done.stdout


def test_a_baseline_of_ten_runs_is_promoted_without_force(results_file, baseline_file):
    document = results_document()
    document["cases"]["1n1g_fp32_b128"]["runs_ips"] = TEN_RUNS
    write_json(results_file, document)
    done = run_tool("promote", results_file, "--baseline-file", baseline_file,
                    "-k", "1n1g_fp32")
    assert done.returncode == 0, done.stderr
    assert f"wrote 1 entry to {baseline_file} (kept 1 other entry)" in done.stdout
    assert json.loads(baseline_file.read_text())["entries"]["1n1g_fp32_b128"]["runs_ips"] \
        == TEN_RUNS


def time_to_train_row(verdict: str = "pass") -> dict:
    """A smoke time-to-train case of three trainings, all at the target."""
    return {"nodes": 1, "gpus_per_node": 1, "precision": "fp32", "batch_per_device": 16,
            "runs_ips": [300.0, 310.0, 305.0], "median_ips": 305.0, "verdict": verdict,
            "tolerance": 0.35, "runs_time_to_train_s": [40.0, 42.0, 38.5],
            "time_to_train_s": 40.0, "reached_target": True,
            "runs_reached_target": [True, True, True], "top1": 0.84,
            "runs_top1": [0.84, 0.83, 0.86], "target_top1": 0.8, "epochs": 3,
            "settings": {"image_size": 32, "data_backend": "dali-cpu"}}


def test_a_time_to_train_case_is_promoted_with_its_time_and_top1(results_file, baseline_file):
    document = results_document()
    document["profile"] = "smoke"
    document["cases"] = {"1n1g_fp32_b16_ttt": time_to_train_row()}
    write_json(results_file, document)
    # Three trainings are what the smoke profile records a time-to-train baseline from.
    done = run_tool("promote", results_file, "--baseline-file", baseline_file)
    assert done.returncode == 0, done.stderr
    entry = json.loads(baseline_file.read_text())["entries"]["1n1g_fp32_b16_ttt"]
    assert entry["time_to_train_s"] == 40.0 and entry["runs_time_to_train_s"] == [40.0, 42.0,
                                                                                  38.5]
    assert entry["top1"] == 0.84 and entry["runs_top1"] == [0.84, 0.83, 0.86]
    assert entry["reached_target"] is True and entry["target_top1"] == 0.8
    assert entry["epochs"] == 3 and entry["median_ips"] == 305.0
    # No band derived from img/s: the time is judged by the time-to-train profile's band.
    assert "tolerance" not in entry
    # The reviewer sees what the entry is judged on.
    assert "1n1g_fp32_b16_ttt: time to train none -> 40.0 s, top-1 84.0%" in done.stdout


def test_a_time_to_train_case_without_its_figures_is_not_promoted(results_file, baseline_file):
    """A training that crashed keeps the img/s of those that ended, but no time to train: as a
    throughput entry it would replace the case's time-to-train baseline."""
    row = time_to_train_row("error")
    for key in ("runs_time_to_train_s", "time_to_train_s", "runs_top1", "top1"):
        row.pop(key)
    document = results_document()
    document["profile"] = "smoke"
    document["cases"] = {"1n1g_fp32_b16_ttt": row}
    write_json(results_file, document)
    done = run_tool("promote", results_file, "--baseline-file", baseline_file,
                    "--force")
    assert done.returncode == 1
    assert "1n1g_fp32_b16_ttt (no time-to-train figures)" \
        in done.stdout + done.stderr


def test_a_time_to_train_case_that_did_not_converge_needs_force(results_file, baseline_file):
    document = results_document()
    document["profile"] = "smoke"
    document["cases"] = {"1n1g_fp32_b16_ttt": time_to_train_row("not-converged")}
    write_json(results_file, document)
    done = run_tool("promote", results_file, "--baseline-file", baseline_file)
    assert done.returncode == 2
    assert "1n1g_fp32_b16_ttt was judged not-converged" in done.stderr


MEMORY_GROWN = {"memory_regression": "1n1g_fp32_b128: peak memory (CUDA allocator's peak, its "
                                     "largest rank) 10.00 GiB -> 14.00 GiB (+40%, tolerance 10%)",
                "throughput_verdict": "pass"}


@pytest.mark.parametrize("verdict, fields, why", [
    ("regression", MEMORY_GROWN, "1n1g_fp32_b128 fails the gate: peak memory (CUDA allocator's "
     "peak, its largest rank) 10.00 GiB -> 14.00 GiB (+40%, tolerance 10%)"),
    ("error", {}, "1n1g_fp32_b128 was judged error")])
def test_a_regression_or_an_error_with_runs_is_promoted_only_with_force(results_file,
                                                                        baseline_file, verdict,
                                                                        fields, why):
    """An error with runs: measured, then the baseline file could not be written. A regression
    names the measure the gate failed it on (issue 63: a memory regression was promoted with
    nothing said), and a forced promotion keeps it in the lineage."""
    document = results_document()
    document["cases"]["1n1g_fp32_b128"].update(runs_ips=TEN_RUNS, verdict=verdict, **fields)
    write_json(results_file, document)
    before = baseline_file.read_bytes()
    done = run_tool("promote", results_file, "--baseline-file", baseline_file,
                    "-k", "1n1g_fp32")
    assert done.returncode == 2
    assert done.stderr == (f"rn50-perf promote: error: not promoted: {why}; pass --force to "
                           "promote anyway, or leave those cases out with -k\n")
    assert baseline_file.read_bytes() == before
    done = run_tool("promote", results_file, "--baseline-file", baseline_file,
                    "-k", "1n1g_fp32", "--force")
    assert done.returncode == 0, done.stderr
    entry = json.loads(baseline_file.read_text())["entries"]["1n1g_fp32_b128"]
    assert entry["median_ips"] == 1000.0 and "accepted" not in entry
    if fields:
        accepted = why.split(": ", 1)[1]
        assert entry["lineage"][-1]["accepted"] == [accepted]
        assert f"; accepted with --force: {accepted}" in done.stdout


@pytest.mark.parametrize("setup, arguments, expected", [
    (lambda tmp, results, baseline: None, ["-k", "4n8g"], "-k '4n8g' selects none of the cases"),
    (lambda tmp, results, baseline: None, ["-k", "fp32 and"],
     "-k 'fp32 and': at column 9: expected not OR left parenthesis OR identifier; got end of "
     "input; use words"),
    (lambda tmp, results, baseline: baseline.write_text("{broken"), [], "is not valid JSON"),
    (lambda tmp, results, baseline: write_json(baseline, {"schema_version": 1,
                                                          "hardware": "tesla-v100-sxm2-16gb",
                                                          "entries": {}}),
     [], "is for tesla-v100-sxm2-16gb, results"),
    (lambda tmp, results, baseline: write_json(results, {"hardware": "x"}), [],
     "has no 'cases' object"),
    (lambda tmp, results, baseline: results.write_text("nope"), [], "is not valid JSON"),
    (lambda tmp, results, baseline: results.unlink(), [], "does not exist"),
])
def test_bad_promotion_input_is_one_line_and_exit_2(tmp_path, results_file, baseline_file,
                                                    capsys, setup, arguments, expected):
    setup(tmp_path, results_file, baseline_file)
    before = baseline_file.read_bytes() if baseline_file.exists() else None
    code = promote_baseline.main([str(results_file), "--baseline-file", str(baseline_file),
                                  *arguments])
    error = capsys.readouterr().err
    assert code == 2
    assert error.count("\n") == 1 and error.startswith("rn50-perf promote: error: ")
    assert expected in error
    assert (baseline_file.read_bytes() if baseline_file.exists() else None) == before


def test_bad_promotion_inputs_from_the_command_line(tmp_path):
    done = run_tool("promote", tmp_path / "results.json")
    assert done.returncode == 2
    assert done.stderr == ("rn50-perf promote: error: results file "
                           f"{tmp_path / 'results.json'} does not exist; check the path\n")
    done = run_tool("promote", tmp_path / "results.json", "--tolerance", "2")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "must be a fraction between 0 and 1" in done.stderr


def test_comparison_says_where_the_host_marked_runs_and_judges_the_others(tmp_path, capsys,
                                                                         monkeypatch):
    """Issue 60: a session the host marked busy in every run read `-89.40%  B slower (p
    0.00012)`, blaming B's stack for the host's tenfold drop."""
    busy = ["other processes used 1.8 of 2 cores"]
    first_document, second_document = results_document(), results_document()
    slow = {**second_document["cases"]["1n1g_fp32_b128"], "runs_ips": [105.0, 110.0, 100.0],
            "median_ips": 105.0, "verdict": "host-unfit", "marked_runs": {
                str(number): busy for number in (1, 2, 3)}}
    second_document["cases"]["1n1g_fp32_b128"] = slow
    first_document["cases"]["1n2g_fp32_b128"]["marked_runs"] = {"2": busy}
    first = write_json(tmp_path / "a" / "results.json", first_document)
    second = write_json(tmp_path / "b" / "results.json", second_document)
    monkeypatch.chdir(tmp_path)
    assert report.main(["--compare", str(first), str(second)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert re.split(r"\s{2,}", printed[4])[-2:] == ["runs differ (Mann-Whitney, 1%)",
                                                    "host-marked runs"]
    cells = {line.split()[0]: re.split(r"\s{2,}", line) for line in printed[6:]
             if line.startswith("1n")}
    assert cells["1n1g_fp32_b128"][3:] == [
        "-89.50%", "1.00", "1.00", "not judged: the host marked every run of B",
        "B runs 1-3 of 3 (host-unfit)"]
    assert cells["1n2g_fp32_b128"][-2:] == [
        "too few runs (2+3 runs cannot reach 1%), unmarked runs", "A run 2 of 3"]
    assert cells["1n4g_fp32_b128"][-2:] == ["too few runs (3+3 runs cannot reach 1%)", "-"]
    assert "| B runs 1-3 of 3 (host-unfit) |" in (tmp_path / "comparison.md").read_text()


def test_comparison_names_the_settings_that_changed(tmp_path, capsys, monkeypatch):
    """As the gate's failure line does: 'environment: ...; settings: threads 2 -> 1'; where the
    cases changed differently, each change with its cases."""
    first_document, second_document = results_document(), results_document()
    for row in first_document["cases"].values():
        row["settings"] = {**SETTINGS, "threads": 2}
    for row in second_document["cases"].values():
        row["settings"] = {**SETTINGS, "threads": 1}
    first = write_json(tmp_path / "a" / "results.json", first_document)
    second = write_json(tmp_path / "b" / "results.json", second_document)
    monkeypatch.chdir(tmp_path)
    assert report.main(["--compare", str(first), str(second)]) == 0
    expected = ("environment: no change in device, driver, cuda, nccl, torch; "
                "settings: threads 2 -> 1")
    assert capsys.readouterr().out.splitlines()[2] == expected
    assert f"- {expected}" in (tmp_path / "comparison.md").read_text()

    second_document["cases"]["1n1g_fp32_b128"]["settings"]["data_backend"] = "dali-cpu"
    second_document["cases"]["1n2g_fp32_b128"]["settings"]["threads"] = 2
    write_json(second, second_document)
    assert report.main(["--compare", str(first), str(second)]) == 0
    assert capsys.readouterr().out.splitlines()[2] == (
        "environment: no change in device, driver, cuda, nccl, torch; settings: "
        "threads 2 -> 1 (1n1g_amp_b256, 1n2g_amp_b256, 1n4g_amp_b256, 1n4g_fp32_b128, "
        "1n8g_fp32_b128, 2n4g_fp32_b128); data_backend synthetic -> dali-cpu, threads 2 -> 1 "
        "(1n1g_fp32_b128)")

    # A baseline file's entries record their settings too.
    baseline = write_json(tmp_path / "baseline.json", {"schema_version": 1, "entries": {
        "1n1g_fp32_b128": {"median_ips": 1000.0, "settings": {**SETTINGS, "threads": 2}}}})
    assert report.main(["--compare", str(baseline), str(second)]) == 0
    assert capsys.readouterr().out.splitlines()[2] == (
        "environment: A records none; settings: data_backend synthetic -> dali-cpu, "
        "threads 2 -> 1")


def ab_document() -> dict:
    """An A/B session: per case the candidate's runs (pairs with the reference's), one row
    written with `kind`, one before it (its `candidate` says A/B)."""
    document = results_document()
    document["candidate"] = "env OMP_WAIT_POLICY=PASSIVE"
    first = measured(1, 1, "fp32", 128, TEN_RUNS, 1.0)
    second = measured(1, 2, "fp32", 128, [2 * value for value in TEN_RUNS], 2.0)
    first.update(kind="ab", reference={"runs_ips": TEN_RUNS, "median_ips": 1000.0})
    second.update(candidate={"runs_ips": second["runs_ips"], "median_ips": 2000.0})
    document["cases"] = {"1n1g_fp32_b128": first, "1n2g_fp32_b128": second,
                         "1n4g_fp32_b128": measured(1, 4, "fp32", 128, TEN_RUNS, 1.0)}
    return document


def test_an_ab_session_is_never_promoted(results_file, baseline_file):
    """Its runs are a candidate stack's, in pairs: not this stack's baseline, even with --force
    (as --perf-update-baselines refuses a candidate)."""
    write_json(results_file, ab_document())
    before = baseline_file.read_bytes()
    done = run_tool("promote", results_file, "--baseline-file", baseline_file,
                    "--force")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "rn50-perf promote: error: not promoted: 1n1g_fp32_b128, 1n2g_fp32_b128 "
        "are A/B cases, a candidate stack's runs in pairs with this stack's, never a baseline "
        "(not even with --force); rerun without --perf-candidate-*, or with "
        "--perf-update-baselines on the stack you want as the baseline, or leave those cases "
        "out with -k\n")
    assert baseline_file.read_bytes() == before
    done = run_tool("promote", results_file, "--baseline-file", baseline_file,
                    "-k", "1n4g")
    assert done.returncode == 0, done.stderr
    assert set(json.loads(baseline_file.read_text())["entries"]) == {
        "1n8g_amp_b256", "1n1g_fp32_b128", "1n4g_fp32_b128"}


def test_a_max_batch_search_is_not_promoted_and_says_how_to_record_it(results_file,
                                                                      baseline_file):
    document = results_document()
    document["cases"] = {
        "1n1g_fp32_b128": {**measured(1, 1, "fp32", 128, TEN_RUNS, 1.0), "kind": "throughput"},
        "1n1g_fp32_maxbatch": {**unmeasured(1, 1, "fp32", 128, "pass", "max batch 256"),
                               "kind": "max-batch", "max_batch": 256, "oom_batch": 288}}
    write_json(results_file, document)
    done = run_tool("promote", results_file, "--baseline-file", baseline_file)
    assert done.returncode == 0, done.stderr
    assert ("not promoted (not measured): 1n1g_fp32_maxbatch (a max-batch search: record it "
            "with --perf-find-max-batch --perf-update-baselines)") in done.stdout.splitlines()
    assert "1n1g_fp32_maxbatch" not in json.loads(baseline_file.read_text())["entries"]



def test_promotion_refuses_what_update_baselines_refuses_a_junk_speedup(results_file,
                                                                         baseline_file):
    """The report's loaded host: ten runs, but a two-device speedup of 7.30 (365% efficiency)
    because the 1n1g reference ran slow; the same rule as --perf-update-baselines."""
    document = results_document()
    row = document["cases"]["1n2g_fp32_b128"]
    row["runs_ips"], row["speedup"] = [value * 2 for value in TEN_RUNS], 7.30
    write_json(results_file, document)
    before = baseline_file.read_bytes() if baseline_file.exists() else None
    # Not even with --force (issue 48: a refusal's advice stored speedup 4.29 on two devices).
    for force in ([], ["--force"]):
        done = run_tool("promote", results_file, "--baseline-file", baseline_file,
                        "-k", "1n2g_fp32", *force)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert ("not promoted (not even with --force): 1n2g_fp32_b128: speedup 7.30 on 2 devices "
                "is a scaling efficiency of 365%, which cannot be true: its 1n1g reference ran "
                "slow; record the 1n1g case and these again, on a quiet host, or leave these "
                "out with -k") in done.stderr
        assert (baseline_file.read_bytes() if baseline_file.exists() else None) == before


def test_a_report_of_an_ab_session_plots_both_stacks_and_compare_refuses_it(results_file,
                                                                            monkeypatch,
                                                                            capsys):
    document = ab_document()
    for row in document["cases"].values():   # both sides of every case, as the suite writes
        row.update(kind="ab", reference={"runs_ips": TEN_RUNS, "median_ips": 1000.0},
                   candidate={"runs_ips": row["runs_ips"], "median_ips": row["median_ips"]})
    write_json(results_file, document)
    plotted = []
    monkeypatch.setattr(report, "scaling_plot",
                        lambda sources, path, title, references, first_panel:
                        plotted.append((sorted(sources), first_panel is not None)) or path)
    assert report.main([str(results_file)]) == 0
    assert plotted == [(["candidate", "reference"], True)]   # and the pair ratios
    assert report.main(["--compare", str(results_file), str(results_file)]) == 2
    assert (f"{results_file} is an A/B session: its own report compares its two stacks "
            f"(rn50-perf report {results_file}); --compare takes sessions of one stack "
            "each") in capsys.readouterr().err


def test_promotion_refuses_a_speedup_over_a_1n1g_case_the_suite_refused(results_file,
                                                                       baseline_file):
    document = results_document()
    document["cases"]["1n1g_fp32_b128"].update(verdict="error", baseline_refused=["busy"])
    document["cases"]["1n2g_fp32_b128"]["runs_ips"] = [value * 2 for value in TEN_RUNS]
    write_json(results_file, document)
    done = run_tool("promote", results_file, "--baseline-file", baseline_file,
                    "-k", "1n2g_fp32")
    assert done.returncode == 2
    assert ("1n2g_fp32_b128: its speedup 1.99 is over 1n1g_fp32_b128's median, whose runs were "
            "refused as a baseline") in done.stderr


def test_promotion_leaves_out_the_runs_a_busy_host_marked(results_file, baseline_file):
    """The same rule as --perf-update-baselines: a marked run never becomes part of an entry, and
    too few unmarked runs are refused with the marks."""
    busy = ["other processes used 1.4 of 2 cores"]
    document = results_document()
    row = document["cases"]["1n1g_fp32_b128"]
    row["runs_ips"] = TEN_RUNS + [value / 3 for value in TEN_RUNS[:2]]
    row["marked_runs"] = {"11": busy, "12": busy}
    write_json(results_file, document)
    done = run_tool("promote", results_file, "--baseline-file", baseline_file,
                    "-k", "1n1g_fp32")
    assert done.returncode == 0, done.stderr
    assert json.loads(baseline_file.read_text())["entries"]["1n1g_fp32_b128"]["runs_ips"] \
        == TEN_RUNS
    row["marked_runs"] = {"3": busy, "4": busy, "5": busy}
    write_json(results_file, document)
    done = run_tool("promote", results_file, "--baseline-file", baseline_file,
                    "-k", "1n1g_fp32")
    assert done.returncode == 2
    assert ("not promoted: 1n1g_fp32_b128: the host was unfit in runs 3-5: other processes "
            "used 1.4 of 2 cores, leaving 9 unmarked runs of the 10 needed (where this load "
            "belongs in the baseline, --perf-ignore-host-state records it); ") in done.stderr
