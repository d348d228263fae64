"""The REST API's error mapping: the one of every HTTP front door (lakefs_core.web)."""

from lakefs_core.web import (
    STATUS,
    error_response,
    exception_response,
    failure_response,
    install_error_handlers,
    status_of,
)

__all__ = ["STATUS", "error_response", "exception_response", "failure_response",
           "install_error_handlers", "status_of"]
