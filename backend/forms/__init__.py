"""The rules behind the pages' forms: what a page's choices mean, decided and tested without
Streamlit so the pages stay thin views (backend/forms/optimize.py: the Optimize page's sweep)."""
