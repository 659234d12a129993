"""A fake Slurm for the tests of the experiment path: the client commands hpclab calls (sbatch,
squeue, sacct, scontrol, sinfo, scancel, sacctmgr) answering in the forms hpclab.site.slurm
parses, from a state file the test writes. No daemon runs and no job script runs: each job
follows the fate the test planned for it, so a requeue, a node failure or a time limit takes
a few polls instead of Slurm's minutes.

The executables of this folder are one line each: they run this file with their own name. The
fixture `fake_slurm` (tests/conftest.py) puts the folder first on PATH and names the state file
in FAKE_SLURM_STATE. A command line hpclab did not make before is refused (exit 2, "fake
slurm: ..."), so a change of hpclab's calls fails the tests instead of passing unread.

The state (JSON):
  next_job_id  the id the next sbatch hands out; ids go up by one, in submission order
  partition    {"name", "cpus" per node, "memory" MB per node}: the one partition
  nodes        {name: {"state": "idle", "reason": ""}}: what sinfo says of each node
  accounting   false: sacct and sacctmgr fail as they do with slurmdbd down
  fates        one per sbatch, taken in order; once none is left, a job completes at its first look
  jobs         {id: job}: its script, folder, fate, and how far along its phases it is
  events       node events for `sacctmgr show event`
  calls        every command line the fake received, in order

A fate is {"phases": [phase, ...]} or {"refuse": message} (sbatch fails with that message). A
phase is {"state": a Slurm state, "looks": n, ...}: the job shows that state to n looks (a look
is one `squeue --states=all` that names it: hpclab's poll), and the next phase begins right
after the n-th, so what it does is in place for the commands that follow; the last phase lasts
for ever. A phase may also give: reason, nodes (default: the first node), exit ("code:signal"),
restarts (scontrol's count), req_mem and max_rss (sacct), steps (sacct step records: id, name,
state, exit, max_rss), and what happens as it begins: files ({name: text} appended in the job's
run folder), node_states ({node: [state, reason]} for sinfo) and node_event ({node, state,
reason, back}: a record for sacctmgr; back: the node returned a second later). State FORGOTTEN:
no command knows the job any more (a controller restarted from an old state). scancel ends a
job that has not ended as CANCELLED.

The command lines answered, as hpclab.site.slurm, hpclab.site.profile and hpclab.jobs.experiment
make them:
  sbatch --parsable SCRIPT
  squeue --noheader --states=all --jobs=IDS --format=%i|%T|%r|%M|%N   (the poll: one look)
  squeue --noheader --jobs=ID --format=%P                               (pending or running only)
  sacct --parsable2 --noheader --jobs=IDS --format=FIELDS               (the job, its .batch and steps)
  scontrol show job --oneliner ID
  sinfo --noheader --partition NAME --format=%D|%c  and  --format=%m
  sinfo --noheader --Node --nodes=HOSTLIST|--partition=NAME --format=%N|%T|%E
  scancel ID...
  sacctmgr --noheader --parsable2 show event nodes=HOSTLIST start=TIME format=FIELDS
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
import time

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL",
            "DEADLINE", "PREEMPTED"}


# --- what a test writes ---------------------------------------------------------------------------


def phase(state: str, looks: int = 1, **extra) -> dict:
    """One phase of a fate: `state` shown to `looks` polls (see the module's docstring for extra)."""
    return {"state": state, "looks": looks, **extra}


def fate(*phases: dict) -> dict:
    """A job's life: its phases in order (the last one lasts)."""
    return {"phases": list(phases)}


def refused(message: str) -> dict:
    """A submission sbatch refuses with `message` on stderr (exit 1)."""
    return {"refuse": message}


def ends(state: str, exit: str = "0:0", nodes: str = "vm", files: dict | None = None, **extra) -> dict:
    """Running on `nodes` for one look, then `state` with exit code `exit`, writing `files` into the
    run folder as it ends."""
    return fate(phase("RUNNING", nodes=nodes), phase(state, exit=exit, nodes=nodes, files=files or {}, **extra))


def completes(result: dict | None = None, nodes: str = "vm") -> dict:
    """Running, then COMPLETED with `result` as the run's result.json (default: the record a
    kernel: program job writes)."""
    return ends("COMPLETED", nodes=nodes,
                files={"result.json": json.dumps(result or {"kernel": "program", "exit_code": 0}) + "\n"})


class FakeSlurm:
    """The test's side of the state file: plan fates, set nodes and accounting, read jobs and calls."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)

    @classmethod
    def new(cls, path: str | os.PathLike, nodes: dict | None = None, cpus: int = 2, memory: int = 3900) -> "FakeSlurm":
        """A state with one partition 'debug' of `nodes` (default one idle node 'vm' with `cpus`
        cores and `memory` MB), accounting up, no jobs."""
        state = {"next_job_id": 1001, "partition": {"name": "debug", "cpus": cpus, "memory": memory},
                 "nodes": nodes or {"vm": {"state": "idle", "reason": ""}}, "accounting": True,
                 "fates": [], "jobs": {}, "events": [], "calls": []}
        _save(os.fspath(path), state)
        return cls(path)

    def plan(self, *fates: dict) -> None:
        """The fates of the next submissions, in submission order."""
        with _locked(self.path) as state:
            state["fates"].extend(fates)

    def set(self, **fields) -> None:
        """Replace top-level fields of the state, e.g. nodes={...} or accounting=False."""
        with _locked(self.path) as state:
            state.update(fields)

    @property
    def state(self) -> dict:
        with open(self.path) as f:
            return json.load(f)

    def calls(self, command: str | None = None) -> list[list[str]]:
        """Every command line received (argv, the command's name first), or those of `command`."""
        return [c for c in self.state["calls"] if command is None or c[0] == command]

    def submitted(self) -> list[str]:
        """The folders of the submitted job scripts, in submission order."""
        return [job["folder"] for job in sorted(self.state["jobs"].values(), key=lambda j: int(j["id"]))]


# --- the state file -----------------------------------------------------------------------------


def _save(path: str, state: dict) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(state, f, indent=1)
    os.replace(path + ".tmp", path)


class _locked:
    """The state, read under an exclusive lock and written back when the block ends."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)

    def __enter__(self) -> dict:
        self.lock = open(self.path + ".lock", "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        with open(self.path) as f:
            self.state = json.load(f)
        return self.state

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            _save(self.path, self.state)
        self.lock.close()


# --- jobs -----------------------------------------------------------------------------------------


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def _current(job: dict) -> dict:
    """The phase the job shows now (CANCELLED once scancel reached it)."""
    if job.get("cancelled"):
        return job["cancelled"]
    return job["fate"]["phases"][job["phase"]]


def _nodes(state: dict, ph: dict) -> str:
    """The nodes a phase names, or (a job that got nodes without the test naming them) the first node."""
    return ph.get("nodes") or next(iter(state["nodes"]))


def _enter(state: dict, job: dict, ph: dict) -> None:
    """What happens as a phase begins: files in the run folder, node states, node events."""
    for name, text in ph.get("files", {}).items():
        target = os.path.join(job["folder"], name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "a") as f:  # appended, as Slurm appends a job's output
            f.write(text)
    for node, (st, why) in ph.get("node_states", {}).items():
        state["nodes"][node] = {"state": st, "reason": why}
    ev = ph.get("node_event")
    if ev:
        end = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 1)) if ev.get("back") else ""
        state["events"].append({"node": ev["node"], "start": _now(), "end": end, "state": ev["state"],
                                "reason": ev.get("reason", "")})
    if ph["state"] == "RUNNING" and not job.get("start"):
        job["start"] = _now()
    if ph["state"] in TERMINAL:
        job["end"] = _now()


def _look(state: dict, job: dict) -> None:
    """One poll has seen the job: it moves on once its phase has been seen `looks` times."""
    if job.get("cancelled"):
        return
    phases = job["fate"]["phases"]
    job["looks"] += 1
    if job["phase"] < len(phases) - 1 and job["looks"] >= phases[job["phase"]].get("looks", 1):
        job["phase"] += 1
        job["looks"] = 0
        _enter(state, job, phases[job["phase"]])


def _known(state: dict, job_id: str) -> dict | None:
    job = state["jobs"].get(job_id)
    return job if job is not None and _current(job)["state"] != "FORGOTTEN" else None


def _expand(hostlist: str) -> list[str]:
    """Slurm's host list ('node[1-2],vm') as names."""
    names = []
    for prefix, ranges, single in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,\[\]]+)", hostlist):
        if single:
            names.append(single)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            names += [f"{prefix}{k:0{len(lo)}d}" for k in range(int(lo), int(hi or lo) + 1)]
    return names


# --- the commands ---------------------------------------------------------------------------------


class Refused(Exception):
    """A command line this fake does not answer: hpclab asked something new."""


def _options(argv: list[str], flags: set[str], valued: set[str]) -> tuple[dict, list[str]]:
    """argv as {option: value ('' for a flag)} and the positional words; an option outside
    `flags` and `valued` is refused. A valued option takes '--opt=value' or '--opt value'."""
    opts, words, i = {}, [], 0
    while i < len(argv):
        word = argv[i]
        name, eq, value = word.partition("=")
        if name in flags and not eq:
            opts[name] = ""
        elif name in valued:
            if not eq:
                i += 1
                value = argv[i] if i < len(argv) else ""
            opts[name] = value
        elif word.startswith("-"):
            raise Refused(f"unexpected option {word!r}")
        else:
            words.append(word)
        i += 1
    return opts, words


def _fields(fmt: str, known: dict, sep: str) -> list:
    """The getters of a --format list: '%i|%T' (squeue, sinfo) or 'JobIDRaw,State' (sacct, sacctmgr)."""
    names = fmt.split(sep)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise Refused(f"unexpected format field(s) {unknown} in {fmt!r}")
    return [known[n] for n in names]


def sbatch(state: dict, argv: list[str]) -> str:
    opts, words = _options(argv, {"--parsable"}, set())
    if "--parsable" not in opts or len(words) != 1:
        raise Refused("sbatch is called as: sbatch --parsable SCRIPT")
    script = words[0]
    planned = state["fates"].pop(0) if state["fates"] else fate(phase("COMPLETED", files={
        "result.json": json.dumps({"kernel": "program", "exit_code": 0}) + "\n"}))
    if "refuse" in planned:
        raise Failed(planned["refuse"])
    with open(script) as f:
        text = f.read()
    name = re.search(r"^#SBATCH --job-name=(\S+)", text, flags=re.M)
    job_id = str(state["next_job_id"])
    state["next_job_id"] += 1
    job = {"id": job_id, "script": script, "folder": os.path.dirname(os.path.abspath(script)), "submitted": _now(),
           "name": name.group(1).strip("'\"") if name else os.path.basename(script), "fate": planned, "phase": 0,
           "looks": 0}
    state["jobs"][job_id] = job
    _enter(state, job, planned["phases"][0])
    return job_id + "\n"


def _elapsed(job: dict) -> str:
    return "00:00:01" if job.get("start") else "00:00:00"


def squeue(state: dict, argv: list[str]) -> str:
    opts, words = _options(argv, {"--noheader"}, {"--states", "--jobs", "--format"})
    if words or "--noheader" not in opts or "--jobs" not in opts or "--format" not in opts:
        raise Refused("squeue is called with --noheader --jobs=IDS --format=...")
    every = opts.get("--states") == "all"
    if "--states" in opts and not every:
        raise Refused(f"unexpected --states={opts['--states']}")
    jobs = [j for j in (_known(state, i) for i in opts["--jobs"].split(",")) if j is not None]
    if not every:  # squeue without --states=all lists only what is pending or running
        jobs = [j for j in jobs if _current(j)["state"] not in TERMINAL]
    getters = _fields(opts["--format"], {
        "%i": lambda j, p: j["id"], "%T": lambda j, p: p["state"], "%P": lambda j, p: state["partition"]["name"],
        "%r": lambda j, p: p.get("reason") or "None",
        "%M": lambda j, p: "0:01" if j.get("start") else "0:00",
        "%N": lambda j, p: "" if p["state"] == "PENDING" else _nodes(state, p),
    }, "|")
    lines = ["|".join(get(j, _current(j)) for get in getters) for j in jobs]
    if every:  # hpclab's poll: every job it named has been looked at once
        for j in jobs:
            _look(state, j)
    return "".join(line + "\n" for line in lines)


SACCT_FIELDS = ("JobIDRaw", "JobName", "State", "ExitCode", "Reason", "Elapsed", "Start", "End", "NodeList",
                "NNodes", "NTasks", "AllocCPUS", "Partition", "Timelimit", "ReqMem", "MaxRSS", "TotalCPU", "UserCPU")


def sacct(state: dict, argv: list[str]) -> str:
    opts, words = _options(argv, {"--parsable2", "--noheader"}, {"--jobs", "--format"})
    if words or {"--parsable2", "--noheader", "--jobs", "--format"} - set(opts):
        raise Refused("sacct is called with --parsable2 --noheader --jobs=IDS --format=...")
    if not state["accounting"]:
        raise Failed("sacct: error: Problem talking to the database: Connection refused")
    part = state["partition"]

    def record(j: dict, p: dict, step: dict | None = None) -> dict:
        ran = p["state"] != "PENDING" and bool(j.get("start"))
        st = (step or {}).get("state") or p["state"]
        return {
            "JobIDRaw": j["id"] + (f".{step['id']}" if step else ""),
            "JobName": (step or {}).get("name") or j["name"],
            "State": "CANCELLED by 0" if st == "CANCELLED" else st,
            "ExitCode": (step or {}).get("exit") or p.get("exit", "0:0"),
            "Reason": p.get("reason") or "None", "Elapsed": _elapsed(j),
            "Start": j.get("start", "Unknown"), "End": j.get("end", "Unknown"),
            "NodeList": _nodes(state, p) if ran else "None assigned", "NNodes": "1",
            "NTasks": "1" if step else "", "AllocCPUS": "1", "Partition": part["name"], "Timelimit": "00:30:00",
            "ReqMem": p.get("req_mem", "1950M"), "MaxRSS": (step or {}).get("max_rss", "") if step else "",
            "TotalCPU": (step or {}).get("total_cpu", "00:00:00"), "UserCPU": (step or {}).get("user_cpu", "00:00:00"),
        }

    names = opts["--format"].split(",")
    _fields(opts["--format"], {n: n for n in SACCT_FIELDS}, ",")
    out = []
    for job_id in opts["--jobs"].split(","):
        j = _known(state, job_id)
        if j is None:
            continue
        p = _current(j)
        rows = [record(j, p)]
        if p["state"] in TERMINAL and j.get("start"):
            rows.append(record(j, p, {"id": "batch", "name": "batch", "max_rss": p.get("max_rss", "")}))
            rows += [record(j, p, s) for s in p.get("steps", [])]
        out += ["|".join(r[n] for n in names) for r in rows]
    return "".join(line + "\n" for line in out)


def scontrol(state: dict, argv: list[str]) -> str:
    opts, words = _options(argv, {"--oneliner"}, set())
    if "--oneliner" not in opts or len(words) != 3 or words[:2] != ["show", "job"]:
        raise Refused("scontrol is called as: scontrol show job --oneliner ID")
    j = _known(state, words[2])
    if j is None:
        raise Failed("slurm_load_jobs error: Invalid job id specified")
    p = _current(j)
    reason = (p.get("reason") or "None").replace(" ", "_")
    nodes = "(null)" if p["state"] == "PENDING" else _nodes(state, p)
    return (f"JobId={j['id']} JobName={j['name']} UserId=root(0) JobState={p['state']} Reason={reason} "
            f"Dependency=(null) Requeue=1 Restarts={p.get('restarts', 0)} BatchFlag=1 ExitCode={p.get('exit', '0:0')} "
            f"RunTime={_elapsed(j)} TimeLimit=00:30:00 Partition={state['partition']['name']} NodeList={nodes} "
            f"StdOut={j['folder']}/stdout StdErr={j['folder']}/stderr\n")


def sinfo(state: dict, argv: list[str]) -> str:
    opts, words = _options(argv, {"--noheader", "--Node"}, {"--partition", "--nodes", "--format"})
    if words or "--noheader" not in opts or "--format" not in opts:
        raise Refused("sinfo is called with --noheader and --format=...")
    part, nodes = state["partition"], state["nodes"]
    if "--partition" in opts and opts["--partition"] != part["name"]:
        return ""
    names = [n for n in _expand(opts["--nodes"]) if n in nodes] if "--nodes" in opts else list(nodes)
    getters = _fields(opts["--format"], {
        "%D": lambda n: str(len(names)), "%c": lambda n: str(part["cpus"]), "%m": lambda n: str(part["memory"]),
        "%N": lambda n: n, "%T": lambda n: nodes[n]["state"], "%E": lambda n: nodes[n]["reason"] or "none",
    }, "|")
    rows = names if "--Node" in opts else names[:1]  # without --Node: one line for the partition
    return "".join("|".join(get(n) for get in getters) + "\n" for n in rows)


def scancel(state: dict, argv: list[str]) -> str:
    opts, words = _options(argv, set(), set())
    unknown = []
    for job_id in words:
        j = _known(state, job_id)
        if j is None:
            unknown.append(job_id)
        elif _current(j)["state"] not in TERMINAL:
            j["cancelled"] = {"state": "CANCELLED", "exit": "0:15", "nodes": _nodes(state, _current(j)),
                              "reason": "None"}
            j["end"] = _now()
    if unknown:
        raise Failed("".join(f"scancel: error: Kill job error on job id {u}: Invalid job id specified\n"
                             for u in unknown).rstrip())
    return ""


def sacctmgr(state: dict, argv: list[str]) -> str:
    opts, words = _options(argv, {"--noheader", "--parsable2"}, set())
    args = dict(w.split("=", 1) for w in words if "=" in w)
    if words[:2] != ["show", "event"] or {"--noheader", "--parsable2"} - set(opts) or set(args) != {
            "nodes", "start", "format"}:
        raise Refused("sacctmgr is called as: sacctmgr --noheader --parsable2 show event nodes= start= format=")
    if not state["accounting"]:
        raise Failed("sacctmgr: error: Problem talking to the database: Connection refused")
    wanted = set(_expand(args["nodes"]))
    getters = _fields(args["format"], {
        "NodeName": lambda e: e["node"], "TimeStart": lambda e: e["start"], "TimeEnd": lambda e: e["end"] or "Unknown",
        "State": lambda e: e["state"], "Reason": lambda e: e["reason"],
    }, ",")
    events = [e for e in state["events"] if e["node"] in wanted and (not e["end"] or e["end"] >= args["start"])]
    return "".join("|".join(get(e) for get in getters) + "\n" for e in events)


class Failed(Exception):
    """What the real command would say on stderr before exiting 1."""


COMMANDS = {"sbatch": sbatch, "squeue": squeue, "sacct": sacct, "scontrol": scontrol, "sinfo": sinfo,
            "scancel": scancel, "sacctmgr": sacctmgr}


def main(command: str, argv: list[str]) -> None:
    """Answer one command line (`command` and its arguments `argv`) from the state file in
    FAKE_SLURM_STATE; exit as the real command would."""
    path = os.environ.get("FAKE_SLURM_STATE")
    if not path:
        sys.exit(f"fake slurm: {command}: FAKE_SLURM_STATE names no state file")
    with _locked(path) as state:
        state["calls"].append([command, *argv])
        try:
            out = COMMANDS[command](state, argv)
        except Refused as exc:
            print(f"fake slurm: {command} {' '.join(argv)}: {exc}", file=sys.stderr)
            code = 2
        except Failed as exc:
            print(exc, file=sys.stderr)
            code = 1
        else:
            sys.stdout.write(out)
            code = 0
    sys.exit(code)


if __name__ == "__main__":  # run by this folder's executables: fakeslurm.py COMMAND ARG...
    main(sys.argv[1], sys.argv[2:])
