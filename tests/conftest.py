"""Shared fixtures: the local Slurm cluster, started once per test session.

The cluster is a real one (munged, MariaDB, slurmdbd, slurmctld, slurmd). Tests that submit jobs
take the `cluster` fixture; it starts the cluster if needed and points Slurm commands at it.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from hpclab.core.errors import HpclabError


@pytest.fixture(scope="session")
def cluster():
    """The running local cluster; returns the env dict Slurm commands need (SLURM_CONF)."""
    from hpclab import cluster as cl

    if os.geteuid() != 0 or not shutil.which("slurmctld"):
        pytest.fail("the local cluster needs root and the Slurm packages: run 'make test' as root")
    try:
        cl.up()
    except HpclabError as e:
        pytest.fail(f"could not start the local cluster: {e}")
    env = cl.slurm_env()
    os.environ.update(env)
    return env


CLASSROOM_MADE = pytest.StashKey[bool]()
# Set by `make test` (scripts/test.sh) when it made the classroom before its first part: the room's
# tests then treat it as one the tests made, and make test removes it after the last part.
ROOM_MADE_BY_MAKE_TEST = "HPCLAB_TEST_ROOM_MADE"


@pytest.fixture(scope="session")
def classroom(cluster, request, tmp_path_factory):
    """A small classroom (3 students, 1 instructor) for the tests that act as its users; an
    existing one is used as it is (make test makes it before its first part: scripts/test_room.py).
    One this fixture made is removed at the end of the session (accounts, homes, hub, Slurm
    objects; the archive remove writes first goes to a temporary folder, deleted afterwards; the
    students' venv stays for the next run)."""
    from hpclab.classroom import layout, record, room

    lay = layout.layout()
    existed = not record.load(lay.record).empty
    request.config.stash[CLASSROOM_MADE] = not existed or os.environ.get(ROOM_MADE_BY_MAKE_TEST) == "1"
    try:
        room.up(students=max(3, record.load(lay.record).settings.get("students", 0)), instructors=1)
    except HpclabError as e:
        pytest.fail(f"could not bring the classroom up: {e}")
    yield lay
    if not existed and not record.load(lay.record).empty:
        archive = tmp_path_factory.mktemp("classroom-archive")
        room.remove(yes=True, archive_dir=archive)
        shutil.rmtree(archive)


@pytest.fixture(scope="session")
def disposable_classroom(classroom, request):
    """The session's classroom when this session made it (tests that stop, bring back or remove
    it); a room that was here before is a real class's and is skipped."""
    if not request.config.stash.get(CLASSROOM_MADE, False):
        pytest.skip("the classroom was here before the tests: they do not stop or remove a real room")
    return classroom


FAKE_SLURM = Path(__file__).parent / "fake_slurm"


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """Slurm's client commands answered by tests/fake_slurm/ (first on PATH) from a state file in
    tmp_path, so hpclab.jobs.experiment runs its own code with no cluster; returns the FakeSlurm
    the test plans its jobs' fates with. Runs go to tmp_path/runs. SLURM_CONF names a file that
    does not exist, so a real Slurm command reached by mistake finds no cluster to act on."""
    from tests.fake_slurm.fakeslurm import FakeSlurm

    fake = FakeSlurm.new(tmp_path / "fake-slurm.json")
    monkeypatch.setenv("PATH", f"{FAKE_SLURM}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_SLURM_STATE", str(fake.path))
    monkeypatch.setenv("FAKE_SLURM_PYTHON", sys.executable)
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-cluster" / "slurm.conf"))
    monkeypatch.setenv("HPCLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.delenv("HPCLAB_SITE", raising=False)
    return fake


@pytest.fixture
def mpi_env(monkeypatch):
    """Let mpirun run as root (CI and the course VM run as root)."""
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")


# Tests that need no cluster but run real programs for seconds each (valgrind and perf, STREAM at
# full size, nbgrader's conversions, Chromium, MPI runs of the kernels, long replays): marked `slow`
# here, so `make test-fast` stays under 2 minutes on 2 cores; `make test` runs them. An entry is a
# test file, or a file::test (every parametrisation of it). tests/test_fast_tier.py checks that each
# one still names a test.
SLOW_WITHOUT_CLUSTER = (
    "tests/test_browser.py",
    "tests/test_codelab.py::test_a_class_of_code_submissions_is_graded_through_nbgrader",
    "tests/test_codelab.py::test_the_demo_class_grades_code_submissions_a_hung_and_a_hostile_one",
    "tests/test_codelab.py::test_own_runs_alternate_the_builds_and_keep_each_sources_hash",
    "tests/test_codelab.py::test_a_hung_run_says_where_each_rank_was_not_just_timed_out",
    "tests/test_codelab.py::test_a_seeded_mistake_fails_with_feedback_that_names_it",
    "tests/test_codelab.py::test_the_reference_solution_passes_under_every_installed_library",
    "tests/test_codelab.py::test_the_sizes_at_which_the_deadlock_hangs_still_hold",
    "tests/test_course.py::test_runner_reports_failures_and_keeps_earlier_reports",
    "tests/test_fidelity.py::test_course_run_writes_fidelity_json_and_the_table",
    "tests/test_grading.py::test_new_course_has_an_exchange_nbgrader_accepts",
    "tests/test_grading.py::test_reference_entry_points_answer_in_one_line",
    "tests/test_grading.py::test_reference_without_data_is_a_clear_error",
    "tests/test_grading.py::test_release_removes_solutions_and_hidden_tests",
    "tests/test_grading_sandbox.py::test_kernel_nbgrader_talks_to_is_inside_and_bounded_in_time",
    "tests/test_grading_sandbox.py::test_limits_stop_memory_processes_files_and_time",
    "tests/test_hotspots.py::test_a_real_memory_resident_run_stays_below_its_roof",
    "tests/test_hotspots.py::test_annotated_source_shows_the_residuum_lines",
    "tests/test_hotspots.py::test_callgrind_counts_are_exact_and_linear_in_iterations",
    "tests/test_hotspots.py::test_callgrind_totals_match_valgrind_summary",
    "tests/test_hotspots.py::test_failed_profile_keeps_its_folder_and_says_why",
    "tests/test_hotspots.py::test_fused_residuum_gives_identical_results",
    "tests/test_hotspots.py::test_perf_record_finds_the_compute_loops",
    "tests/test_interactive.py::test_mpi4py_pingpong_reports_half_round_trips",
    "tests/test_kernels.py::test_naive_exchange_above_the_eager_limit_serialises_but_finishes_with_the_same_answer",
    "tests/test_kernels.py::test_poisson_gives_the_same_answer_for_every_grid_and_exchange",
    "tests/test_kernels.py::test_poisson_rectangle_validates_and_any_grid_gives_the_same_answer",
    "tests/test_otf2.py::test_cli_writes_the_archive_says_how_to_open_it_and_reads_it_back",
    "tests/test_otf2.py::test_round_trip_of_a_traced_poisson_run_is_exact",
    "tests/test_otf2.py::test_traced_poisson_run_exports_every_call_and_message",
    "tests/test_plots.py::test_latency_bandwidth_per_transport",
    "tests/test_runs.py::test_killed_writer_leaves_index_consistent",
    "tests/test_spec.py::test_spec_files_that_are_not_specs",
    "tests/test_variants.py::test_variant_is_built_beside_the_course_binary",
    "tests/trace/test_cli_trace.py::test_trace_command_prints_violations_profile_split_and_writes_plots",
    "tests/trace/test_links.py::test_plenty_of_links_give_the_contention_free_times",
    "tests/trace/test_replay_reference.py::test_matching_is_the_old_matching",
    "tests/trace/test_replay_reference.py::test_poisson_replay_is_bit_identical_to_the_old_replay",
    "tests/trace/test_replay_reference.py::test_random_programs_replay_as_before_including_problems_and_deadlocks",
    "tests/trace/test_rest_real.py",   # fits a model to a real ping-pong: a busy machine bends it
    "tests/trace/test_split.py::test_five_parts_sum_to_the_real_time_and_the_rest_is_the_switched_out_time",
    "tests/trace/test_split.py::test_split_sums_to_total_on_random_traces",
    "tests/trace/test_tracer.py::test_poisson_traced_has_its_regions",
)


# `make test` runs its tests two at a time (pytest-xdist) on the running cluster, with
# HPCLAB_CLUSTER_SHARED set, so that a test that would restart, stop or reshape the cluster under
# the other's jobs fails with hpclab's message instead (hpclab.cluster.local.refuse_if_shared).
# The tests below run after those, one at a time: they reshape the cluster (virtual nodes, killed
# daemons, another cluster), or what they assert is a measurement another test's jobs would bend.
# The classroom's tests run in the first part, all in one worker (pytest_xdist_make_scheduler
# below), on the room make test made before it (making a room restarts the controller with the
# room's policy); those that stop or remove the room are listed here, and a test outside the
# tests/test_classroom_*.py files that takes the room runs alone too.
# An entry is a test file, a file::test, or one parametrisation of it (file::test[id]).
ALONE = (
    "tests/test_classroom_teardown.py",         # stops, brings back and removes the room
    # the faults that kill, stop or restart a daemon, or drain the node (the requeue, the lost job,
    # hpclab giving up and the out-of-memory job strike only the test's own job: two at a time)
    "tests/test_faults.py::test_controller_kill9_mid_job_then_up_job_completes",
    "tests/test_faults.py::test_graceful_controller_restart_keeps_the_job_running",
    "tests/test_faults.py::test_accounting_down_jobs_still_run_and_provenance_says_so",
    "tests/test_faults.py::test_a_stale_cgroup_of_an_earlier_job_with_the_same_id_does_not_drain_the_node",
    "tests/test_faults.py::test_up_resumes_a_drained_node",
    "tests/test_faults.py::test_node_failure_on_virtual_nodes_names_the_node_and_up_returns_it",
    "tests/test_faults.py::test_a_job_no_drained_node_can_start_is_named_not_waited_for",
    "tests/test_vnodes.py",
    "tests/test_vnodes_mapping.py",
    "tests/test_link_rate.py",
    "tests/test_cluster.py",
    "tests/test_checkout_location.py",          # a second cluster from another checkout
    "tests/test_noise_watch.py",                # counts the jobs that ran beside a run
    "tests/test_adaptive_runs.py::test_real_rounds_alternate_and_stop_when_decided",
    "tests/test_replay_fidelity.py",            # a replay against the measured time
    "tests/trace/test_rest_real.py",            # fits a model to a real ping-pong
    # the notebooks and labs that run on virtual nodes (hpclab.site.multinode)
    "tests/test_notebooks.py::test_notebook_runs_clean[notebooks/02-transports.ipynb]",
    "tests/test_notebooks.py::test_notebook_runs_clean[notebooks/02b-collectives.ipynb]",
    "tests/test_notebooks.py::test_notebook_runs_clean[notebooks/05-imbalance.ipynb]",
    "tests/test_notebooks.py::test_notebook_runs_clean[notebooks/05b-mapping-and-scale.ipynb]",
    "tests/test_notebooks.py::test_notebook_runs_clean[labs/lab-collectives/lab-collectives.ipynb]",
    # and the tests of lab-collectives' grading, on its runs on virtual nodes
    "tests/test_grading.py::test_collectives_reference_reads_the_packed_rounds",
    "tests/test_grading.py::test_lab_full_solution_gets_full_marks[lab-collectives-collective_runs]",
)


def _listed(nodeid: str, entries: tuple[str, ...]) -> bool:
    name = nodeid.split("[", 1)[0]
    return any(nodeid == entry or name == entry or name.startswith(entry + "::") for entry in entries)


def _listed_slow(nodeid: str) -> bool:
    return _listed(nodeid, SLOW_WITHOUT_CLUSTER)


def pytest_collection_modifyitems(config, items):
    """Marks by what a test uses, so that `make test-fast` (-m "not cluster and not classroom and
    not slow") never starts the cluster: a test that uses the cluster or the classroom fixture,
    directly or through another fixture, carries the `cluster` or `classroom` mark even where its
    module forgot it; the tests of SLOW_WITHOUT_CLUSTER carry `slow`; those of ALONE and every
    classroom test carry `alone` (make test runs them after the others, one at a time)."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if "cluster" in used:
            item.add_marker(pytest.mark.cluster)
        if "classroom" in used:
            item.add_marker(pytest.mark.classroom)
        if _listed_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)
        # a classroom test module may take the room through request.getfixturevalue: its mark says so
        in_room = "classroom" in used or any(m.name == "classroom" for m in getattr(item, "iter_markers", list)())
        if (in_room and not _in_the_rooms_files(item.nodeid)) or _listed(item.nodeid, ALONE):
            item.add_marker(pytest.mark.alone)
    # The test that removes the session's classroom runs last: the room it deletes is then not
    # made again for the tests after it, nor removed a second time by the fixture (about 130 s of
    # a full run).
    last = [i for i in items if i.nodeid.endswith(REMOVES_THE_CLASSROOM)]
    items[:] = [i for i in items if i not in last] + last


REMOVES_THE_CLASSROOM = "test_classroom_teardown.py::test_remove_leaves_an_archive_that_holds_the_course_and_every_home"
THE_ROOMS_FILES = "test_classroom_"
THE_ROOMS_WORKER = "the classroom's tests"


def _in_the_rooms_files(nodeid: str) -> bool:
    return Path(nodeid.split("::", 1)[0]).name.startswith(THE_ROOMS_FILES)


def first_part_group(nodeid: str) -> str:
    """The tests one worker of make test's first part runs one after another: a test file's, and
    those of every tests/test_classroom_*.py file together (they share the one room and its hub,
    which some of them restart with other settings)."""
    return THE_ROOMS_WORKER if _in_the_rooms_files(nodeid) else nodeid.split("::", 1)[0]


def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, grouped by first_part_group; other --dist modes as xdist has them."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByFileTheRoomInOne(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return first_part_group(nodeid)

    return ByFileTheRoomInOne(config, log)


# What an MPI library's launcher or singleton start writes into its process's environment: a test
# that calls MPI_Init in the test process itself (mpi4py's `from mpi4py import MPI`) leaves them in
# os.environ, and every later subprocess and job inherits them: MPICH then aborts ("Runtime
# environment uses unsupported PMI version PMIx"), an mpirun thinks it is inside another.
_LAUNCHER_PREFIXES = ("PMIX_", "PMI_", "OMPI_COMM_WORLD_", "OMPI_MCA_orte_", "OMPI_MCA_ess", "OMPI_FILE_LOCATION")


@pytest.fixture(autouse=True)
def _no_launcher_variables_left():
    """Fails the test that leaves an MPI launcher's variables in this process's environment
    (start MPI in a subprocess instead)."""
    before = {k for k in os.environ if k.startswith(_LAUNCHER_PREFIXES)}
    yield
    left = sorted(k for k in os.environ if k.startswith(_LAUNCHER_PREFIXES) and k not in before)
    for key in left:   # the next tests must not inherit them
        os.environ.pop(key, None)
    assert not left, f"MPI was started in the test process: it left {', '.join(left[:5])} in os.environ"


@pytest.fixture(autouse=True)
def _no_cache_probe_of_this_checkout(request, tmp_path_factory, monkeypatch):
    """A test without the cluster reads no last-level cache that notebook 00 measured into this
    checkout's build/ (hpclab.analysis.effective_cache): its answer must not depend on whether the
    course ran here before (the recorded roof runs' 32 MiB L3 became 16 MiB after a course run)."""
    if request.node.get_closest_marker("cluster") is None:
        from hpclab.analysis import effective_cache

        probe = tmp_path_factory.mktemp("no-probe") / effective_cache.RECORD
        monkeypatch.setattr(effective_cache, "record_path", lambda: probe)
    yield
