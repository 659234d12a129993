"""Driving JupyterLab in Debian's Chromium with Playwright: the few gestures the browser tests need.

Open a notebook, run all its cells through the Run menu (as a student would), wait until every
code cell has an execution count, collect error outputs, take screenshots into build/screenshots/.
Waits are explicit (selectors and predicates); no fixed sleeps.
"""

from __future__ import annotations

from pathlib import Path

from hpclab.core import paths

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps trying to reach Google's services,
# which this closed network refuses; --no-sandbox because the tests run as root.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Lab settings for the test server: no news pop-up covering the screenshots, every cell in the
# DOM (so a selector sees all outputs, not only those in the viewport).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    # The tests open the course's own notebooks: outputs must never be saved into them.
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
}


def screenshots_dir() -> Path:
    d = paths.build_dir() / "screenshots"
    d.mkdir(parents=True, exist_ok=True)
    return d


def launch(playwright):
    """Headless Chromium (Debian's) for the tests."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


def shot(page, name: str, full_page: bool = False) -> Path:
    """Screenshot of the page into build/screenshots/<name>.png; returns the path."""
    path = screenshots_dir() / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


def open_notebook(page, lab, relpath: str, timeout_ms: int = 60_000) -> None:
    """Open notebook `relpath` (relative to the server root) and wait for its kernel to be idle."""
    page.goto(lab.url(f"lab/tree/{relpath}"), wait_until="domcontentloaded")
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=timeout_ms)
    wait_kernel_idle(page, timeout_ms)


def wait_kernel_idle(page, timeout_ms: int) -> None:
    page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator[data-status="idle"]') \
        .first.wait_for(timeout=timeout_ms)


def menu(page, top: str, item: str) -> None:
    """Click menu bar entry `top`, then the entry labelled `item`."""
    page.locator(".lm-MenuBar-itemLabel", has_text=top).first.click()
    page.locator(".lm-Menu-itemLabel", has_text=item).first.click()


def run_all(page, timeout_ms: int) -> None:
    """Run > Run All Cells, then wait until every code cell has an execution count and the
    kernel is idle, or execution stopped at an error (see error_outputs). Raises playwright's
    TimeoutError when neither happens in time."""
    menu(page, "Run", "Run All Cells")
    if not _execution_started(page, 30_000):
        # Seen once in a CI run: the kernel showed idle, Run All went through the cells, and no
        # cell ever ran (the requests went out while the kernel's connection was still being
        # set up). Nothing ran, so asking once more cannot run a cell twice.
        menu(page, "Run", "Run All Cells")
    if not _execution_started(page, 30_000):
        # Seen behind JupyterHub's proxy: the kernel's connection never carried a request. A
        # restarted kernel gets a new connection; still nothing has run.
        menu(page, "Kernel", "Restart Kernel and Run All Cells")
        page.locator(".jp-Dialog-button.jp-mod-accept").first.click()
    try:
        _wait_all_executed(page, timeout_ms)
    except Exception:
        shot(page, "run-all-timeout")  # what the notebook showed when we gave up
        raise


def _execution_started(page, timeout_ms: int) -> bool:
    """Has any code cell of the visible notebook been queued or run ([*] or [n])?"""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(
            """() => [...document.querySelectorAll(
                   '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputArea-prompt')]
                   .some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))""",
            timeout=timeout_ms, polling=250)
        return True
    except PlaywrightTimeout:
        return False


def _wait_all_executed(page, timeout_ms: int) -> None:
    page.wait_for_function(
        """() => {
            const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
            if (!panel) return false;
            const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')];
            if (!prompts.length) return false;
            const done = prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
            const busy = prompts.some(p => p.textContent.includes('*'));
            const st = panel.querySelector('.jp-Notebook-ExecutionIndicator');
            const idle = st && st.dataset.status === 'idle';
            // Run All stops at a cell that raised: idle, nothing queued, an error shown. (A
            // stderr output that is only a warning is not one: the run goes on after it.)
            const failed = [...panel.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
                .some(e => /Traceback|Error/.test(e.textContent));
            return idle && !busy && (done || failed);
        }""", timeout=timeout_ms, polling=500)


def error_outputs(page) -> list[str]:
    """Texts of outputs that are errors: error outputs, or stderr with a traceback."""
    texts = page.eval_on_selector_all(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]',
        "els => els.map(e => e.textContent)")
    return [t for t in texts if "Traceback" in t or "Error" in t]


def cell_summary(page) -> str:
    """Each code cell's prompt and the start of its outputs, for a message that explains what
    the notebook showed when a check failed."""
    rows = page.eval_on_selector_all(
        ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell",
        """els => els.map(c => {
            const p = c.querySelector('.jp-InputArea-prompt');
            const outs = [...c.querySelectorAll('.jp-OutputArea-output')].map(
                o => (o.dataset.mimeType || '?') + ': ' + o.textContent.slice(0, 120));
            return (p ? p.textContent : '?') + ' ' + outs.join(' | ');
        })""")
    return "\n".join(rows)


def count(page, selector: str) -> int:
    return page.locator(selector).count()
