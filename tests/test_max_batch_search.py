"""The max batch search (perf_tests/modes/max_batch/search.py) alone, without processes: probes that
run out of memory above a capacity, the order of the probes, the limit, a probe that fails
otherwise, several ranks."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perf_tests.modes.max_batch.search import Probe, Search, find_max_batch, run_outcome

GIB = 2**30


def device(capacity: int, fail_at: int | None = None, bytes_per_image: int = GIB // 4):
    """probe(batch) on a device that holds `capacity` images; `fail_at` raises otherwise."""
    def probe(batch: int) -> Probe:
        if batch == fail_at:
            return Probe(batch, "error", message="rank 0 failed: RuntimeError: boom")
        if batch > capacity:
            return Probe(batch, "oom", message="rank 0 ran out of memory")
        return Probe(batch, "ok", peak_memory_bytes=batch * bytes_per_image, ips=10.0 * batch)
    return probe


def batches(search: Search) -> list[tuple[int, str]]:
    return [(probe.batch, probe.outcome) for probe in search.probes]


def test_grows_geometrically_until_the_first_oom_then_bisects():
    search = find_max_batch(device(capacity=200), start=8, step=32, limit=1024)
    assert batches(search) == [(32, "ok"), (64, "ok"), (128, "ok"), (256, "oom"),
                               (192, "ok"), (224, "oom")]
    assert (search.max_batch, search.oom_batch) == (192, 224)
    assert search.error is None and not search.limit_reached


def test_starts_from_the_cases_batch_rounded_up_to_the_step():
    search = find_max_batch(device(capacity=300), start=100, step=32, limit=1024)
    assert batches(search)[:2] == [(128, "ok"), (256, "ok")]
    assert search.max_batch == 288 and search.oom_batch == 320


def test_a_start_that_runs_out_of_memory_bisects_below_it():
    search = find_max_batch(device(capacity=100), start=256, step=32, limit=1024)
    assert batches(search) == [(256, "oom"), (128, "oom"), (64, "ok"), (96, "ok")]
    assert (search.max_batch, search.oom_batch) == (96, 128)


def test_nothing_fits():
    search = find_max_batch(device(capacity=10), start=8, step=32, limit=1024)
    assert batches(search) == [(32, "oom")]
    assert search.max_batch is None and search.oom_batch == 32


def test_the_limit_reached_without_an_oom():
    search = find_max_batch(device(capacity=5000), start=128, step=32, limit=1024)
    assert batches(search) == [(128, "ok"), (256, "ok"), (512, "ok"), (1024, "ok")]
    assert search.limit_reached and search.max_batch == 1024 and search.oom_batch is None


def test_a_limit_off_the_step_is_rounded_down_to_it():
    search = find_max_batch(device(capacity=5000), start=256, step=32, limit=1000)
    assert batches(search) == [(256, "ok"), (512, "ok"), (992, "ok")]
    assert search.limit == 992 and search.limit_reached
    assert find_max_batch(device(5000), start=2048, step=32, limit=1000).probes[0].batch == 992
    with pytest.raises(ValueError, match="limit 16 is below the batch step 32"):
        find_max_batch(device(5000), start=8, step=32, limit=16)


def test_an_error_in_a_probe_ends_the_search_with_it():
    search = find_max_batch(device(capacity=200, fail_at=256), start=32, step=32, limit=1024)
    assert batches(search) == [(32, "ok"), (64, "ok"), (128, "ok"), (256, "error")]
    assert search.error.message == "rank 0 failed: RuntimeError: boom"
    assert not search.limit_reached
    bisecting = find_max_batch(device(capacity=200, fail_at=192), start=32, step=32, limit=1024)
    assert batches(bisecting)[-1] == (192, "error") and bisecting.max_batch == 128


def test_several_ranks_the_batch_must_fit_on_every_one():
    # Rank 1 holds less (a bigger share of the data pipeline, another model on its GPU): when it
    # runs out of memory its peer fails on the broken link, and the run is out of memory.
    capacities = {0: 300, 1: 200}

    def probe(batch: int) -> Probe:
        ranks = {rank: "ok" if batch <= held else "oom" for rank, held in capacities.items()}
        if "oom" in ranks.values():
            ranks = {rank: "oom" if outcome == "oom" else "error"
                     for rank, outcome in ranks.items()}
        return Probe(batch, run_outcome(ranks))

    search = find_max_batch(probe, start=32, step=32, limit=1024)
    assert search.max_batch == 192 and search.oom_batch == 224
    assert run_outcome({0: "error", 1: "oom", 2: "ok"}) == "oom"
    assert run_outcome({0: "ok", 1: "error"}) == "error"
    assert run_outcome({0: "ok", 1: "ok"}) == "ok"


@given(capacity=st.integers(0, 3000), start=st.integers(1, 600),
       step=st.sampled_from([8, 16, 32, 48]), limit=st.integers(48, 2048))
def test_finds_the_largest_multiple_of_the_step_that_fits(capacity, start, step, limit):
    search = find_max_batch(device(capacity), start=start, step=step, limit=limit)
    top = limit // step * step
    best = min(capacity, top) // step * step
    assert search.max_batch == (best or None)
    assert all(p.batch % step == 0 and step <= p.batch <= top for p in search.probes)
    assert len({p.batch for p in search.probes}) == len(search.probes)  # no batch twice
    if search.oom_batch is not None:
        assert search.oom_batch == best + step
