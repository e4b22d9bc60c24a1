"""One router per resource: ops, health, pages (FastAPI "Bigger Applications")."""
