//! The local SQLite database: WAL mode, versioned migrations, and calls run off the async
//! runtime.
use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use crate::daemon::platform::{PlatformError, PlatformResult};

/// Migrations in order; migration `i` brings the schema to version `i + 1`. Never edit one
/// that has shipped: add a new one.
const MIGRATIONS: &[&str] = &[
    // 1: API keys and tenants.
    "CREATE TABLE api_keys (
        id            TEXT PRIMARY KEY,
        name          TEXT NOT NULL,
        role          TEXT NOT NULL,
        tenant        TEXT,
        namespaces    TEXT NOT NULL DEFAULT '[]',
        nodes         TEXT NOT NULL DEFAULT '[]',
        secret_sha256 BLOB NOT NULL,
        created       INTEGER NOT NULL,
        expires       INTEGER NOT NULL,
        last_used     INTEGER
    );
    CREATE INDEX api_keys_by_name ON api_keys(name);
    CREATE TABLE tenants (
        name       TEXT PRIMARY KEY,
        spec       TEXT NOT NULL,
        generation INTEGER NOT NULL DEFAULT 1,
        created    INTEGER NOT NULL
    );",
    // 2: sandboxes of the sbxd runtime.
    "CREATE TABLE sandboxes (
        id            TEXT PRIMARY KEY,
        namespace     TEXT NOT NULL,
        name          TEXT NOT NULL,
        image         TEXT NOT NULL,
        backend       TEXT NOT NULL,
        status        TEXT NOT NULL,
        ready         INTEGER NOT NULL DEFAULT 0,
        restarts      INTEGER NOT NULL DEFAULT 0,
        error_message TEXT NOT NULL DEFAULT '',
        created       INTEGER NOT NULL,
        slot          INTEGER NOT NULL UNIQUE,
        pid           INTEGER,
        spec          TEXT NOT NULL,
        UNIQUE (namespace, name)
    );",
    // 3: snapshots (filesystem layers of sandboxes on sbxd).
    "CREATE TABLE snapshots (
        id             TEXT PRIMARY KEY,
        namespace      TEXT NOT NULL,
        name           TEXT NOT NULL,
        kind           TEXT NOT NULL,
        source_sandbox TEXT NOT NULL,
        created        INTEGER NOT NULL,
        size_bytes     INTEGER NOT NULL,
        source         TEXT NOT NULL,
        UNIQUE (namespace, name)
    );",
    // 4: the role-binding document (one row).
    "CREATE TABLE role_bindings (
        id       INTEGER PRIMARY KEY CHECK (id = 1),
        document TEXT NOT NULL
    );",
    // 5: nodes dedicated to a tenant (the label and taint of the Kubernetes platform).
    "CREATE TABLE node_dedications (
        node   TEXT PRIMARY KEY,
        tenant TEXT NOT NULL
    );",
    // 6: a tenant's observed state (the status the leader rewrites every 60 s), as JSON.
    "ALTER TABLE tenants ADD COLUMN status TEXT;",
    // 7: labels of tenants and keys (JSON objects), e.g. `sbx apply`'s `sbx.io/apply-set`.
    "ALTER TABLE tenants ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
     ALTER TABLE api_keys ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// A shared connection to the database.
#[derive(Clone)]
pub struct Db {
    conn: Arc<Mutex<Connection>>,
}

fn store_error(e: impl std::fmt::Display) -> PlatformError {
    PlatformError::Store(e.to_string())
}

impl Db {
    /// Opens the database, switches it to WAL and applies pending migrations.
    pub fn open(path: &Path) -> PlatformResult<Db> {
        let mut conn = Connection::open(path)
            .map_err(|e| PlatformError::Store(format!("cannot open {}: {e}", path.display())))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .and_then(|()| conn.pragma_update(None, "synchronous", "NORMAL"))
            .and_then(|()| conn.pragma_update(None, "foreign_keys", "ON"))
            .and_then(|()| conn.busy_timeout(std::time::Duration::from_secs(5)))
            .map_err(store_error)?;
        migrate(&mut conn)?;
        Ok(Db {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Runs `f` with the connection on the blocking pool.
    pub async fn call<T, F>(&self, f: F) -> PlatformResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = conn
                .lock()
                .map_err(|_| PlatformError::Store("database lock poisoned".into()))?;
            f(&mut guard).map_err(store_error)
        })
        .await
        .map_err(store_error)?
    }
}

fn migrate(conn: &mut Connection) -> PlatformResult<()> {
    let current: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(store_error)?;
    if current > SCHEMA_VERSION {
        return Err(PlatformError::Store(format!(
            "database schema version {current} is newer than this sbx understands \
             ({SCHEMA_VERSION}); upgrade sbx"
        )));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let version = index as i64 + 1;
        let tx = conn.transaction().map_err(store_error)?;
        tx.execute_batch(sql)
            .and_then(|()| tx.pragma_update(None, "user_version", version))
            .and_then(|()| tx.commit())
            .map_err(|e| PlatformError::Store(format!("migration {version} failed: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_apply_once_and_refuse_newer_schemas() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        drop(Db::open(&path).unwrap());
        drop(Db::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        drop(conn);
        let err = Db::open(&path).err().unwrap();
        assert!(err.to_string().contains("newer"), "{err}");
    }
}
