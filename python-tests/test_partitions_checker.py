"""The checker of `make partitions` (scripts/test/partitions.py), on
histories made by hand: it must see what it reports on."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "scripts" / "test"))
import partitions  # noqa: E402


def section(holder, fence, start, end, writes=(True, True), released=True, answered=None):
    return dict(key="A", holder=holder, fence=fence, start=start, end=end, writes=list(writes),
                released=released, answered=end if answered is None else answered)


def test_one_after_another_is_clean():
    r = partitions.check([section("w1", 1, 0.0, 1.0), section("w2", 2, 1.1, 2.0)],
                         {"A": ["w1 1 0", "w1 1 1", "w2 2 0", "w2 2 1"]}, [])
    assert (r["overlaps"], r["accepted_out_of_order"], r["interleaved_at_store"], r["grants_lost"]) == (0, 0, 0, 0)


def test_overlaps_are_told_apart_by_what_stopped_them():
    fenced = [section("w1", 1, 0.0, 1.0, writes=(True, False)), section("w2", 2, 0.5, 1.5)]
    stopped = [section("w1", 1, 0.0, 1.0, writes=(True, None)), section("w2", 2, 0.5, 1.5)]
    windows = [("isolate_master", 0.2, 0.8)]
    r = partitions.check(fenced, {"A": ["w1 1 0", "w2 2 0", "w2 2 1"]}, windows)
    assert (r["overlaps"], r["fenced"], r["stopped"]) == (1, 1, 0)
    assert r["per_fault"]["isolate_master"]["overlaps"] == 1
    r = partitions.check(stopped, {"A": ["w1 1 0", "w2 2 0", "w2 2 1"]}, windows)
    assert (r["overlaps"], r["fenced"], r["stopped"]) == (1, 0, 1)


def test_the_store_log_is_checked_for_order_and_interleaving():
    r = partitions.check([], {"A": ["w1 1 0", "w2 2 0", "w1 1 1"]}, [])
    assert r["accepted_out_of_order"] == 1 and r["interleaved_at_store"] == 1
    r = partitions.check([], {"A": ["w1 5 0", "w2 5 0", "w1 5 1", "w2 5 1"]}, [])
    assert r["fence_of_two_holders"] == 1 and r["interleaved_at_store"] == 2


def test_a_release_answered_notheld_early_is_a_lost_grant():
    r = partitions.check([section("w1", 1, 0.0, 0.3, released=False)], {"A": []}, [("cut_replication", 0.0, 1.0)])
    assert r["grants_lost"] == 1 and r["per_fault"]["cut_replication"]["lost"] == 1


def test_recovery_is_the_longest_a_key_went_without_a_grant():
    r = partitions.check([section("w1", 1, 0.0, 0.1), section("w2", 2, 3.0, 3.1), section("w3", 3, 3.5, 3.6)],
                         {"A": []}, [("isolate_client", 0.5, 1.0)])
    assert r["per_fault"]["isolate_client"]["recover_s"] == 2.5
