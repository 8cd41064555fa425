"""The option table (`perf_tests/cli/options.py`): every option is one row, and the row registers
the flag, gives its `Settings` attribute (perf_tests/cli/settings.py) its default and reaches the
workers' `TrainConfig`; the fine settings are `--perf-set` keys, rows that fill their attributes
the same way; the spellings from before the prefix read as their new ones."""
import argparse
import dataclasses

import pytest

from perf_tests.cli.option import Option
from perf_tests.cli.options import GROUPS, KEYS, OPTIONS, RENAMED
from perf_tests.cli.settings import (Settings, SettingsError, settings_from_args, settings_of,
                                     unfilled_settings)
from perf_tests.context.baseline_store import BaselineStore
from perf_tests.context.context import make_context
from perf_tests.core.cases import SMOKE, Case
from perf_tests.results.folder import ResultsFolder
from perf_tests.runs.host import HostFacts
from perf_tests.runs.launch import Stack
from perf_tests.runs.launchers import make_launcher
from rn50_model.config import TrainConfig


def parsed(arguments: list[str], table=OPTIONS) -> argparse.Namespace:
    """The table registered on a plain argparse parser (the same `addoption` signature as a
    pytest option group) and `arguments` parsed by it."""
    parser = argparse.ArgumentParser()
    for option in table:
        option.add_to(parser.add_argument)
    return parser.parse_args(arguments)


ROWS = (*OPTIONS, *KEYS.values())


def test_rows_are_unique_and_every_help_states_its_default():
    flags = [option.flag for option in ROWS]
    fields = [option.field for option in ROWS if option.field]
    assert len(set(flags)) == len(flags) and len(set(fields)) == len(fields)
    undocumented = [option.flag for option in ROWS if "default" not in option.help]
    assert undocumented == []


def test_every_option_has_the_prefix_and_there_are_at_most_thirty():
    """Issue 43: one prefix, as pytest-benchmark's 33 options; the fine settings are keys."""
    assert [option.flag for option in OPTIONS if not option.flag.startswith("--perf-")] == []
    assert len(OPTIONS) <= 30
    assert [group.name for group in GROUPS] == ["gate", "workload", "launch", "ab", "modes",
                                                 "output"]


def test_train_rows_name_fields_of_the_workers_config():
    known = {spec.name for spec in dataclasses.fields(TrainConfig)}
    assert {option.train for option in ROWS if option.train} <= known


def test_a_parsed_command_line_becomes_settings():
    values = parsed(["--perf-runs", "4", "--perf-case", "1n2g_fp32_b8", "--perf-case",
                     "1n1g_bf16_b4", "--perf-candidate-env", "NCCL_ALGO=Ring",
                     "--perf-profile", "smoke", "--perf-set", "memory-limit=2G", "--perf-set",
                     "compile=on", "--perf-set", "iters=7", "--perf-set", "iters=9"])
    settings = settings_of(lambda dest: getattr(values, dest))
    assert settings.runs == 4 and settings.profile is SMOKE
    assert settings.extra_cases == (Case(1, 2, "fp32", 8), Case(1, 1, "bf16", 4))
    assert settings.candidate == Stack(env=(("NCCL_ALGO", "Ring"),))
    assert settings.train_values()["memory_limit_bytes"] == 2 * 2**30
    assert settings == Settings(runs=4, profile=SMOKE, extra_cases=settings.extra_cases,
                                candidate_env=(("NCCL_ALGO", "Ring"),),
                                memory_limit=2 * 2**30, compile=True, timed_iters=9)


def test_update_baselines_and_its_force_form_are_one_flag():
    assert not settings_of(lambda dest: getattr(parsed([]), dest)).update_baselines
    for arguments, expected in ((["--perf-update-baselines"], True),
                                (["--perf-update-baselines=force"], "force"),
                                (["--perf-update-baselines=force", "--perf-update-baselines"],
                                 "force")):
        values = parsed(arguments)
        settings = settings_of(lambda dest, values=values: getattr(values, dest))
        assert (settings.update_baselines, settings.force_baselines) == \
            (expected, expected == "force")


def test_every_old_spelling_names_an_option_of_today():
    spellings = {spelling for option in OPTIONS for spelling in (option.flag, *option.forms)}
    for old in RENAMED:
        flag, _, rest = old.use.partition(" ")
        assert flag in spellings, old
        if flag == "--perf-set":
            assert rest.partition("=")[0] in KEYS, old
    assert len({old.flag for old in RENAMED}) == len(RENAMED)
    assert not {old.flag for old in RENAMED} & {option.flag for option in OPTIONS}
    assert [old.line for old in RENAMED if old.flag in ("--launcher", "--perf-iters",
                                                        "--force-baselines")] == [
        "--launcher was renamed: use --perf-launcher",
        "--force-baselines was renamed: use --perf-update-baselines=force",
        "--perf-iters was renamed: use --perf-set iters=N"]


def test_a_tool_takes_the_suites_options_through_one_parser():
    settings, unknown = settings_from_args(["--perf-set", "iters=3", "-x", "--perf-runs", "2"])
    assert (settings.timed_iters, settings.runs, unknown) == (3, 2, ["-x"])
    with pytest.raises(SettingsError, match="argument --perf-set: iters=0: 0 must be at least 1"):
        settings_from_args(["--perf-set", "iters=0"])


def test_defaults_are_the_command_lines_and_no_candidate_means_no_ab():
    values = parsed([])
    assert settings_of(lambda dest: getattr(values, dest)) == Settings()
    assert Settings().candidate is None and Settings().profile is None


def test_every_train_row_reaches_the_workers_config(tmp_path):
    settings = Settings(profile=SMOKE, warmup_iters=1, timed_iters=3, image_size=48,
                        memory_format="contiguous", threads=1, loss_scale="static",
                        compile=True, memory_limit=123 * 2**20)
    context = make_context(
        requested=settings, settings=settings.resolved(SMOKE), profile=SMOKE,
        host=HostFacts({"device_count": 0, "cpu_count": 2}), rootdir=tmp_path,
        results=ResultsFolder(tmp_path / "results"),
        baselines=BaselineStore(tmp_path / "baseline.json", "cpu"),
        launcher=make_launcher("local", None), progress=print)
    config = context.workers.train_config(Case(1, 1, "fp32", 8))
    assert (config.warmup_iters, config.timed_iters, config.image_size, config.memory_format,
            config.threads, config.loss_scale, config.compile, config.memory_limit_bytes,
            config.data_backend, config.device) == (1, 3, 48, "contiguous", 1, "static", True,
                                                    123 * 2**20, "synthetic", "cpu")


def test_every_row_is_a_setting_and_every_setting_a_row():
    """What the table promises a developer: a row's flag, its `Settings` attribute (defaulting
    to the row's default) and, with `train=`, its worker setting; a row without its attribute,
    or an attribute without its row, is caught here."""
    assert unfilled_settings() == (set(), set())
    table = (*ROWS, Option("seed", train="seed", type=int, default=0,
                           help="the workers' random seed (default 0)"))
    assert unfilled_settings(table) == ({"seed"}, set())
    assert unfilled_settings(ROWS[1:]) == (set(), {ROWS[0].field})
    defaults = {spec.name: spec.default for spec in dataclasses.fields(Settings)}
    assert defaults == {option.field: option.value(option.default) for option in ROWS
                        if option.field}


@pytest.mark.parametrize("arguments, words", [
    (["--perf-runs", "0"], "0 must be at least 1"),
    (["--perf-profile", "huge"], "invalid choice: 'huge'"),
    (["--perf-set", "iters=0"], "argument --perf-set: iters=0: 0 must be at least 1"),
    (["--perf-set", "itres=5"], "'itres=5': no key 'itres'; use KEY=VALUE with KEY one of warmup, "
                                "iters, max-runs"),
    (["--perf-set", "iters"], "'iters': no value for iters"),
    (["--perf-set", "compile=maybe"], "compile=maybe: 'maybe' is neither on nor off"),
    (["--perf-set", "memory-format=tiled"], "memory-format=tiled: 'tiled' is not one of auto, "
                                            "channels_last, contiguous"),
    (["--perf-update-baselines=always"], "ignored explicit argument 'always'"),
])
def test_a_bad_value_names_the_option(arguments, words, capsys):
    with pytest.raises(SystemExit):
        parsed(arguments)
    assert words in capsys.readouterr().err
