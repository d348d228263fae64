"""Protocol rules that more than one part of the product speaks, below every front door.

:mod:`~lakefs_core.protocol.sigv4` holds AWS Signature Version 4's primitives: the S3
gateway verifies incoming requests with them and the S3 blockstore signs outgoing
ones with them.
"""
