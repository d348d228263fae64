"""``lakectl``: a command line with lakeFS's lakectl verbs and flags, and mirrors.

A client of the server's REST API only (:mod:`lakefs_core.client`): scripts written
for lakectl run unchanged (``lakefs://repo/ref/path`` addresses, ``~/.lakectl.yaml``
and ``LAKECTL_*`` variables, tab-separated listings when piped, exit status 1 with
the message on stderr), ``-o json`` gives the server's objects, and ``lakectl
mirror`` drives the replication API.
"""

from lakectl.cli import lakectl, main

__all__ = ["lakectl", "main"]
