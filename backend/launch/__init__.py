"""The one launcher of child processes (children), their resource limits and the bwrap sandbox.

Below models, engine, compat and queue: each of them starts its children through here.
"""
