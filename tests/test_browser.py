"""JupyterLab in a real browser: the course served, a notebook run by a student, the formgrader.

A JupyterLab server (hpclab.grading.jupyter.LabServer: free port, known token, own runtime folder and a
fresh nbgrader course folder made from labs/) is driven with Playwright in Debian's headless
Chromium. Screenshots go to build/screenshots/ (lab-home, notebook-90-*, formgrader) for a
person to look at. The notebook test submits Slurm jobs (interactive engines, the C pingpong)
on the local cluster.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from hpclab.tools import interactive
from hpclab.grading import jupyter
from hpclab.core import paths
from hpclab.core.errors import HpclabError
from tests.browser import lab as ui

NOTEBOOK = "notebooks/90-interactive-mpi.ipynb"

pytestmark = pytest.mark.skipif(not os.path.exists(ui.CHROMIUM), reason="needs Debian's chromium")


@pytest.fixture(scope="module")
def lab_server():
    """A running JupyterLab on the repository with a throw-away nbgrader course folder."""
    course = paths.build_dir() / f"tmp-browser-course-{os.getpid()}"
    server = jupyter.LabServer(course=course, env={"HPCLAB_QUICK": "1"}, settings=ui.LAB_SETTINGS,
                               log=ui.screenshots_dir() / "lab-server.log")
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(course, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = ui.launch(p)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    pg = browser.new_page(viewport={"width": 1400, "height": 900})
    yield pg
    pg.close()


def test_lab_shows_the_course_and_nbgrader(lab_server, page):
    """Does JupyterLab open on the course folders, with nbgrader's menu and no error?"""
    page.goto(lab_server.url("lab/tree/notebooks"), wait_until="domcontentloaded")
    page.locator(".jp-DirListing-item", has_text="90-interactive").first.wait_for(timeout=60_000)
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").first.wait_for(timeout=10_000)
    ui.shot(page, "lab-home")
    top = {item["name"] for item in lab_server.api("contents")["content"]}
    assert {"notebooks", "labs", "docs", "hpclab"} <= top
    assert not {".venv", ".git", "hpclab.egg-info"} & top
    nb = {item["name"] for item in lab_server.api("contents/notebooks")["content"]}
    assert "90-interactive-mpi.ipynb" in nb


def test_formgrader_lists_the_labs(lab_server, page):
    """Does the instructors' formgrader list every lab of labs/ as an assignment, with a working
    exchange (no warning that release and collect are unavailable)?"""
    labs = jupyter.course_labs()
    assert labs, "labs/ has no lab notebook"
    page.goto(lab_server.url("formgrader"), wait_until="domcontentloaded")
    for lab in labs:
        page.locator("table tbody tr", has_text=lab).first.wait_for(timeout=30_000)
    ui.shot(page, "formgrader", full_page=True)
    rows = page.locator("table tbody tr").all_inner_texts()
    assert all(any(lab in r for r in rows) for lab in labs)
    assert page.locator("#warning-exchange").count() == 0, "formgrader: the exchange is missing"


@pytest.mark.cluster
def test_interactive_notebook_runs_with_plots_and_progress(cluster, lab_server, page):
    """Does notebook 90 run top to bottom in the browser, with figures, the job progress display,
    no error output, and no engines job left in the queue?"""
    ui.open_notebook(page, lab_server, NOTEBOOK)
    ui.run_all(page, timeout_ms=420_000)  # ~70 s on a quiet cluster; queued jobs wait
    panel = ".jp-NotebookPanel:not(.lm-mod-hidden)"
    errors = ui.error_outputs(page)
    assert not errors, "error output in the notebook:\n" + "\n---\n".join(errors)[:3000]
    # figures: the three halo steps, latency/bandwidth, overhead
    imgs = page.locator(f"{panel} .jp-OutputArea-output img")
    assert imgs.count() >= 5, "fewer than 5 figures; the cells showed:\n" + ui.cell_summary(page)
    # the progress display of experiment.run (tqdm's widget) rendered, counted every job and
    # named the nodes they ran on (a bar full: n/n jobs, whatever n the notebook submits)
    bar = page.locator(f"{panel} .jp-OutputArea-output .widget-hprogress")
    assert bar.count() >= 1
    texts = page.locator(f"{panel} .jp-OutputArea-output .widget-hbox").all_inner_texts()
    assert any(re.search(r"\b(\d+)/\1\b", t) and re.search(r"nodes:\s*\w", t) for t in texts), texts
    halo = imgs.nth(2)
    halo.scroll_into_view_if_needed()
    ui.shot(page, "notebook-90-halo")
    bar.first.scroll_into_view_if_needed()
    ui.shot(page, "notebook-90-progress")
    imgs.last.scroll_into_view_if_needed()
    ui.shot(page, "notebook-90-pingpong")
    # the engines' jobs of this run: both ended (the notebook stopped them)
    body = page.locator(panel).inner_text()
    jobs = re.findall(r"engines job (\d+) still in the queue: (\w+)", body)
    assert jobs and jobs[0][1] == "False"
    restarted = re.findall(r"job (\d+) cancelled, new job (\d+)", body)
    assert restarted, "the deadlock cell did not restart the engines"
    for job in {jobs[0][0], *restarted[0]}:
        assert not interactive.job_in_queue(job), f"engines job {job} is still queued or running"


def test_make_lab_refuses_a_busy_port():
    """Does `hpclab course lab` on a port already in use end with one clear line, not a traceback?"""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(HpclabError, match="already in use"):
            jupyter.serve_lab(port)
        exe = os.path.join(os.path.dirname(sys.executable), "hpclab")
        res = subprocess.run([exe, "course", "lab", "--port", str(port)], capture_output=True,
                             text=True, timeout=60)
    assert res.returncode != 0
    assert "already in use" in res.stderr + res.stdout
    assert "Traceback" not in res.stderr


def test_lab_server_needs_its_token(lab_server):
    """Does the server refuse API calls without the token and answer with it?"""
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{lab_server.base}/api/contents", timeout=10)
    assert err.value.code == 403
    assert lab_server.api("status")["kernels"] >= 0


def test_the_course_report_renders_with_its_notebooks(cluster, page, tmp_path, monkeypatch):
    """Does the report `make course` writes (here for notebook 01 with the quick parameter set)
    open in the browser, list the notebook as passed with its time, and link to its page, which
    renders? The screenshots (course-report, course-report-notebook) are the README's pictures'
    source (docs/images/ holds the ones taken from a whole course)."""
    from hpclab.course import runner as course

    monkeypatch.setenv("HPCLAB_QUICK", "1")
    out = tmp_path / "report"
    report = course.run_course([paths.repo() / "notebooks" / "01-mpi-landscape.ipynb"], out)
    assert [n.ok for n in report.notebooks] == [True]
    page.goto((out / "index.html").as_uri(), wait_until="load")
    body = page.locator("body").inner_text()
    assert "01-mpi-landscape" in body and "ok" in body.lower()
    ui.shot(page, "course-report")
    page.locator("a[href*='01-mpi-landscape']").first.click()
    page.wait_for_load_state("load")
    assert "MPI" in page.locator("body").inner_text()
    ui.shot(page, "course-report-notebook")
