/**
 * Filling the server's SQLite file with many rows for the read-latency scenario, straight into the
 * database (the HTTP path would take hours for a million calls).
 *
 * To follow whatever schema the server has, nothing here names a column list: each table is
 * filled by cloning template rows the server itself wrote (through its HTTP API, so with its own
 * mapping, digests and JSON encoding), changing only the key columns that must differ per row.
 * `SELECT *` gives the current columns; a renamed key column fails loudly by name.
 */
import { createRequire } from 'node:module';

const BATCH = 50_000;

const hex = (n, width) => n.toString(16).padStart(width, '0');
/** A canonical lowercase UUID (version 7 layout) made from a counter. */
const counterUuid = (n) => `0190a000-0000-7000-8000-${hex(n, 12)}`;

/**
 * A connection to the server's file, with the driver the server itself uses on this Node
 * (src/server/store/sqlite.ts): better-sqlite3 before Node 24, node:sqlite from 24 (better-sqlite3
 * 12 aborts Node 24 processes). Only what both share is used here: prepare, exec, close.
 */
export function openSeedDb(dbPath) {
  const nodeMajor = Number(process.versions.node.split('.')[0]);
  let db;
  if (nodeMajor >= 24) {
    const { DatabaseSync } = process.getBuiltinModule('node:sqlite');
    db = new DatabaseSync(dbPath);
  } else {
    const Database = createRequire(import.meta.url)('better-sqlite3');
    db = new Database(dbPath);
  }
  db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF; PRAGMA busy_timeout = 10000');
  return db;
}

function requireColumns(db, table, names) {
  const columns = new Set(db.prepare(`PRAGMA table_info(${table})`).all().map((c) => c.name));
  for (const name of names) {
    if (!columns.has(name)) throw new Error(`seed: table ${table} has no column ${name}; update bench/lib/seed.mjs`);
  }
  return [...columns];
}

/**
 * Insert `count` rows made by `makeRow(i)` into `table`, `BATCH` per transaction. `encode` names an
 * SQL function a column's value goes through (`{ payload: 'jsonb' }`), to store it as the server does.
 */
function insertMany(db, table, columns, count, makeRow, encode = {}) {
  const values = columns.map((c) => (encode[c] ? `${encode[c]}(@${c})` : `@${c}`));
  const insert = db.prepare(`INSERT INTO ${table} (${columns.join(', ')}) VALUES (${values.join(', ')})`);
  for (let from = 0; from < count; from += BATCH) {
    db.exec('BEGIN');
    for (let i = from; i < Math.min(count, from + BATCH); i++) insert.run(makeRow(i));
    db.exec('COMMIT');
  }
}

/**
 * Bring project `projectId` to `total` calls by cloning the calls of `templateProject` (written by
 * the exporter through the server). Returns the ids of the new calls (a sample to read).
 */
export function seedCalls(db, { templateProject, projectId, total, sampleEvery = 997 }) {
  const columns = requireColumns(db, 'calls', ['project_id', 'id', 'trace_id', 'parent_id']);
  const templates = db.prepare('SELECT * FROM calls WHERE project_id = ? LIMIT 10000').all(templateProject);
  if (templates.length === 0) throw new Error(`seed: no template calls in ${templateProject}`);
  const sample = [];
  insertMany(db, 'calls', columns, total, (i) => {
    const template = templates[i % templates.length];
    const traceNo = Math.floor(i / 10);
    const rootId = hex(traceNo * 10 + 1, 16);
    const id = hex(i + 1, 16);
    if (i % sampleEvery === 0) sample.push(id);
    return {
      ...template,
      project_id: projectId,
      id,
      trace_id: hex(traceNo + 1, 32),
      parent_id: id === rootId ? null : rootId,
    };
  });
  return sample;
}

/** `count` objects cloned from the template object (same value, so the same digest). */
export function seedObjects(db, { projectId, templateObjectId, count }) {
  const columns = requireColumns(db, 'objects', ['project_id', 'object_id', 'digest']);
  const template = db.prepare('SELECT * FROM objects WHERE project_id = ? AND object_id = ?').get(projectId, templateObjectId);
  if (template === undefined) throw new Error(`seed: template object ${templateObjectId} not found`);
  insertMany(db, 'objects', columns, count, (i) => ({ ...template, object_id: `bench-obj-${i}` }));
  return { digest: template.digest, objectId: (i) => `bench-obj-${i}` };
}

/**
 * `count` feedback records cloned from the template, with payloads `{note, score, model, ...}`;
 * `payload.note` takes `distinctNotes` values, so a filter on one note matches count/distinctNotes.
 */
export function seedFeedback(db, { projectId, templateId, count, distinctNotes = 1000 }) {
  const columns = requireColumns(db, 'feedback', ['project_id', 'id', 'payload']);
  const template = db.prepare('SELECT * FROM feedback WHERE project_id = ? AND id = ?').get(projectId, templateId);
  if (template === undefined) throw new Error(`seed: template feedback ${templateId} not found`);
  // The server stores payloads as JSONB (a blob): clones written as JSON text would make every
  // filtered query parse 100 k texts, which no server-written database does.
  const encode = template.payload instanceof Uint8Array ? { payload: 'jsonb' } : {};
  insertMany(db, 'feedback', columns, count, (i) => ({
    ...template,
    id: counterUuid(i + 1),
    payload: JSON.stringify({
      note: `note-${i % distinctNotes}`,
      score: i % 10,
      output: { model: i % 2 === 0 ? 'gpt-4o-mini' : 'claude-3-5-haiku', passed: i % 3 === 0 },
      comment: 'Looks right; the answer cites the tidal formula and stays under the length limit.',
    }),
  }), encode);
}
