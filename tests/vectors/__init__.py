"""Recorded AG-UI traffic of real producers (see README.md), and the script that records it."""
