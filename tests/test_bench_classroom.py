"""make bench-classroom's report and progress: the room's autograde wall time is a row of its own
with the goal the issue set (45 s for 30 submissions on 2 cores), and progress lines leave at once."""

from __future__ import annotations

from bench import classroom as bench_room


def _data(autograde_s: float, students: int = 30) -> dict:
    return {"students": students, "arrive_over_s": 60.0, "failed_spawns": 0, "spawn_p50_s": 3.0, "spawn_p95_s": 8.0,
            "kernel_p50_s": 4.0, "kernel_p95_s": 9.0, "prestart_over_s": None, "prestart_took_s": None,
            "all_at_once": {"prestart_over_s": None, "failed": 0, "kernel_p50_s": 20.0, "kernel_p95_s": 40.0},
            "all_at_once_prestarted": {"prestart_over_s": 120.0, "failed": 0, "kernel_p50_s": 5.0,
                                       "kernel_p95_s": 12.0},
            "runs": [{"user": "student01", "arrived_s": 0.0, "login_s": 0.3, "spawn_s": 2.0, "kernel_s": 4.0,
                      "lab_s": 60.0, "error": ""}],
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


def test_login_to_kernel_is_judged_per_arrival_pattern_and_listed_per_student():
    table = bench_room.render_table(_data(40.0))
    arriving = next(line for line in table.splitlines() if line.startswith("| login to a kernel"))
    assert "4.0 / 9.0" in arriving and "met" in arriving and "NOT" not in arriving
    warm = next(line for line in table.splitlines() if "prestarted over 120 s" in line)
    assert "goal p95 <= 20 s" in warm and "met" in warm and "NOT" not in warm
    assert "no server running before" in table
    assert "| student01 | 0.0 | 0.3 | 2.0 | 4.0 | 60.0 |" in table


def test_a_recomputed_score_counts_the_graded_tests_that_pass_on_a_kernel_over_unix_sockets(tmp_path, capfd):
    """The bench's check of each grade: the lab's source notebook run on a copy of the submission,
    each graded test cell that ends without an error earning its points; its kernel talks over
    Unix sockets (no loopback TCP port, and none of the kernel's "running over TCP" warnings)."""
    import nbformat

    from hpclab.classroom import load

    def cell(source, grade_id, points=None, solution=False):
        c = nbformat.v4.new_code_cell(source)
        c.metadata["nbgrader"] = {"grade_id": grade_id, "solution": solution, "grade": points is not None,
                                  "locked": not solution, **({"points": points} if points is not None else {})}
        return c

    nb = nbformat.v4.new_notebook(cells=[cell("x = 1", "answer", solution=True),
                                         cell("assert x == 1", "test-right", 2),
                                         cell("assert x == 2", "test-wrong", 3)])
    source = tmp_path / "lab.ipynb"
    nbformat.write(nb, source)
    submission = tmp_path / "student01" / "lab"
    submission.mkdir(parents=True)
    assert load.recompute_score(source, submission) == (2.0, 5.0)
    assert "over TCP" not in capfd.readouterr().err
