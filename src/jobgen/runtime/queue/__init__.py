"""`overlap: queue`: every requested run kept as durable work and drained one at a time, in
order. spool.py is the host-scope store; drain.py runs requests under the job's lock."""
