"""Two regions end to end with real processes: harness, invariant checker, chaos, demo.

- :mod:`e2e.processes`: child processes (servers, sidecars, moto) that never outlive us.
- :mod:`e2e.cluster`: a two-region deployment on loopback (``east`` -> ``west``).
- :mod:`e2e.api`: a small REST client of one region (lakeFS API and mirrors API).
- :mod:`e2e.crr`: fault-injecting object replicators standing in for S3 CRR.
- :mod:`e2e.invariants`: I1-I4 checked continuously through the REST API.
- :mod:`e2e.chaos`: ``python -m e2e.chaos --seed S --ops N``.
- :mod:`e2e.chaos_long`: many chaos seeds over every combination (``make chaos-long``).
- :mod:`e2e.drill`: the DR drill, ``python -m e2e.drill`` (``make drill``), with its
  workload (:mod:`e2e.writer`) and loss accounting (:mod:`e2e.ledger`).
- :mod:`e2e.demo`: ``python -m e2e.demo``, the README's run command.
"""
