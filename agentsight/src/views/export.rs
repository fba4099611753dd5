//! `agentsight export --format jsonl`: one JSON object per event, by time.
//! Field names are documented in docs/export.md.

use std::{collections::HashMap, io::Write};

use serde_json::{Map, Value as Json, json};

use crate::{
    clock::rfc3339_ns,
    rawtext,
    store::{
        Capture, ColumnType, StoreError,
        enforcement::DenialRow,
        exported_columns,
        read::{ProcessIdentity, SessionMessage, ms_to_ns},
        run::Cell,
    },
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

/// One `external_message` record (a `session message` submission made
/// while recording): its time as `ts`, its monotonic time from the
/// capture's anchors (to order it among the events), the stored fields;
/// like an event's, a field the log did not say is absent.
fn session_message_record(m: &SessionMessage, mono_ns: u64) -> Json {
    let mut obj = Map::new();
    obj.insert("ts".into(), json!(rfc3339_ns(ms_to_ns(m.time_ms))));
    obj.insert("mono_ns".into(), json!(mono_ns));
    obj.insert("kind".into(), json!("external_message"));
    if let Json::Object(fields) = serde_json::to_value(m).unwrap_or_default() {
        for (k, v) in fields {
            if !v.is_null() && k != "time_ms" && k != "finished_ms" {
                obj.insert(k, v);
            }
        }
    }
    if let Some(f) = m.finished_ms {
        obj.insert("finished_ts".into(), json!(rfc3339_ns(ms_to_ns(f))));
    }
    Json::Object(obj)
}

fn write_line(out: &mut dyn Write, v: &Json) -> Result<(), ExportError> {
    serde_json::to_writer(&mut *out, v).map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// A field of one line, borrowed from the row where it can be.
enum Field<'r> {
    Str(&'r str),
    Owned(String),
    Int(i64),
    Bool(bool),
    Real(f64),
    Json(Json),
}

/// Every key a line can have, in the order a `serde_json::Map` writes
/// them (lines were written through one before): each key's rank and its
/// `"key":` bytes, computed once.
struct Keys {
    /// `"key":` by rank.
    quoted: Vec<Vec<u8>>,
    rank: HashMap<String, u16>,
}

impl Keys {
    fn new(names: impl Iterator<Item = String>) -> Self {
        let mut all: Vec<String> = names.collect();
        all.sort();
        all.dedup();
        let quoted = all
            .iter()
            .map(|k| {
                let mut q = serde_json::to_vec(k).unwrap_or_default();
                q.push(b':');
                q
            })
            .collect();
        let rank = all
            .into_iter()
            .enumerate()
            .map(|(i, k)| (k, i as u16))
            .collect();
        Self { quoted, rank }
    }

    fn of(&self, key: &str) -> u16 {
        self.rank.get(key).copied().unwrap_or(u16::MAX)
    }
}

/// Writes one line: its fields in key order, the last of equal keys.
fn write_fields(
    out: &mut dyn Write,
    keys: &Keys,
    fields: &mut [(u16, Field)],
) -> Result<(), ExportError> {
    // Nearly sorted already (columns are visited in key order).
    fields.sort_by_key(|f| f.0);
    out.write_all(b"{")?;
    let mut first = true;
    for (i, (rank, value)) in fields.iter().enumerate() {
        if fields.get(i + 1).is_some_and(|next| next.0 == *rank) {
            continue;
        }
        if !first {
            out.write_all(b",")?;
        }
        first = false;
        match keys.quoted.get(usize::from(*rank)) {
            Some(q) => out.write_all(q)?,
            None => out.write_all(b"\"?\":")?,
        }
        let w = &mut *out;
        match value {
            Field::Str(t) => serde_json::to_writer(w, t),
            Field::Owned(t) => serde_json::to_writer(w, t),
            Field::Int(x) => serde_json::to_writer(w, x),
            Field::Bool(b) => serde_json::to_writer(w, b),
            Field::Real(x) => serde_json::to_writer(w, x),
            Field::Json(j) => serde_json::to_writer(w, j),
        }
        .map_err(std::io::Error::from)?;
    }
    out.write_all(b"}\n")?;
    Ok(())
}

/// The identity fields a line can carry (see [`identity_fields`]): the
/// `processes` columns' names.
const IDENTITY_KEYS: [&str; 6] = ProcessIdentity::COLUMNS;

/// The process's container and namespace fields, each only when recorded.
fn identity_fields<'r>(fields: &mut Vec<(u16, Field<'r>)>, keys: &Keys, id: &'r ProcessIdentity) {
    let texts = [&id.container_id, &id.container_name, &id.container_image];
    for (k, v) in IDENTITY_KEYS.iter().zip(texts) {
        if let Some(v) = v {
            fields.push((keys.of(k), Field::Str(v)));
        }
    }
    let ints = [id.pid_ns, id.mnt_ns, id.ns_pid];
    for (k, v) in IDENTITY_KEYS[3..].iter().zip(ints) {
        if let Some(v) = v {
            fields.push((keys.of(k), Field::Int(v)));
        }
    }
}

/// What both jsonl writers join to the rows: the records that are not
/// events (`external_message`, `enforcement_denial`) in monotonic order, and
/// per process row the agent `record --agent` recognised and the container
/// and namespaces, only for the processes that have any (a host-only capture
/// exports as before).
struct ExportContext {
    records: Vec<(u64, Json)>,
    agents: HashMap<i64, String>,
    identities: HashMap<i64, ProcessIdentity>,
}

impl ExportContext {
    fn of(cap: &Capture) -> Result<Self, ExportError> {
        let anchors = cap.anchors()?;
        let mut records: Vec<(u64, Json)> = cap
            .session_messages()?
            .into_iter()
            .map(|m| {
                let at = anchors.mono_of_ms(m.time_ms);
                (at, session_message_record(&m, at))
            })
            .collect();
        for d in cap.reader().enforcement_denials()? {
            let wall = (!anchors.0.is_empty()).then(|| anchors.wall_ns(d.mono_ns).max(0) as u64);
            records.push((d.mono_ns, denial_record(&d, wall)));
        }
        // Stable: two records at one time keep the order above.
        records.sort_by_key(|(mono, _)| *mono);
        let mut agents = HashMap::new();
        let mut identities = HashMap::new();
        for p in cap.processes()? {
            if let Some(a) = p.agent {
                agents.insert(p.id, a);
            }
            if !p.identity.is_empty() {
                identities.insert(p.id, p.identity);
            }
        }
        Ok(Self {
            records,
            agents,
            identities,
        })
    }
}

/// One `enforcement_denial` record (an access `record --enforce` refused):
/// the `enforcement_denials` row's fields, its time as `ts` from the
/// capture's anchors.
fn denial_record(d: &DenialRow, wall_ns: Option<u64>) -> Json {
    let mut obj = Map::new();
    if let Some(w) = wall_ns {
        obj.insert("ts".into(), json!(rfc3339_ns(w)));
    }
    obj.insert("mono_ns".into(), json!(d.mono_ns));
    obj.insert("kind".into(), json!("enforcement_denial"));
    obj.insert("denial_id".into(), json!(d.id));
    obj.insert("access".into(), json!(d.kind.as_str()));
    if d.kind.is_network() {
        obj.insert("addr".into(), json!(d.addr));
        obj.insert("port".into(), json!(d.port));
    } else {
        obj.insert("path".into(), json!(d.path));
        if d.kind.by_identity() {
            obj.insert("dev".into(), json!(d.dev));
            obj.insert("ino".into(), json!(d.ino));
        }
    }
    if d.repeat > 1 {
        obj.insert("repeat".into(), json!(d.repeat));
    }
    obj.insert("pid".into(), json!(d.pid));
    if let Some(p) = d.process_id {
        obj.insert("process_id".into(), json!(p));
    }
    obj.insert("rule".into(), json!(d.rule));
    obj.insert("mechanism".into(), json!(d.mechanism));
    Json::Object(obj)
}

/// Writes every event as one JSON line, ordered by monotonic time, with
/// the `external_message` records among them at their time. Rows come from
/// [`Capture::export_rows`] (text resolved in memory) and are written field
/// by field through a buffer, without building a JSON value per line.
pub fn jsonl(cap: &Capture, out: &mut dyn Write) -> Result<u64, ExportError> {
    let columns: Vec<_> = exported_columns().collect();
    let keys = Keys::new(
        columns
            .iter()
            .flat_map(|c| [c.name.to_owned(), format!("{}_hex", c.name)])
            .chain(["ts", "argv_hex", "agent"].map(String::from))
            .chain(IDENTITY_KEYS.map(String::from)),
    );
    // Columns visited in key order, each with its rank and its `_hex`'s.
    let mut visit: Vec<(usize, u16, u16)> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| (i, keys.of(c.name), keys.of(&format!("{}_hex", c.name))))
        .collect();
    visit.sort_by_key(|v| v.1);
    let (ts_key, argv_hex_key, agent_key) = (keys.of("ts"), keys.of("argv_hex"), keys.of("agent"));
    let ExportContext {
        records,
        agents,
        identities,
    } = ExportContext::of(cap)?;
    let mut records = records.into_iter().peekable();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    let mut n = 0u64;
    cap.export_rows(|row| -> Result<(), ExportError> {
        let wall = row.wall_ns()?;
        let mono = row.mono_ns()?;
        while let Some((_, r)) = records.next_if(|(at, _)| (*at as i64) < mono) {
            write_line(&mut out, &r)?;
            n += 1;
        }
        let mut fields: Vec<(u16, Field)> = Vec::with_capacity(24);
        fields.push((ts_key, Field::Owned(rfc3339_ns(wall.max(0) as u64))));
        for &(i, key, hex_key) in &visit {
            let column = columns[i];
            let f = match (column.name, row.value(i)?) {
                (_, Cell::Null) => continue,
                ("argv", Cell::Text(t)) => {
                    let argv: Vec<String> = serde_json::from_str(t).unwrap_or_default();
                    if argv.iter().any(|a| rawtext::has_raw(a)) {
                        fields.push((
                            argv_hex_key,
                            Field::Json(json!(
                                argv.iter().map(|a| rawtext::hex(a)).collect::<Vec<_>>()
                            )),
                        ));
                        Field::Json(json!(
                            argv.iter().map(|a| rawtext::escaped(a)).collect::<Vec<_>>()
                        ))
                    } else {
                        Field::Json(serde_json::from_str(t).unwrap_or_else(|_| json!(t)))
                    }
                }
                // Bytes that were not UTF-8: shown `\xNN`, exact in `NAME_hex`.
                (_, Cell::Text(t)) if rawtext::has_raw(t) => {
                    fields.push((hex_key, Field::Owned(rawtext::hex(t))));
                    Field::Owned(rawtext::escaped(t))
                }
                (_, Cell::Integer(b)) if column.ty == ColumnType::Bool => Field::Bool(b != 0),
                (_, Cell::Integer(x)) => Field::Int(x),
                (_, Cell::Real(x)) => Field::Real(x),
                (_, Cell::Text(t)) => Field::Str(t),
                (_, Cell::Blob(b)) => Field::Owned(String::from_utf8_lossy(b).into_owned()),
            };
            fields.push((key, f));
        }
        if let Ok(Some(process)) = row.process_id() {
            if let Some(id) = identities.get(&process) {
                identity_fields(&mut fields, &keys, id);
            }
            if let Some(a) = agents.get(&process) {
                fields.push((agent_key, Field::Str(a)));
            }
        }
        write_fields(&mut out, &keys, &mut fields)?;
        n += 1;
        Ok(())
    })?;
    for (_, r) in records {
        write_line(&mut out, &r)?;
        n += 1;
    }
    out.flush()?;
    Ok(n)
}

/// [`jsonl`] as it was written before: every text looked up per row by the
/// `events` view, each line built as a `serde_json::Value`. The baseline of
/// `cargo xtask bench export` (`export --by-view`); the same bytes.
pub fn jsonl_by_view(cap: &Capture, out: &mut dyn Write) -> Result<u64, ExportError> {
    // Each row's `wall_ns` becomes `ts`; its `process_id` finds the
    // process's container (not exported itself), its `mono_ns` places the
    // external messages; the exported columns follow.
    let columns: Vec<_> = exported_columns().collect();
    let ExportContext {
        records,
        agents,
        identities,
    } = ExportContext::of(cap)?;
    let mut records = records.into_iter().peekable();
    let mut n = 0u64;
    cap.export_rows_by_view(|row| -> Result<(), ExportError> {
        let mut obj = Map::new();
        let wall = row.wall_ns()?;
        let mono = row.mono_ns()?;
        while let Some((_, r)) = records.next_if(|(at, _)| (*at as i64) < mono) {
            write_line(out, &r)?;
            n += 1;
        }
        obj.insert("ts".into(), json!(rfc3339_ns(wall.max(0) as u64)));
        for (i, column) in columns.iter().enumerate() {
            let name = column.name;
            let j = match (name, row.value(i)?) {
                (_, Cell::Null) => continue,
                ("argv", Cell::Text(t)) => {
                    let argv: Vec<String> = serde_json::from_str(t).unwrap_or_default();
                    if argv.iter().any(|a| rawtext::has_raw(a)) {
                        obj.insert(
                            "argv_hex".into(),
                            json!(argv.iter().map(|a| rawtext::hex(a)).collect::<Vec<_>>()),
                        );
                        json!(argv.iter().map(|a| rawtext::escaped(a)).collect::<Vec<_>>())
                    } else {
                        serde_json::from_str(t).unwrap_or_else(|_| json!(t))
                    }
                }
                // Bytes that were not UTF-8: shown `\xNN`, exact in `NAME_hex`.
                (_, Cell::Text(t)) if rawtext::has_raw(t) => {
                    obj.insert(format!("{name}_hex"), json!(rawtext::hex(t)));
                    json!(rawtext::escaped(t))
                }
                (_, Cell::Integer(b)) if column.ty == ColumnType::Bool => json!(b != 0),
                (_, Cell::Integer(x)) => json!(x),
                (_, Cell::Real(x)) => json!(x),
                (_, Cell::Text(t)) => json!(t),
                (_, Cell::Blob(b)) => json!(String::from_utf8_lossy(b)),
            };
            obj.insert(name.to_owned(), j);
        }
        if let Ok(Some(process)) = row.process_id() {
            if let Some(id) = identities.get(&process) {
                insert_identity(&mut obj, id);
            }
            if let Some(a) = agents.get(&process) {
                obj.insert("agent".into(), json!(a));
            }
        }
        write_line(out, &Json::Object(obj))?;
        n += 1;
        Ok(())
    })?;
    for (_, r) in records {
        write_line(out, &r)?;
        n += 1;
    }
    out.flush()?;
    Ok(n)
}
