//! `agentsight export --format jsonl`: one JSON object per event, by time.
//! Field names are documented in the README ("Export format").

use std::{collections::HashMap, io::Write};

use rusqlite::types::Value;
use serde_json::{Map, Value as Json, json};

use crate::{
    clock::rfc3339_ns,
    rawtext,
    store::{Capture, ColumnType, StoreError, exported_columns, read::ProcessIdentity},
};

/// The process's container and namespace fields, each only when recorded.
fn insert_identity(obj: &mut Map<String, Json>, id: &ProcessIdentity) {
    let texts = [
        ("container_id", &id.container_id),
        ("container_name", &id.container_name),
        ("container_image", &id.container_image),
    ];
    for (k, v) in texts {
        if let Some(v) = v {
            obj.insert(k.into(), json!(v));
        }
    }
    let ints = [
        ("pid_ns", id.pid_ns),
        ("mnt_ns", id.mnt_ns),
        ("ns_pid", id.ns_pid),
    ];
    for (k, v) in ints {
        if let Some(v) = v {
            obj.insert(k.into(), json!(v));
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("writing output: {0}")]
    Io(#[from] std::io::Error),
}

/// Writes every event as one JSON line, ordered by monotonic time.
pub fn jsonl(cap: &Capture, out: &mut dyn Write) -> Result<u64, ExportError> {
    // `wall_ns` first: it becomes `ts`; then `process_id`, to find the
    // process's container (not exported itself); the exported columns follow.
    let columns: Vec<_> = exported_columns().collect();
    let names: Vec<&str> = columns.iter().map(|c| c.name).collect();
    let sql = format!(
        "SELECT wall_ns, process_id, {} FROM events ORDER BY mono_ns, cpu, seq",
        names.join(", ")
    );
    // The container and namespaces of each event's process, only for the
    // processes that have any: a host-only capture exports as before.
    // And the agent `record --agent` recognised, for its processes.
    let mut agents: HashMap<i64, String> = HashMap::new();
    let mut identities: HashMap<i64, ProcessIdentity> = HashMap::new();
    for p in cap.processes()? {
        if let Some(a) = p.agent {
            agents.insert(p.id, a);
        }
        if !p.identity.is_empty() {
            identities.insert(p.id, p.identity);
        }
    }
    let mut st = cap.conn.prepare(&sql).map_err(|e| cap.query_err(e))?;
    let mut rows = st.query([]).map_err(|e| cap.query_err(e))?;
    let mut n = 0u64;
    while let Some(row) = rows.next().map_err(|e| cap.query_err(e))? {
        let mut obj = Map::new();
        let wall: i64 = row.get(0).map_err(|e| cap.query_err(e))?;
        obj.insert("ts".into(), json!(rfc3339_ns(wall.max(0) as u64)));
        for (i, column) in columns.iter().enumerate() {
            let name = column.name;
            let v: Value = row.get(i + 2).map_err(|e| cap.query_err(e))?;
            let j = match (name, v) {
                (_, Value::Null) => continue,
                ("argv", Value::Text(t)) => {
                    let argv: Vec<String> = serde_json::from_str(&t).unwrap_or_default();
                    if argv.iter().any(|a| rawtext::has_raw(a)) {
                        obj.insert(
                            "argv_hex".into(),
                            json!(argv.iter().map(|a| rawtext::hex(a)).collect::<Vec<_>>()),
                        );
                        json!(argv.iter().map(|a| rawtext::escaped(a)).collect::<Vec<_>>())
                    } else {
                        serde_json::from_str(&t).unwrap_or(Json::String(t))
                    }
                }
                // Bytes that were not UTF-8: shown `\xNN`, exact in `NAME_hex`.
                (_, Value::Text(t)) if rawtext::has_raw(&t) => {
                    obj.insert(format!("{name}_hex"), json!(rawtext::hex(&t)));
                    json!(rawtext::escaped(&t))
                }
                (_, Value::Integer(b)) if column.ty == ColumnType::Bool => json!(b != 0),
                (_, Value::Integer(x)) => json!(x),
                (_, Value::Real(x)) => json!(x),
                (_, Value::Text(t)) => json!(t),
                (_, Value::Blob(b)) => json!(String::from_utf8_lossy(&b)),
            };
            obj.insert(name.to_owned(), j);
        }
        if let Ok(Some(process)) = row.get::<_, Option<i64>>(1) {
            if let Some(id) = identities.get(&process) {
                insert_identity(&mut obj, id);
            }
            if let Some(a) = agents.get(&process) {
                obj.insert("agent".into(), json!(a));
            }
        }
        serde_json::to_writer(&mut *out, &Json::Object(obj)).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
        n += 1;
    }
    out.flush()?;
    Ok(n)
}
