"""make bench-classroom's report and progress: the room's autograde wall time is a row of its own
with the goal the issue set (45 s for 30 submissions on 2 cores), and progress lines leave at once."""

from __future__ import annotations

from bench import classroom as bench_room


def _data(autograde_s: float, students: int = 30) -> dict:
    return {"students": students, "arrive_over_s": 60.0, "failed_spawns": 0, "spawn_p50_s": 3.0, "spawn_p95_s": 8.0,
            "all_at_once": {"failed_spawns": 0, "spawn_p50_s": 9.0, "spawn_p95_s": 15.0},
            "labs_completed": students, "jobs": 90, "job_wait_p95_s": 20.0, "autograded": students,
            "autograde_s_per_submission": 1.2, "autograde_s": autograde_s, "grades_match": True,
            "peak_memory_gb": 7.0, "swap_used_gb": 0.0, "oom_kills": 0, "room_seconds": 300.0}


def test_the_rooms_autograde_time_is_judged_against_its_goal():
    row = next(line for line in bench_room.render_table(_data(40.0)).splitlines() if "autograde of the room" in line)
    assert "40" in row and "met" in row and "NOT" not in row
    late = next(line for line in bench_room.render_table(_data(60.0)).splitlines() if "autograde of the room" in line)
    assert "NOT met" in late


def test_progress_lines_are_flushed_with_their_prefix(capsys):
    bench_room.say("3/30 student03 submitted")
    assert capsys.readouterr().out == "[bench-classroom] 3/30 student03 submitted\n"
