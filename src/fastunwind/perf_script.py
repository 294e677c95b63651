"""Compatibility name: the README documents `fastunwind.perf_script.unwind_recording`. The code is
in perf/script.py."""

from fastunwind.perf.script import (DEFAULT_MAX_FRAMES, OUTCOME_NAME_BY_CODE, OUTCOME_NAMES, PHASES, RECORD_HINT,
                                    Frame, Statistics, UnwoundRecording, UnwoundSample, recording_source,
                                    render_folded, render_perf_script, stream_recording, unwind_recording)

__all__ = ["DEFAULT_MAX_FRAMES", "OUTCOME_NAME_BY_CODE", "OUTCOME_NAMES", "PHASES", "RECORD_HINT", "Frame", "Statistics",
           "UnwoundRecording", "UnwoundSample", "recording_source", "render_folded", "render_perf_script",
           "stream_recording", "unwind_recording"]
