"""The classroom in a real browser (Debian's headless Chromium, Playwright): a student logs in on
the hub's login page, fetches a lab from the Assignments tab, runs it (real Slurm jobs as the
student) and submits it; an instructor logs in, sees the submission in the formgrader, autogrades
it there and releases feedback; the student fetches the feedback. Screenshots of each step go to
build/screenshots/classroom-*.png.
"""

from __future__ import annotations

import os
import shutil
import time

import nbformat
import pytest

from hpclab.classroom import accounts, grading_room, load
from hpclab.classroom.hub_client import HubClient
from hpclab.grading import demo
from tests.browser import lab as ui
from tests.test_browser import browser  # noqa: F401  (the same headless Chromium fixture)

LAB = "lab-transports"
STUDENT = "student03"

pytestmark = [pytest.mark.cluster, pytest.mark.classroom,
              pytest.mark.skipif(not os.path.exists(ui.CHROMIUM), reason="needs Debian's chromium")]


def _passwords(lay) -> dict[str, str]:
    return dict(line.split() for line in lay.passwords.read_text().splitlines() if line and not line.startswith("#"))


def _login(browser, base: str, user: str, password: str):
    """A fresh browser context (its own cookies) logged in on the hub's login page."""
    page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    page.goto(f"{base}/hub/login", wait_until="domcontentloaded")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    return page


def _assignments_panel(page):
    ui.menu(page, "Nbgrader", "Assignment List")
    return page.locator("#assignments, .nbgrader-AssignmentList, [id*=assignment]").first


def _button_in_row(page, section_text: str, row_text: str, label: str):
    """The button labelled `label` in the Assignments tab's row of `row_text`."""
    row = page.locator("div.list_item, .list_item, li, tr", has_text=row_text).filter(
        has=page.locator("button", has_text=label)).first
    return row.locator("button", has_text=label).first


def _submissions(client) -> list[str]:
    """Timestamps of the student's submissions of LAB, from nbgrader's list in their server."""
    listing = client.api("GET", "assignments", params={"course_id": load.COURSE_ID}).json()
    entries = listing.get("value", []) if isinstance(listing, dict) else listing
    return [str(sub.get("timestamp")) for e in entries
            if e.get("assignment_id") == LAB and e.get("status") == "submitted" for sub in e.get("submissions", [])]


def _wait(check, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {seconds:g} s waiting for {what}")


def _click_and_confirm(page, link, words: str, timeout_ms: int = 120_000) -> None:
    """Click a formgrader action and close the dialog that reports it (which names `words`)."""
    link.click()
    dialog = page.locator(".modal-dialog", has_text=words).first
    dialog.wait_for(timeout=timeout_ms)
    assert "Success" in dialog.inner_text(), dialog.inner_text()[:1000]
    dialog.locator(".modal-footer button").first.click()
    dialog.wait_for(state="hidden", timeout=30_000)


def test_a_student_submits_from_the_assignments_tab_and_an_instructor_grades_in_the_formgrader(classroom, browser):
    lay = classroom
    base = "http://127.0.0.1:8000"
    pw = _passwords(lay)
    grading_room.release(lay, LAB)
    # A first login: no server of the student's running, no copy of the lab in their course.
    client = HubClient(base, STUDENT, pw[STUDENT])
    client.login()
    if client.user().get("servers"):
        client.stop_server()
    shutil.rmtree(accounts.home(STUDENT) / "hpclab" / LAB, ignore_errors=True)

    # --- the student: log in, fetch, run, save, submit -------------------------------------------
    page = _login(browser, base, STUDENT, pw[STUDENT])
    page.locator(".jp-DirListing-item").first.wait_for(timeout=120_000)
    ui.shot(page, "classroom-student-lab")
    _assignments_panel(page)
    fetch = _button_in_row(page, "Released", LAB, "Fetch")
    fetch.wait_for(timeout=60_000)
    ui.shot(page, "classroom-assignments-released")
    fetch.click()
    _button_in_row(page, "Downloaded", LAB, "Submit").wait_for(timeout=60_000)

    # The student's answers: typed in a browser they are the solutions; put them in through the
    # student's own server (contents API), as the editor would save them.
    listing = client.api("GET", "assignments", params={"course_id": load.COURSE_ID}).json()
    folder = load._fetched_folder(listing, LAB)
    path = f"{folder}/{LAB}.ipynb"
    source = nbformat.read(lay.nbgrader_course / "source" / LAB / f"{LAB}.ipynb", as_version=4)
    load.save_notebook(client, path, demo.answered(nbformat.from_dict(load.read_notebook(client, path)), source))

    page.goto(f"{base}/user/{STUDENT}/lab/tree/{path}", wait_until="domcontentloaded")
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=60_000)
    ui.wait_kernel_idle(page, 60_000)
    ui.run_all(page, timeout_ms=300_000)
    errors = ui.error_outputs(page)
    assert not errors, "error output in the lab:\n" + "\n---\n".join(errors)[:3000] + "\n" + ui.cell_summary(page)
    ui.shot(page, "classroom-student-ran-the-lab")
    ui.menu(page, "File", "Save Notebook")
    _assignments_panel(page)
    submitted_before = _submissions(client)
    _button_in_row(page, "Downloaded", LAB, "Submit").click()
    _wait(lambda: len(_submissions(client)) > len(submitted_before), 60, "the submission to appear")
    ui.shot(page, "classroom-student-submitted")

    # --- the instructor: the formgrader collects, autogrades, releases feedback ---------------------
    teacher = _login(browser, base, "instructor1", pw["instructor1"])
    teacher.locator(".jp-DirListing-item").first.wait_for(timeout=120_000)
    formgrader = f"{base}/services/{grading_room.COURSE_ID}/formgrader"
    teacher.goto(formgrader, wait_until="domcontentloaded")
    row = teacher.locator("table tbody tr", has_text=LAB).first
    row.wait_for(timeout=60_000)
    ui.shot(teacher, "classroom-formgrader")
    _click_and_confirm(teacher, row.locator("td.collect a"), "collected")
    teacher.goto(f"{formgrader}/manage_submissions/{LAB}", wait_until="domcontentloaded")
    student = teacher.locator("table tbody tr", has_text=STUDENT).first
    student.wait_for(timeout=60_000)
    _click_and_confirm(teacher, student.locator("td.autograde a"), "autograded", timeout_ms=300_000)
    teacher.reload(wait_until="domcontentloaded")
    student = teacher.locator("table tbody tr", has_text=STUDENT).first
    student.wait_for(timeout=60_000)
    score = student.locator("td.score").inner_text().split("/")
    ui.shot(teacher, "classroom-formgrader-autograded")
    # The answers are right for the student's own runs: full marks, recomputed by the grader.
    assert float(score[0]) == float(score[1]) > 0, f"score {'/'.join(score)}"
    _click_and_confirm(teacher, student.locator("td.generate-feedback a"), "feedback")
    _click_and_confirm(teacher, student.locator("td.release-feedback a"), "feedback")
    ui.shot(teacher, "classroom-formgrader-feedback")

    # --- the student fetches the feedback -------------------------------------------------------------
    page.reload(wait_until="domcontentloaded")
    page.locator(".jp-DirListing-item").first.wait_for(timeout=60_000)
    _assignments_panel(page)
    _button_in_row(page, "Submitted", LAB, "Fetch Feedback").click()
    _wait(lambda: client.api("GET", f"api/contents/{folder}/feedback").status_code == 200
          and client.contents(f"{folder}/feedback")["content"], 60, "the feedback in the student's folder")
    # the tab lists the fetched feedback under the submission (nbgrader: "feedback ready to view")
    page.locator(".nbgrader-assignment-list, body").first.locator("text=/feedback/i").last.wait_for(timeout=30_000)
    ui.shot(page, "classroom-student-feedback")
