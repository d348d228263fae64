"""Real components for tests, e2e runs and benchmarks.

- :mod:`~lakefs_testing.servers`: a throwaway PostgreSQL cluster (the installed server
  binaries) and moto in server mode (S3, DynamoDB), on loopback;
- :mod:`~lakefs_testing.gcs`: a Cloud Storage emulator (gcp-storage-emulator) on
  loopback, and throwaway service-account keys to sign URLs with;
- :mod:`~lakefs_testing.live_server`: the server under uvicorn in a thread;
- :mod:`~lakefs_testing.regions`: two regions (servers and sidecars) in one process;
- :mod:`~lakefs_testing.replicator`: a fault-injecting stand-in for S3 replication;
- :mod:`~lakefs_testing.waiting`: polling with invariant checks.

The product never imports this package; ``tests/``, ``e2e/`` and ``bench/`` do.
"""
