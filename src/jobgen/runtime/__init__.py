"""What runs on the host beside the units: the cluster lock holder (`jobgen lock`) and
its backends. Kept lean: a unit pays its imports on every run."""
