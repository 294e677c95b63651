"""`_core.Profile.add_stack` (core/profile.c's fu_profile_add_stack): stacks named already and counted,
as `record --bpf` has them, into the profile perf-script's writers read."""

from __future__ import annotations

import json

import pytest

from fastunwind import _core


def speedscope(profile: _core.Profile) -> dict:
    chunks: list[bytes] = []
    profile.speedscope(chunks.append, "named")
    return json.loads(b"".join(chunks))


def test_each_count_is_that_many_samples_of_its_thread() -> None:
    profile = _core.Profile()
    profile.add_stack(10, 10, "a", "", ["main", "work"], 3, 1000, 10.0)
    profile.add_stack(10, 10, "a", "frame_limit", ["deep"], 2, 2000, 10.0)
    profile.add_stack(11, 11, "b", "", [], 1, 2000, 10.0)
    profile.add_stack(11, 11, "b", "", ["idle"], 0, 3000, 10.0)
    assert profile.samples == 6
    document = speedscope(profile)
    names = [frame["name"] for frame in document["shared"]["frames"]]
    stacks = {p["name"]: [[names[i] for i in s] for s in p["samples"]] for p in document["profiles"]}
    # an incomplete stack is rooted at its outcome; a stack of no frame says so
    assert stacks == {"a 10/10": [["main", "work"]] * 3 + [["[frame_limit]", "deep"]] * 2,
                      "b 11/11": [["[no frames]"]]}


def test_past_the_bounds_and_bad_frames_are_refused() -> None:
    profile = _core.Profile()
    with pytest.raises(ValueError, match="past the bounds"):
        profile.add_stack(1, 1, "a", "", ["f"], 1 << 31, 0, 1.0)
    with pytest.raises(ValueError, match="more than"):
        profile.add_stack(1, 1, "a", "", ["f"] * ((1 << 16) + 1), 1, 0, 1.0)
    with pytest.raises(TypeError):
        profile.add_stack(1, 1, "a", "", ["f", 3], 1, 0, 1.0)  # type: ignore[list-item]
    assert profile.samples == 0
