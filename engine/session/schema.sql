-- KernelBrain session store. One engine process writes it; bump SCHEMA_VERSION on any change.
-- engine.session.settings.SessionSettings, one row a field, and schema_version.
CREATE TABLE meta (key VARCHAR PRIMARY KEY, value JSON);
-- One row per candidate; `record` is engine.records.Candidate as JSON, the other
-- columns are copies for queries.
CREATE TABLE candidates (
    id VARCHAR PRIMARY KEY, seq INTEGER, sha256 VARCHAR, status VARCHAR, rung INTEGER,
    score DOUBLE, record JSON
);
-- Every evaluation with its raw samples (engine.jobs.EvalResult as JSON).
CREATE TABLE evaluations (
    candidate VARCHAR, rung INTEGER, step INTEGER, passed BOOLEAN, result JSON
);
-- Scheduler state, ledger, random state, queue: named JSON blobs.
CREATE TABLE state (key VARCHAR PRIMARY KEY, value JSON);
CREATE TABLE commands (
    id VARCHAR PRIMARY KEY, command VARCHAR, candidate VARCHAR, amount VARCHAR,
    issued_at DOUBLE, applied_at DOUBLE, step INTEGER, status VARCHAR, message VARCHAR
);
CREATE TABLE events (
    seq INTEGER PRIMARY KEY, ts DOUBLE, step INTEGER, kind VARCHAR, message VARCHAR,
    candidate VARCHAR, command VARCHAR
);
-- Raw LLM replies, stored (and committed) before they are parsed.
CREATE TABLE replies (prompt_sha256 VARCHAR PRIMARY KEY, reply JSON);
