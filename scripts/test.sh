#!/usr/bin/env bash
# make test, in two parts on the running cluster (usage: scripts/test.sh PYTHON [pytest args]):
#  1. every test not marked `alone`, HPCLAB_TEST_WORKERS (default 3) at a time (pytest-xdist, a test
#     file's tests in one worker so its fixtures are made once). Most of a test's time is spent
#     waiting on a job, a kernel or a browser, so more workers than cores pay: on the 2-core VM
#     this part took 1083 s with 2 workers, 885 s with 3, and 1012 s with 4, three tests failing
#     on the load (a roofline, a queued engines job, a memory bomb's race with a time limit).
#     HPCLAB_CLUSTER_SHARED is set: hpclab then refuses to restart, stop or reshape the cluster
#     under the other workers' jobs (hpclab/cluster/local.py), so a test that would do so fails
#     with that message instead of failing another test at random.
#     The classroom's tests run here too, all in one worker (tests/conftest.py), on a room made
#     before this part (scripts/test_room.py: making one restarts the controller), removed after
#     part 2 unless a test removed it; a room that was here already is used and kept.
#  2. the `alone` tests (tests/conftest.py: ALONE), one at a time.
# Both parts run even if the first fails. Exit status: the first part's failure, else the second's,
# else the room's removal;
# pytest's 5 ("no tests collected", when the arguments select tests of one part only) counts as
# success unless neither part ran a test.
set -u
py=$1
shift
for arg in "$@"; do
    case "$arg" in
        -m|-m*) echo "make test: PYTEST_ARGS may not hold -m: each part selects by its own mark (not alone, alone);" \
                     "select with -k or a test path, or run $py -m pytest -m ... directly" >&2
                exit 2 ;;
    esac
done
# a room when the arguments select a room's test of the first part (with none, all are; collecting
# to find out takes about 15 s)
room=""
if [ $# -eq 0 ] || "$py" -m pytest --collect-only -q -m "classroom and not alone" "$@" > /dev/null 2>&1; then
    room=$("$py" scripts/test_room.py up) || exit 1
    if [ "$room" = made ]; then
        export HPCLAB_TEST_ROOM_MADE=1
        echo "make test: made a classroom (3 students, 1 instructor) for the room's tests; removed at the end"
    else
        echo "make test: the room's tests use the classroom that is here, and keep it"
    fi
fi
HPCLAB_CLUSTER_SHARED=1 "$py" -m pytest -m "not alone" -n "${HPCLAB_TEST_WORKERS:-3}" --dist loadfile "$@"
first=$?
"$py" -m pytest -m alone "$@"
second=$?
removed=0
if [ "$room" = made ]; then
    "$py" scripts/test_room.py remove
    removed=$?
fi
for rc in "$first" "$second" "$removed"; do
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then
        exit "$rc"
    fi
done
if [ "$first" -eq 5 ] && [ "$second" -eq 5 ]; then
    exit 5
fi
exit 0
