"""Persistence: schema, sessions, migrations and the content-addressed artifact store."""
