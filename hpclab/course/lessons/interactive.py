"""The interactive lesson (notebook 90): MPI from Python on ipyparallel engines that are the ranks of
one Slurm job, and what Python costs per message.

Its measurement on the engines: a ping-pong between ranks 0 and 1 with mpi4py. The functions run
on the ipyparallel engines (hpclab.tools.interactive.MPIEngines), which import them from here; the
analysis of their rows is hpclab.analysis.python_overhead. It has no lab and tests no claim of
the seeds.
"""

from __future__ import annotations

from hpclab.core.errors import HpclabError
from hpclab.course.lessons import Lesson, register


def pingpong_mpi4py(sizes: list[int], reps: int = 1000, api: str = "buffer",
                    bytes_per_size: int = 64 * 2**20, trials: int = 3) -> list[dict] | None:
    """Ping-pong between ranks 0 and 1 written in Python with mpi4py; run it on the engines
    (view.apply_sync(pingpong_mpi4py, sizes)). Same conventions as build/bin/pingpong: an untimed
    warm-up after a barrier, then `reps` round trips per size; t_usec = half a round trip (us),
    mbytes_per_sec = bytes / t_usec (MB = 10^6 B).

    sizes: message sizes in bytes; reps: round trips per size, lowered for big messages so each
    size moves at most bytes_per_size bytes (at least 10 round trips); trials: timed loops per
    size, t_usec is the median of their averages (a shared machine has outliers); api: "buffer"
    (Send/Recv on a NumPy array, no copy through Python objects) or "pickle" (send/recv of a
    bytes object, pickled). Returns rank 0's rows (bytes, repetitions, t_usec, mbytes_per_sec);
    None on other ranks."""
    import numpy as np
    from mpi4py import MPI

    if api not in ("buffer", "pickle"):
        raise HpclabError(f"api must be 'buffer' or 'pickle', got {api!r}", "pick one of the two")
    comm = MPI.COMM_WORLD
    if comm.size < 2:
        raise HpclabError("pingpong needs at least 2 ranks", "start MPIEngines(ranks=2)")
    rank = comm.rank
    rows = []
    for size in sizes:
        n = max(10, min(reps, bytes_per_size // max(int(size), 1)))
        warm = max(2, n // 10)
        buf = np.full(int(size), rank, dtype=np.uint8)
        obj = bytes(int(size))
        times = []
        for _trial in range(max(1, trials)):
            comm.Barrier()
            times.append(_round_trips(comm, api, buf, obj, warm, n) / (2 * n) * 1e6)
        t_usec = float(np.median(times))
        rows.append({"bytes": int(size), "repetitions": n, "t_usec": t_usec,
                     "mbytes_per_sec": size / t_usec if t_usec > 0 else 0.0,
                     "t_usec_trials": times})
    comm.Barrier()
    return rows if rank == 0 else None


def _round_trips(comm, api: str, buf, obj, warm: int, n: int) -> float:
    # warm + n round trips between ranks 0 and 1; returns the seconds of the last n.
    from mpi4py import MPI

    rank = comm.rank
    t0 = 0.0
    for i in range(warm + n):
        if i == warm:
            t0 = MPI.Wtime()  # timing starts after the warm-up round trips
        if rank == 0:
            if api == "buffer":
                comm.Send(buf, dest=1, tag=1)
                comm.Recv(buf, source=1, tag=1)
            else:
                comm.send(obj, dest=1, tag=1)
                obj = comm.recv(source=1, tag=1)
        elif rank == 1:
            if api == "buffer":
                comm.Recv(buf, source=0, tag=1)
                comm.Send(buf, dest=0, tag=1)
            else:
                obj = comm.recv(source=0, tag=1)
                comm.send(obj, dest=0, tag=1)
    return MPI.Wtime() - t0


LESSON = register(Lesson("interactive", "Interactive MPI: mpi4py on engines that are the ranks of a Slurm job",
                         ("90-interactive-mpi.ipynb",)))
