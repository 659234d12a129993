"""A student's JupyterLab server (the local spawner's command): jupyterhub-singleuser, started
without one optional import that costs more than half of its start.

jsonschema imports rfc3987_syntax when it is installed (jupyter_events asks for
jsonschema[format-nongpl]), and that package builds its Lark grammar at import. Measured here as
a student, importing jupyterhub.singleuser takes 1.9-2.1 s with it and 0.8 s without. It serves
only the 'iri' and 'iri-reference' format checks, which no schema of the server's packages uses;
jsonschema treats the package as optional and leaves those two checks out when it is absent.
The lock keeps it out (pyproject.toml pins jsonschema below 4.24, the first to import it); this
stays for a room whose environment is not the lock's (conda's, a site's).
"""

import sys

sys.modules.setdefault("rfc3987_syntax", None)  # None in sys.modules: `import` raises ImportError

from jupyterhub.singleuser import main  # noqa: E402  (after the line above, on purpose)

if __name__ == "__main__":
    sys.exit(main())
