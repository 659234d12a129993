"""The reference analysis runs once per lab folder and state of its packed data: a lab's test
cells ask for the same answers several times, and each fresh process costs about a second."""

from __future__ import annotations

import subprocess

from hpclab.course import lessons
from hpclab.grading import labdata, references


def test_the_answers_are_computed_once_per_state_of_the_packed_data(tmp_path, monkeypatch):
    lab = lessons.labs()[0]
    data = labdata.data_dir(tmp_path)
    data.mkdir()
    (data / labdata.MANIFEST).write_text('{"runs": {}}')
    calls = []

    def fresh_process(argv, what, **kw):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, stdout=f'{{"answer": {len(calls)}}}', stderr="")
    monkeypatch.setattr(references.commands, "run", fresh_process)
    monkeypatch.setattr(references, "REFERENCE_CACHE", {})
    assert references.reference(lab, tmp_path) == {"answer": 1}
    assert references.reference(lab, tmp_path) == {"answer": 1}
    assert len(calls) == 1
    # a run packed again (a file added, or one rewritten): new answers
    (data / "run-1").mkdir()
    (data / "run-1" / "result.json").write_text("{}")
    assert references.reference(lab, tmp_path) == {"answer": 2}
    (data / "run-1" / "result.json").write_text('{"edited": 1}')
    assert references.reference(lab, tmp_path) == {"answer": 3}
    # with the cache off (None), every call is a fresh process
    monkeypatch.setattr(references, "REFERENCE_CACHE", None)
    references.reference(lab, tmp_path)
    assert len(calls) == 4


def test_the_graders_check_computes_in_its_own_process_and_says_what_failed(tmp_path, monkeypatch):
    """In the grader's check (COMPUTE_HERE) no second process starts, and bad data end in the
    same error as the fresh process gives."""
    lab = lessons.labs()[0]
    started = []
    monkeypatch.setattr(references.commands, "run", lambda argv, *a, **kw: started.append(argv))
    monkeypatch.setattr(references, "REFERENCE_CACHE", {})
    monkeypatch.setattr(references, "COMPUTE_HERE", True)
    monkeypatch.setattr(references, "compute", lambda lab, folder: {"lab": lab, "folder": str(folder)})
    assert references.reference(lab, tmp_path) == {"lab": lab, "folder": str(tmp_path.resolve())}
    assert started == []

    def damaged(lab, folder):
        raise ValueError("a column is missing")
    monkeypatch.setattr(references, "compute", damaged)
    monkeypatch.setattr(references, "REFERENCE_CACHE", {})
    try:
        references.reference(lab, tmp_path)
    except references.HpclabError as exc:
        assert exc.what == f"reference analysis of {lab} failed: ValueError: a column is missing"
    else:
        raise AssertionError("bad data gave answers")
