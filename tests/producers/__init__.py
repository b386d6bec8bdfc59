"""Real AG-UI producers run offline: a Pydantic AI agent and an ``ag-ui-langgraph`` graph.

Both are the libraries' own AG-UI servers with scripted models in place of an LLM, so their
streams are what those libraries really emit (ids, timestamps, RAW and snapshot events, their
interrupt shapes), while every answer is predictable. They need the ``agents`` extra.
"""
