"""knowledge search: a full-text index over the chunks' text, in each layout

SQLite: ``knowledge_chunks_fts``, an FTS5 table with external content (``content='knowledge_chunks'``, keyed on the
chunks' rowid), indexing ``text`` and ``vector_store_id`` (so a query is narrowed to its stores inside the index),
with the ``unicode61`` tokenizer (case- and diacritic-folding, no stemming, any language). Three triggers keep it in
step with ``knowledge_chunks`` (insert, delete, update of its text), so the code that writes chunks need not know
it exists; the upgrade indexes the chunks already there (``rebuild``). PostgreSQL: ``knowledge_chunks.text_search``,
a stored generated ``tsvector`` (``to_tsvector('simple', text)``: lower-cased, no stemming, no stop words)
under a GIN index without a pending list (``fastupdate = off``: a freshly ingested store is searched through the
index at once, not through a list every query scans), and ``knowledge_chunks_matching``, the function a tenant's
full-text queries go through (see ``MATCHING``).

None of these is in the models (they differ by layout): ``migrations/env.py`` leaves them out of autogenerate
(``switchyard.platform.db.unmodelled.include_object``). A later migration that rebuilds
``knowledge_chunks`` on SQLite (``batch_alter_table`` recreates a table) drops its triggers: it must create them
again and ``rebuild`` the index, as this one does.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06 09:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FTS = "knowledge_chunks_fts"
SQLITE_UP = (
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(text, vector_store_id, content='knowledge_chunks', "
    'tokenize="unicode61 remove_diacritics 2")',
    f"""CREATE TRIGGER {FTS}_insert AFTER INSERT ON knowledge_chunks BEGIN
        INSERT INTO {FTS}(rowid, text, vector_store_id) VALUES (new.rowid, new.text, new.vector_store_id);
    END""",
    f"""CREATE TRIGGER {FTS}_delete AFTER DELETE ON knowledge_chunks BEGIN
        INSERT INTO {FTS}({FTS}, rowid, text, vector_store_id)
        VALUES ('delete', old.rowid, old.text, old.vector_store_id);
    END""",
    f"""CREATE TRIGGER {FTS}_update AFTER UPDATE OF text, vector_store_id ON knowledge_chunks BEGIN
        INSERT INTO {FTS}({FTS}, rowid, text, vector_store_id)
        VALUES ('delete', old.rowid, old.text, old.vector_store_id);
        INSERT INTO {FTS}(rowid, text, vector_store_id) VALUES (new.rowid, new.text, new.vector_store_id);
    END""",
    f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')",
)
SQLITE_DOWN = (
    f"DROP TRIGGER IF EXISTS {FTS}_update",
    f"DROP TRIGGER IF EXISTS {FTS}_delete",
    f"DROP TRIGGER IF EXISTS {FTS}_insert",
    f"DROP TABLE IF EXISTS {FTS}",
)
POSTGRES_UP = (
    "ALTER TABLE knowledge_chunks ADD COLUMN text_search tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, text)) STORED",
    "CREATE INDEX ix_knowledge_chunks_text_search ON knowledge_chunks USING gin (text_search) WITH (fastupdate = off)",
)
# Row-level security would keep ``@@`` (not leakproof) from using the GIN index: a tenant's query would read every
# row's vector. The function runs as the tables' owner, outside the policies, and filters by the transaction's own
# tenant setting (never by an argument), so a tenant still sees its own chunks only. It leaves out the words found
# in ``common_rows`` chunks of the stores or more when rarer ones remain (ts_rank_cd has no IDF: they would cost the
# most and tell the least), then ranks the chunks of completed files holding any of the others.
MATCHING = """
CREATE FUNCTION knowledge_chunks_matching(
    stores varchar[], terms text[], files varchar[], max_rows integer, common_rows integer
) RETURNS TABLE (chunk_id varchar, store_id varchar, chunk_file_id varchar)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    tenant text := current_setting('switchyard.tenant_id', true);
    rare text[] := '{}';
    term text;
    hits integer;
    q tsquery;
BEGIN
    IF tenant IS NULL OR tenant = '' OR cardinality(terms) = 0 THEN
        RETURN;
    END IF;
    IF cardinality(terms) > 1 THEN
        FOREACH term IN ARRAY terms LOOP
            SELECT count(*) INTO hits FROM (
                SELECT 1 FROM knowledge_chunks AS c
                WHERE c.text_search @@ plainto_tsquery('simple'::regconfig, term)
                  AND c.tenant_id = tenant AND c.vector_store_id = ANY(stores)
                LIMIT common_rows) AS s;
            IF hits < common_rows THEN
                rare := rare || term;
            END IF;
        END LOOP;
    END IF;
    IF cardinality(rare) = 0 THEN
        rare := terms;
    END IF;
    q := to_tsquery('simple'::regconfig, array_to_string(ARRAY(SELECT quote_literal(t) FROM unnest(rare) AS t), ' | '));
    RETURN QUERY
        SELECT c.id, c.vector_store_id, c.file_id
        FROM knowledge_chunks AS c
        JOIN vector_store_files AS v ON v.vector_store_id = c.vector_store_id AND v.file_id = c.file_id
        WHERE c.text_search @@ q AND c.tenant_id = tenant AND v.tenant_id = tenant
          AND c.vector_store_id = ANY(stores) AND v.status = 'completed'
          AND (files IS NULL OR c.file_id = ANY(files))
        ORDER BY ts_rank_cd(c.text_search, q) DESC, c.id
        LIMIT max_rows;
END $$
"""
POSTGRES_UP = (*POSTGRES_UP, MATCHING)
POSTGRES_DOWN = (
    "DROP FUNCTION IF EXISTS knowledge_chunks_matching(varchar[], text[], varchar[], integer, integer)",
    "DROP INDEX IF EXISTS ix_knowledge_chunks_text_search",
    "ALTER TABLE knowledge_chunks DROP COLUMN IF EXISTS text_search",
)


def upgrade() -> None:
    for statement in POSTGRES_UP if op.get_bind().dialect.name == "postgresql" else SQLITE_UP:
        op.execute(statement)


def downgrade() -> None:
    for statement in POSTGRES_DOWN if op.get_bind().dialect.name == "postgresql" else SQLITE_DOWN:
        op.execute(statement)
