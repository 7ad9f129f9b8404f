"""Tools around manifests that never touch a host."""
