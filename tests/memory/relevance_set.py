"""A small labelled set for search relevance: memories a coding assistant might keep, and questions
with the memories that answer them. `recall` measures recall@k of the store on it (the bench
reports it too: `python -m bench.workloads.memory`)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from specactor.domain.memory.layers import Identifiers, scope_key
from specactor.domain.memory.records import NewMemory, SearchSpec
from specactor.domain.memory.scoring import recall_at_k
from specactor.sqlite.memory_db import connect, insert_memory, search

MEMORIES: dict[str, str] = {
    "db": "The billing service stores invoices in PostgreSQL 15 with logical replication to the warehouse.",
    "db-migrations": "Database migrations run with Alembic; never edit a migration that has been merged.",
    "orm": "We use SQLAlchemy 2.0 in async mode for every service that talks to Postgres.",
    "tests": "Run the test suite with `just test`; integration tests need Docker running.",
    "test-style": "Tests are named as sentences and never sleep; use trio's autojump clock instead.",
    "ci": "CI runs on every pull request: lint, type check, unit tests, then the integration stage.",
    "deploy": "Deployments go through Argo CD; merging to main deploys to staging automatically.",
    "prod-deploy": "Production deploys need a manual approval from the on-call engineer in Slack.",
    "oncall": "The on-call rotation changes every Monday at 10:00 UTC; PagerDuty pages the primary.",
    "logging": "Log as structured JSON with structlog; never log access tokens or passwords.",
    "secrets": "Secrets live in Vault; local development reads them from a .env file that is git-ignored.",
    "auth": "Authentication uses OAuth2 with short-lived JWT access tokens and rotating refresh tokens.",
    "rate-limit": "The public API is rate limited to 100 requests per minute per key; clients get HTTP 429.",
    "frontend": "The dashboard frontend is React with TypeScript, built by Vite.",
    "styling": "Frontend styling uses Tailwind; do not add new CSS files.",
    "python": "The backend targets Python 3.11 and is formatted with ruff format at line length 120.",
    "types": "mypy runs in strict mode; a new module must type-check before it is merged.",
    "cache": "Redis caches session data for 30 minutes; cache keys are prefixed with the service name.",
    "queue": "Background jobs go through RabbitMQ; the email worker retries failed sends five times.",
    "email": "Transactional email is sent with Postmark; templates live in the emails/ folder.",
    "metrics": "Prometheus scrapes /metrics every 15 seconds; dashboards are in Grafana.",
    "alerts": "An alert fires when the p95 latency of checkout stays above 500 ms for five minutes.",
    "branching": "Branch names follow feature/<ticket>-<summary>; squash merge into main.",
    "reviews": "Every pull request needs one approving review; changes to payments need two.",
    "docs": "Architecture decisions are recorded as ADRs in docs/adr with a sequential number.",
    "k8s": "Services run on Kubernetes in the eu-west-1 cluster; each has resource limits set.",
    "backups": "Postgres is backed up nightly with point-in-time recovery kept for 14 days.",
    "search": "Product search uses OpenSearch; the index is rebuilt from Postgres every night.",
    "flags": "Feature flags are managed in Unleash; remove a flag within two sprints of full rollout.",
    "timezone": "Store every timestamp in UTC and convert to the user's timezone only in the frontend.",
}

# query -> the memories that answer it
QUERIES: dict[str, set[str]] = {
    "which database do we use for invoices": {"db"},
    "how do I run database migrations": {"db-migrations"},
    "how do I run the tests": {"tests", "test-style"},
    "how does deployment to production work": {"prod-deploy", "deploy"},
    "who is on call and when does the rotation change": {"oncall"},
    "where are secrets stored": {"secrets"},
    "what should never be logged": {"logging"},
    "how are users authenticated": {"auth"},
    "what happens when a client exceeds the rate limit": {"rate-limit"},
    "which framework is the frontend written in": {"frontend", "styling"},
    "python version and formatting": {"python"},
    "type checking rules": {"types"},
    "how long is session data cached": {"cache"},
    "how are failed emails retried": {"queue", "email"},
    "where are the metrics dashboards": {"metrics"},
    "when does the latency alert fire": {"alerts"},
    "how many reviews does a pull request need": {"reviews"},
    "how are postgres backups kept": {"backups"},
    "when should a feature flag be removed": {"flags"},
    "how should timestamps be stored": {"timezone"},
}

IDS = Identifiers(user_id="relevance")


def recall(k: int = 5, threshold: float = 0.0) -> float:
    """Mean recall@k over QUERIES with the default (lexical) scoring, on a fresh temporary store."""
    key = scope_key("user", IDS)
    with tempfile.TemporaryDirectory() as tmp:
        conn = connect(Path(tmp) / "relevance.db", writer=True)
        try:
            conn.execute("BEGIN")
            by_id = {insert_memory(conn, NewMemory(text, "user", key, {}, [], {})).memory_id: label
                     for label, text in MEMORIES.items()}
            conn.execute("COMMIT")
            total = 0.0
            for query, relevant in QUERIES.items():
                out = search(conn, SearchSpec(query, [("user", key)], k, threshold, []))
                total += recall_at_k([by_id[r.memory_id] for r in out.results], relevant, k)
        finally:
            conn.close()
    return total / len(QUERIES)
