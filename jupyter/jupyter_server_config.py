# JupyterLab settings for the hpclab course, passed with `--config` by hpclab.grading.jupyter (make lab).
# Only settings every course machine needs live here; the port, the token and the root folder
# are given on the command line by hpclab.grading.jupyter.serve_lab, so this file never holds a secret.
import os

c = get_config()  # noqa: F821 (provided by Jupyter)

# Local only: the course is reached through http://127.0.0.1 (an ssh tunnel on a remote machine).
c.ServerApp.ip = "127.0.0.1"
c.ServerApp.open_browser = False
# A busy port is an error (said clearly by hpclab), not a silent move to the next port.
c.ServerApp.port_retries = 0
# The course VM runs as root; Jupyter refuses that unless told.
c.ServerApp.allow_root = os.geteuid() == 0

# nbgrader: the assignment list (students) and the formgrader (instructors) are server
# extensions; their JupyterLab parts are prebuilt extensions shipped with nbgrader 0.9.
c.ServerApp.jpserver_extensions = {
    "nbgrader.server_extensions.formgrader": True,
    "nbgrader.server_extensions.assignment_list": True,
    "nbgrader.server_extensions.course_list": True,
    "nbgrader.server_extensions.validate_assignment": True,
}

# Keep the file browser on the course: build products of Python and Jupyter are noise there.
c.ContentsManager.hide_globs = ["__pycache__", "*.pyc", "*.egg-info", ".ipynb_checkpoints",
                                "*~", ".git", ".venv"]
# Start in the notebooks folder; the other course folders (labs/, docs/, runs/) are one click up.
c.ServerApp.default_url = "/lab/tree/notebooks"
# No "Would you like to receive news?" pop-up: the course machine may be offline.
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
