"""Repositories, one module per aggregate; the only code that reads or writes rows."""
