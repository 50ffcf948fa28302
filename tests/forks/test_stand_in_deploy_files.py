"""Third-party deploy files whose Python layers caffepy's stand-ins take build with
``caffepy summary``: R-C3D's (twin proposals, temporal ROIPooling), Curve-Text-Detector's (its
anchors, Convert) and SSH's. The files are not in the repository: the test runs where a copy of
them is, under ``$CAFFEPY_FORK_FILES`` (default ``/work/survey/files``: ``owner__repo/path``),
and is skipped elsewhere; the small excerpt nets of tests/forks/{video/test_rc3d,
detection/test_ctd,detection/test_ssh}.py run everywhere."""
import os

import pytest

ROOT = os.environ.get("CAFFEPY_FORK_FILES", "/work/survey/files")

FILES = [
    "VisionLearningGroup__R-C3D/experiments/activitynet/test/test.prototxt",
    "VisionLearningGroup__R-C3D/experiments/charades/test/test.prototxt",
    "VisionLearningGroup__R-C3D/experiments/thumos14/test/test.prototxt",
    "Yuliang-Liu__Curve-Text-Detector/models/ctd/test_ctd_tloc.prototxt",
    "Yuliang-Liu__Curve-Text-Detector/models/ctd/smooth_effect/test.prototxt",
    "mahyarnajibi__SSH/SSH/models/test_ssh.prototxt",
]


@pytest.mark.parametrize("name", FILES)
def test_summary_builds(name, capsys):
    from caffepy.cli import main
    path = os.path.join(ROOT, name)
    if not os.path.isfile(path):
        pytest.skip("%s is not here (set CAFFEPY_FORK_FILES)" % path)
    assert main(["summary", path]) == 0, capsys.readouterr().err
    assert "total" in capsys.readouterr().out
