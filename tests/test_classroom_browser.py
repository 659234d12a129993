"""The classroom in a real browser (Debian's headless Chromium, Playwright): a student logs in on
the hub's login page, fetches a lab from the Assignments tab, runs it (real Slurm jobs as the
student) and submits it; an instructor logs in, sees the submission in the formgrader, autogrades
it there and releases feedback; the student fetches the feedback. Screenshots of each step go to
build/screenshots/classroom-*.png.
"""

from __future__ import annotations

import os

import nbformat
import pytest

from hpclab.classroom import grading_room, load
from hpclab.classroom.hub_client import HubClient
from hpclab.grading import demo
from tests.browser import lab as ui

LAB = "lab-transports"
STUDENT = "student03"

pytestmark = [pytest.mark.cluster, pytest.mark.classroom,
              pytest.mark.skipif(not os.path.exists(ui.CHROMIUM), reason="needs Debian's chromium")]


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = ui.launch(p)
        yield b
        b.close()


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


def test_a_student_submits_from_the_assignments_tab_and_an_instructor_grades_in_the_formgrader(classroom, browser):
    lay = classroom
    base = "http://127.0.0.1:8000"
    pw = _passwords(lay)
    grading_room.release(lay, LAB)

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
    client = HubClient(base, STUDENT, pw[STUDENT])
    client.login()
    listing = client.api("GET", "assignments", params={"course_id": load.COURSE_ID}).json()
    folder = load._fetched_folder(listing, LAB)
    path = f"{folder}/{LAB}.ipynb"
    source = nbformat.read(lay.nbgrader_course / "source" / LAB / f"{LAB}.ipynb", as_version=4)
    load.save_notebook(client, path, demo.answered(nbformat.from_dict(load.read_notebook(client, path)), source))

    page.goto(f"{base}/user/{STUDENT}/lab/tree/{path}", wait_until="domcontentloaded")
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=60_000)
    ui.wait_kernel_idle(page, 60_000)
    ui.run_all(page, timeout_ms=600_000)
    errors = ui.error_outputs(page)
    assert not errors, "error output in the lab:\n" + "\n---\n".join(errors)[:3000] + "\n" + ui.cell_summary(page)
    ui.shot(page, "classroom-student-ran-the-lab")
    ui.menu(page, "File", "Save Notebook")
    _assignments_panel(page)
    submit = _button_in_row(page, "Downloaded", LAB, "Submit")
    submit.click()
    page.locator("text=Submitted assignments").first.wait_for(timeout=60_000)
    ui.shot(page, "classroom-student-submitted")

    # --- the instructor: the formgrader collects, autogrades, releases feedback ---------------------
    teacher = _login(browser, base, "instructor1", pw["instructor1"])
    teacher.locator(".jp-DirListing-item, #ipython-main-app, body").first.wait_for(timeout=120_000)
    teacher.goto(f"{base}/services/{grading_room.COURSE_ID}/formgrader", wait_until="domcontentloaded")
    row = teacher.locator("table tbody tr", has_text=LAB).first
    row.wait_for(timeout=60_000)
    ui.shot(teacher, "classroom-formgrader")
    row.locator("a[title*='Collect'], button[title*='Collect'], .collect").first.click()
    teacher.wait_for_timeout(500)
    teacher.goto(f"{base}/services/{grading_room.COURSE_ID}/formgrader/manage_submissions/{LAB}",
                 wait_until="domcontentloaded")
    student_row = teacher.locator("table tbody tr", has_text=STUDENT).first
    student_row.wait_for(timeout=60_000)
    student_row.locator("a[title*='utograde'], button[title*='utograde'], .autograde").first.click()
    student_row.locator("text=/\\d+(\\.\\d+)? \\/ \\d+/").first.wait_for(timeout=300_000)
    ui.shot(teacher, "classroom-formgrader-autograded")

    teacher.goto(f"{base}/services/{grading_room.COURSE_ID}/formgrader", wait_until="domcontentloaded")
    row = teacher.locator("table tbody tr", has_text=LAB).first
    row.wait_for(timeout=60_000)
    row.locator("a[title*='enerate feedback'], button[title*='enerate feedback']").first.click()
    teacher.wait_for_timeout(500)
    row.locator("a[title*='elease feedback'], button[title*='elease feedback']").first.click()
    ui.shot(teacher, "classroom-formgrader-feedback")

    # --- the student fetches the feedback -------------------------------------------------------------
    page.reload(wait_until="domcontentloaded")
    page.locator(".jp-DirListing-item").first.wait_for(timeout=60_000)
    _assignments_panel(page)
    _button_in_row(page, "Submitted", LAB, "Fetch Feedback").click()
    ui.shot(page, "classroom-student-feedback")
    feedback = client.contents(f"{folder}/feedback")
    assert feedback["content"], "the student's feedback folder is empty"
