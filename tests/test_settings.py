"""The option table (`perf_tests/options.py`): every option is one row, and the row registers
the flag, gives its `Settings` attribute (perf_tests/settings.py) its default and reaches the
workers' `TrainConfig`."""
import argparse
import dataclasses

import pytest

from perf_tests.cases import SMOKE, Case
from perf_tests.baselines.store import BaselineStore
from perf_tests.context import Context
from perf_tests.runs.host import HostFacts
from perf_tests.runs.launchers import Stack, make_launcher
from perf_tests.options import OPTIONS, Option
from perf_tests.results import ResultsFolder
from perf_tests.settings import Settings, settings_of, unfilled_settings
from rn50_model.config import TrainConfig


def parsed(arguments: list[str], table=OPTIONS) -> argparse.Namespace:
    """The table registered on a plain argparse parser (the same `addoption` signature as a
    pytest option group) and `arguments` parsed by it."""
    parser = argparse.ArgumentParser()
    for option in table:
        option.add_to(parser.add_argument)
    return parser.parse_args(arguments)


def test_rows_are_unique_and_every_help_states_its_default():
    flags = [option.flag for option in OPTIONS]
    fields = [option.field for option in OPTIONS]
    assert len(set(flags)) == len(flags) and len(set(fields)) == len(fields)
    undocumented = [option.flag for option in OPTIONS if "default" not in option.help]
    assert undocumented == []


def test_train_rows_name_fields_of_the_workers_config():
    known = {spec.name for spec in dataclasses.fields(TrainConfig)}
    assert {option.train for option in OPTIONS if option.train} <= known


def test_a_parsed_command_line_becomes_settings():
    values = parsed(["--perf-runs", "4", "--perf-case", "1n2g_fp32_b8", "--perf-case",
                     "1n1g_bf16_b4", "--perf-candidate-env", "NCCL_ALGO=Ring",
                     "--perf-profile", "smoke", "--perf-memory-limit", "2G", "--perf-compile"])
    settings = settings_of(lambda dest: getattr(values, dest))
    assert settings.runs == 4 and settings.profile is SMOKE
    assert settings.extra_cases == (Case(1, 2, "fp32", 8), Case(1, 1, "bf16", 4))
    assert settings.candidate == Stack(env=(("NCCL_ALGO", "Ring"),))
    assert settings.train_values()["memory_limit_bytes"] == 2 * 2**30
    assert settings == Settings(runs=4, profile=SMOKE, extra_cases=settings.extra_cases,
                                candidate_env=(("NCCL_ALGO", "Ring"),),
                                memory_limit=2 * 2**30, compile=True)


def test_defaults_are_the_command_lines_and_no_candidate_means_no_ab():
    values = parsed([])
    assert settings_of(lambda dest: getattr(values, dest)) == Settings()
    assert Settings().candidate is None and Settings().profile is None


def test_every_train_row_reaches_the_workers_config(tmp_path):
    settings = Settings(profile=SMOKE, warmup_iters=1, timed_iters=3, image_size=48,
                        memory_format="contiguous", threads=1, loss_scale="static",
                        compile=True, memory_limit=123 * 2**20)
    context = Context(requested=settings, settings=settings.resolved(SMOKE), profile=SMOKE,
                      host=HostFacts({"device_count": 0, "cpu_count": 2}), rootdir=tmp_path,
                      results=ResultsFolder(tmp_path / "results"),
                      baselines=BaselineStore(tmp_path / "baseline.json", "cpu"),
                      launcher=make_launcher("local", None), progress=print)
    config = context.train_config(Case(1, 1, "fp32", 8))
    assert (config.warmup_iters, config.timed_iters, config.image_size, config.memory_format,
            config.threads, config.loss_scale, config.compile, config.memory_limit_bytes,
            config.data_backend, config.device) == (1, 3, 48, "contiguous", 1, "static", True,
                                                    123 * 2**20, "synthetic", "cpu")


def test_every_row_is_a_setting_and_every_setting_a_row():
    """What the table promises a developer: a row's flag, its `Settings` attribute (defaulting
    to the row's default) and, with `train=`, its worker setting; a row without its attribute,
    or an attribute without its row, is caught here."""
    assert unfilled_settings() == (set(), set())
    table = (*OPTIONS, Option("--perf-seed", train="seed", type=int, default=0,
                              help="the workers' random seed (default 0)"))
    assert unfilled_settings(table) == ({"seed"}, set())
    assert unfilled_settings(OPTIONS[1:]) == (set(), {OPTIONS[0].field})
    defaults = {spec.name: spec.default for spec in dataclasses.fields(Settings)}
    assert defaults == {option.field: option.value(option.default) for option in OPTIONS}


@pytest.mark.parametrize("arguments, words", [
    (["--perf-runs", "0"], "0 must be at least 1"),
    (["--perf-profile", "huge"], "invalid choice: 'huge'"),
])
def test_a_bad_value_names_the_option(arguments, words, capsys):
    with pytest.raises(SystemExit):
        parsed(arguments)
    assert words in capsys.readouterr().err
