"""Access control: accounts, roles, signed read-only links and the audit log (no streamlit here)."""
