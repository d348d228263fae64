"""The one client of lakeFS's REST API that the product uses.

:class:`RestClient` is the transport: one pooled httpx client per object, bounded
tenacity retries on transport errors and the retryable statuses only (429, 502, 503,
504), lakeFS's pagination, and errors typed by status (:mod:`.errors`). The sidecar's
source reader, the Spark client and the e2e harness each build their calls on it.
"""

from lakefs_core.client.errors import ApiError, ServerRequestError, error_for
from lakefs_core.client.rest import API_PREFIX, RETRYABLE_STATUSES, RestClient

__all__ = [
    "API_PREFIX",
    "RETRYABLE_STATUSES",
    "ApiError",
    "RestClient",
    "ServerRequestError",
    "error_for",
]
