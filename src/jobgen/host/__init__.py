"""Host integration: getting compiled units onto a host and reading back what they did."""
