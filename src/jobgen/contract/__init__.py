"""Contracts that compile time and run time both ask, each kept in one table here so
`jobgen check` and the programs on the host can never disagree. No I/O, no imports from
the rest of jobgen."""
