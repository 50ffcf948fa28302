"""The census's bootstrap over repositories (tools/census/census_lib.share_interval)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tools", "census"))
import census_lib as L  # noqa: E402


def _records(spec):
    """{repo: (files in the tier, files)} -> records."""
    out = []
    for repo, (good, n) in spec.items():
        out += [{"repo": repo, "complete": i < good} for i in range(n)]
    return out


def test_point_shares_are_file_and_repository_weighted():
    recs = _records({"a/x": (9, 10), "b/y": (0, 2), "c/z": (1, 1), "d/w": (1, 2)})
    got = L.share_interval(recs, resamples=200, seed=3)
    assert got["files"][0] == round(100 * 11 / 15.0, 1)
    assert got["repositories"][0] == round(100 * (0.9 + 0 + 1 + 0.5) / 4, 1)
    for share, low, high in got.values():
        assert 0 <= low <= share <= high <= 100


def test_interval_is_repeatable_and_wider_for_clustered_failures():
    """Equal file-weighted shares; failures all in one large repository give a wider interval than
    failures spread one per repository, and the same seed gives the same interval."""
    clustered = _records(dict([("big/one", (0, 20))] + [("r/%d" % i, (4, 4)) for i in range(20)]))
    spread = _records({"r/%d" % i: (4, 5) for i in range(20)})
    assert L.share_interval(clustered, seed=1)["files"][0] == 80.0
    assert L.share_interval(spread, seed=1)["files"][0] == 80.0
    width = {name: L.share_interval(recs, seed=1)["files"][2] - L.share_interval(recs, seed=1)
             ["files"][1] for name, recs in (("clustered", clustered), ("spread", spread))}
    assert width["clustered"] > 2 * width["spread"]
    assert L.share_interval(clustered, seed=7) == L.share_interval(clustered, seed=7)
    everything = _records({"r/%d" % i: (3, 3) for i in range(5)})
    assert L.share_interval(everything)["repositories"] == (100.0, 100.0, 100.0)
    assert L.share_interval([]) == {}
