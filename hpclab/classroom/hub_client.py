"""A student at the hub, as a program: log in with a password (the hub's login form, real PAM),
start the server, wait until it answers, use its Jupyter API (contents, kernels, code run in a
real kernel over the kernel's websocket), stop it. The tests and the load benchmark drive the
room through it; it imports nothing of JupyterHub (only requests and websocket-client, which the
project's environment has).

    c = HubClient("http://127.0.0.1:8000/", "student01", password)
    c.login(); seconds = c.start_server()
    c.execute("import os; print(os.getuid())").stdout   -> '1001\\n'
    c.stop_server()
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from urllib.parse import quote, urlparse

import requests
import websocket

from hpclab.core.errors import HpclabError


@dataclass
class Execution:
    """What one cell did: its printed text, its result, its error, and whether the kernel died."""

    stdout: str = ""
    stderr: str = ""
    result: str | None = None
    error: str | None = None
    status: str = ""          # the execute_reply's status: ok, error, aborted ('' if none came)
    kernel_died: bool = False
    seconds: float = 0.0
    messages: list[str] = field(default_factory=list)


class HubClient:
    def __init__(self, url: str, username: str, password: str, verify: bool | str = True, timeout: float = 30.0):
        """`verify`: check the hub's TLS certificate (True), not (False: a self-signed one), or
        against this CA file."""
        self.url = url if url.endswith("/") else url + "/"
        self.username = username
        self.password = password
        self.timeout = timeout
        self.verify = verify
        self.session = requests.Session()
        self.token: str | None = None

    def _request(self, method: str, url: str, **kw) -> requests.Response:
        # verify on every request: requests lets REQUESTS_CA_BUNDLE override a session's verify=False
        kw.setdefault("timeout", self.timeout)
        return self.session.request(method, url, verify=self.verify, **kw)

    # --- the hub --------------------------------------------------------------------------

    def login(self) -> None:
        """Log in through the hub's login form, then ask the hub for an API token of this user."""
        s = self.session
        r = self._request("GET", self.url + "hub/login")
        r.raise_for_status()
        xsrf = s.cookies.get("_xsrf", path="/hub/") or s.cookies.get("_xsrf")
        r = self._request("POST", self.url + "hub/login?next=", allow_redirects=False,
                          data={"username": self.username, "password": self.password, "_xsrf": xsrf})
        if r.status_code != 302 or not any(c.name.startswith("jupyterhub-session") for c in s.cookies):
            raise HpclabError(f"the hub refused {self.username}'s login (HTTP {r.status_code})",
                              "check the password in the instructors' passwords.txt and that the account is in "
                              "the classroom's groups")
        r = self._request("POST", self.url + f"hub/api/users/{quote(self.username)}/tokens",
                          json={"note": "hpclab hub_client", "expires_in": 3600},
                          headers={"X-XSRFToken": s.cookies.get("_xsrf", path="/hub/") or xsrf or ""})
        if r.status_code not in (200, 201):
            raise HpclabError(f"the hub gave {self.username} no API token (HTTP {r.status_code}: {r.text[:200]})",
                              "read the hub's log (hpclab classroom status names it)")
        self.token = r.json()["token"]

    def _hub(self, method: str, path: str, **kw) -> requests.Response:
        return self._request(method, self.url + "hub/api/" + path, headers=self._auth(), **kw)

    def _auth(self) -> dict:
        if not self.token:
            raise HpclabError("the client has not logged in", "call login() first")
        return {"Authorization": f"token {self.token}"}

    def user(self) -> dict:
        r = self._hub("GET", f"users/{quote(self.username)}")
        r.raise_for_status()
        return r.json()

    def server_ready(self) -> bool:
        server = (self.user().get("servers") or {}).get("")
        return bool(server and server.get("ready"))

    def start_server(self, timeout: float = 120.0) -> float:
        """Ask the hub to start this user's server and wait until it is ready and answers its API;
        return the seconds that took (from the request to the first answer of the server)."""
        t0 = time.monotonic()
        r = self._hub("POST", f"users/{quote(self.username)}/server")
        if r.status_code not in (201, 202, 400):  # 400: it runs already
            raise HpclabError(f"the hub did not start {self.username}'s server (HTTP {r.status_code}: {r.text[:300]})",
                              "read the hub's log (hpclab classroom status names it)")
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if self.server_ready():
                try:
                    if self.api("GET", "api/status", timeout=5).status_code == 200:
                        return time.monotonic() - t0
                except requests.RequestException:
                    pass
            time.sleep(0.2)
        raise HpclabError(f"{self.username}'s server was not ready within {timeout:.0f} s",
                          "read the hub's log (hpclab classroom status names it)")

    def stop_server(self, timeout: float = 60.0) -> float:
        t0 = time.monotonic()
        r = self._hub("DELETE", f"users/{quote(self.username)}/server")
        if r.status_code not in (202, 204, 400):
            raise HpclabError(f"the hub did not stop {self.username}'s server (HTTP {r.status_code})", "")
        while time.monotonic() < t0 + timeout:
            if not (self.user().get("servers") or {}):
                return time.monotonic() - t0
            time.sleep(0.2)
        raise HpclabError(f"{self.username}'s server did not stop within {timeout:.0f} s", "")

    # --- the user's server ------------------------------------------------------------------

    def server_url(self) -> str:
        return self.url + f"user/{quote(self.username)}/"

    def api(self, method: str, path: str, **kw) -> requests.Response:
        """A request to the user's Jupyter server (path below /user/<name>/, e.g. 'api/contents')."""
        return self._request(method, self.server_url() + path, headers=self._auth(), **kw)

    def contents(self, path: str = "") -> dict:
        r = self.api("GET", "api/contents/" + quote(path))
        r.raise_for_status()
        return r.json()

    def save_text(self, path: str, text: str) -> None:
        r = self.api("PUT", "api/contents/" + quote(path), json={"type": "file", "format": "text", "content": text})
        r.raise_for_status()

    def start_kernel(self, name: str = "python3") -> str:
        r = self.api("POST", "api/kernels", json={"name": name})
        r.raise_for_status()
        return r.json()["id"]

    def open_notebook(self, path: str, kernel: str = "python3") -> str:
        """Open notebook `path` (relative to the server's root) as JupyterLab does, through the
        sessions API: its kernel knows which notebook it serves (JPY_SESSION_NAME), which room
        mode reads. Returns the kernel's id (delete_kernel ends it)."""
        r = self.api("POST", "api/sessions", json={"path": path, "name": path.rsplit("/", 1)[-1],
                                                     "type": "notebook", "kernel": {"name": kernel}})
        r.raise_for_status()
        return r.json()["kernel"]["id"]

    def delete_kernel(self, kernel_id: str) -> None:
        self.api("DELETE", f"api/kernels/{kernel_id}")

    def execute(self, code: str, kernel_id: str | None = None, timeout: float = 60.0) -> Execution:
        """Run `code` in a kernel of the user's server (a new one unless `kernel_id`, deleted again)
        and collect what it printed, its result or error. A kernel that dies meanwhile (killed
        over its memory limit, say) gives kernel_died=True instead of an exception."""
        own = kernel_id is None
        kernel_id = kernel_id or self.start_kernel()
        t0 = time.monotonic()
        out = Execution()
        u = urlparse(self.server_url())
        ws_url = f"{'wss' if u.scheme == 'https' else 'ws'}://{u.netloc}{u.path}api/kernels/{kernel_id}/channels" \
                 f"?session_id={uuid.uuid4().hex}"
        sslopt = {"cert_reqs": 0} if self.verify is False else \
            {"ca_certs": self.verify} if isinstance(self.verify, str) else {}
        ws = websocket.create_connection(ws_url, header=[f"Authorization: token {self.token}"], timeout=timeout,
                                         sslopt=sslopt)
        try:
            msg_id = uuid.uuid4().hex
            ws.send(json.dumps({
                "header": {"msg_id": msg_id, "username": self.username, "session": uuid.uuid4().hex,
                           "msg_type": "execute_request", "version": "5.3"},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                            "allow_stdin": False, "stop_on_error": True}}))
            replied = idle = False
            while not (replied and idle):
                if time.monotonic() - t0 > timeout:
                    raise HpclabError(f"the code did not finish within {timeout:.0f} s in {self.username}'s kernel", "")
                try:
                    raw = ws.recv()
                except (websocket.WebSocketConnectionClosedException, websocket.WebSocketTimeoutException):
                    out.kernel_died = True
                    break
                msg = json.loads(raw)
                kind = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
                content = msg.get("content", {})
                if kind == "status" and content.get("execution_state") in ("restarting", "dead", "autorestarting"):
                    out.kernel_died = True
                    break
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                out.messages.append(kind)
                if kind == "stream":
                    if content.get("name") == "stderr":
                        out.stderr += content.get("text", "")
                    else:
                        out.stdout += content.get("text", "")
                elif kind == "execute_result":
                    out.result = content.get("data", {}).get("text/plain")
                elif kind == "error":
                    out.error = f"{content.get('ename')}: {content.get('evalue')}"
                elif kind == "execute_reply":
                    out.status = content.get("status", "")
                    replied = True
                elif kind == "status" and content.get("execution_state") == "idle":
                    idle = True
        finally:
            ws.close()
            out.seconds = time.monotonic() - t0
            if own:
                try:
                    self.delete_kernel(kernel_id)
                except requests.RequestException:
                    pass
        return out
