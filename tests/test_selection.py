"""-k as pytest parses it, for the tools; an empty -k selection names the cases this session has
and those the full profile would."""
import pytest

from perf_tests.cli.selection import KeywordError, empty_selection_hint, keyword_selector, matches
from perf_tests.core.cases import SMOKE


def test_pytest_keyword_expressions_select_as_pytest_does():
    names = ["1n8g_amp_b256", "test_resnet50_training.py"]
    assert matches("1n8g_amp", names) and matches("1N8G and not fp32", names)
    assert not matches("1n8g and fp32", names)


def test_a_keyword_expression_pytest_refuses_is_refused_in_pytests_words():
    assert keyword_selector("(1N1G or 2n1g) and not bf16")(["1n1g_fp32_b8"])
    with pytest.raises(KeywordError, match=r"^-k 'fp32 or': at column 8: expected not OR left "
                                           r"parenthesis OR identifier; got end of input$"):
        keyword_selector("fp32 or")
    assert matches("fp32*", ["1n1g_fp32_b8"]) is None   # '*' is no part of pytest's words


def test_readmes_first_example_on_a_cpu_host_says_where_1n8g_cases_come_from():
    hint = empty_selection_hint("1n8g_amp", SMOKE.cases(), "smoke")
    assert hint == (
        "-k '1n8g_amp' selects none of this session's cases: the smoke profile here has "
        "1n1g_bf16_b4, 1n1g_fp32_b8, 1n2g_fp32_b8, 2n1g_fp32_b8; the full profile "
        "(--perf-profile full) has 1n8g_amp_b256, measured on CUDA devices (1n8g_amp_b256 "
        "needs 8 on one host).")


def test_a_selection_no_profile_has_says_how_case_ids_read():
    hint = empty_selection_hint("resnet101", SMOKE.cases(), "smoke")
    assert hint.endswith("the full profile has none either (case ids read like "
                         "1n1g_amp_b256).")


def test_multi_node_cases_say_per_node_and_long_lists_are_cut():
    hint = empty_selection_hint("8g", SMOKE.cases(), "smoke")
    assert "4n8g_amp_b256 needs 8 on each of 4 nodes" in hint
    assert "has 1n8g_amp_b256, 1n8g_fp32_b128, 2n8g_amp_b256" in hint
    assert "and 4 more" not in hint    # 6 full-profile cases, all named
    assert "and 4 more" in empty_selection_hint("b", SMOKE.cases(), "smoke")   # 12, 8 named


def test_on_the_full_profile_it_lists_the_cases_here_only():
    assert empty_selection_hint("2n1g", SMOKE.cases()[:1], "full") == (
        "-k '2n1g' selects none of this session's cases: the full profile here has "
        "1n1g_bf16_b4.")
