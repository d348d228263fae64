"""The web UI: server-rendered pages under ``/ui`` for people in a browser.

Every page is built from the REST API's own answers, called in-process with the
signed-in user's access key, so the UI enforces exactly the API's permissions; the
user's policies (:class:`~lakefs_core.auth.service.AuthService`) only decide which
buttons a page offers. Mirrors come from the replication service's API through the
server's proxy. Assets are files of this package: nothing is fetched from elsewhere.
"""

from lakefs_core.ui.app import UI_PREFIX, create_ui

__all__ = ["UI_PREFIX", "create_ui"]
