//! Repeated text of event rows stored once: `strings(id, s)` and a bounded
//! map from text to id in the writer. The map has two generations: a string
//! found in the older one moves to the current one, and when the current one
//! is full the older one is dropped. A string used again after it was dropped
//! gets a second `strings` row (harmless: readers only follow ids), so memory
//! stays bounded however many distinct paths a recording sees, and there is
//! no UNIQUE index (which would store every string twice).
//!
//! A long string with a `/` is stored as its directory part (up to and
//! including the last `/`, itself a plain `strings` row, shared) and the rest
//! (`prefix` = the directory's id): the distinct files of one directory cost
//! their names, not their whole paths. The text is always `prefix`'s text
//! followed by `s`, exactly (no normalisation).

use std::collections::HashMap;

use rusqlite::Statement;

/// Entries per generation…
const GEN_ENTRIES: usize = 8_192;
/// …and bytes of text per generation.
const GEN_BYTES: usize = 1 << 20;

pub(crate) const INSERT_STRING: &str = "INSERT INTO strings (s, prefix) VALUES (?1, ?2)";

/// Strings at least this long are split at their last `/`…
const SPLIT_MIN: usize = 24;
/// …when the directory part is at least this long.
const DIR_MIN: usize = 8;

/// Where `s` splits into a directory part and the rest, if it does.
fn split_at(s: &str) -> Option<usize> {
    if s.len() < SPLIT_MIN {
        return None;
    }
    let i = s.rfind('/')? + 1;
    (i >= DIR_MIN && i < s.len()).then_some(i)
}

#[derive(Default)]
pub(crate) struct Interner {
    cur: HashMap<Box<str>, i64>,
    old: HashMap<Box<str>, i64>,
    cur_bytes: usize,
    /// `strings` rows written (for the summary and tests).
    pub(crate) stored: u64,
}

impl Interner {
    /// The id of `s`, storing it with `insert` (`INSERT_STRING`) when the
    /// map does not have it.
    pub(crate) fn id(&mut self, insert: &mut Statement, s: &str) -> rusqlite::Result<i64> {
        if let Some(&id) = self.cur.get(s) {
            return Ok(id);
        }
        if let Some((k, id)) = self.old.remove_entry(s) {
            self.put(k, id);
            return Ok(id);
        }
        let id = match split_at(s) {
            Some(i) => {
                let dir = self.plain_id(insert, &s[..i])?;
                insert.insert(rusqlite::params![&s[i..], dir])?
            }
            None => insert.insert(rusqlite::params![s, None::<i64>])?,
        };
        self.stored += 1;
        self.put(s.into(), id);
        Ok(id)
    }

    /// The id of a directory part: a row with the whole text (ends in `/`,
    /// so `id` never splits it either).
    fn plain_id(&mut self, insert: &mut Statement, dir: &str) -> rusqlite::Result<i64> {
        debug_assert!(dir.ends_with('/'));
        self.id(insert, dir)
    }

    fn put(&mut self, k: Box<str>, id: i64) {
        if self.cur.len() >= GEN_ENTRIES || self.cur_bytes >= GEN_BYTES {
            self.old = std::mem::take(&mut self.cur);
            self.cur_bytes = 0;
        }
        self.cur_bytes += k.len();
        self.cur.insert(k, id);
    }

    /// Forgets every id: after a transaction that did not commit, ids it
    /// handed out may name no row.
    pub(crate) fn clear(&mut self) {
        self.cur = HashMap::new();
        self.old = HashMap::new();
        self.cur_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_strings_share_a_row_and_memory_stays_bounded() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE strings (id INTEGER PRIMARY KEY, s TEXT NOT NULL, prefix INTEGER)",
        )
        .unwrap();
        let mut ins = c.prepare(INSERT_STRING).unwrap();
        let mut i = Interner::default();
        let a = i.id(&mut ins, "/usr/lib/libc.so.6").unwrap();
        assert_eq!(i.id(&mut ins, "/usr/lib/libc.so.6").unwrap(), a);
        // Many distinct strings: a hot one, used now and then, keeps its id.
        for n in 0..4 * GEN_ENTRIES {
            i.id(&mut ins, &format!("/tmp/f{n}")).unwrap();
            if n % 1000 == 0 {
                assert_eq!(i.id(&mut ins, "/usr/lib/libc.so.6").unwrap(), a);
            }
            assert!(i.cur.len() <= GEN_ENTRIES && i.old.len() <= GEN_ENTRIES);
        }
        assert_eq!(i.stored, 1 + 4 * GEN_ENTRIES as u64);
        // A cold string used again after it was dropped gets a new row.
        let again = i.id(&mut ins, "/tmp/f0").unwrap();
        assert_eq!(i.stored, 2 + 4 * GEN_ENTRIES as u64);
        let s: String = c
            .query_row("SELECT s FROM strings WHERE id = ?1", [again], |r| r.get(0))
            .unwrap();
        assert_eq!(s, "/tmp/f0");
    }

    #[test]
    fn long_paths_share_their_directory() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE strings (id INTEGER PRIMARY KEY, s TEXT NOT NULL, prefix INTEGER)",
        )
        .unwrap();
        let mut ins = c.prepare(INSERT_STRING).unwrap();
        let mut i = Interner::default();
        let texts = [
            "/home/dev/proj/node_modules/left-pad/index.js",
            "/home/dev/proj/node_modules/left-pad/package.json",
            "/home/dev/proj/node_modules/left-pad/",
            "[\"sh\",\"-c\",\"cat /etc/hosts\"]",
            "/short/x",
            "relative/dir/but/long/enough.txt",
        ];
        let ids: Vec<i64> = texts.iter().map(|t| i.id(&mut ins, t).unwrap()).collect();
        for (t, id) in texts.iter().zip(&ids) {
            let back: String = c
                .query_row(
                    "SELECT COALESCE((SELECT q.s FROM strings q WHERE q.id = p.prefix), '') || p.s
                     FROM strings p WHERE p.id = ?1",
                    [id],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(&back, t);
        }
        // Two files of one directory: the directory is stored once, and as
        // a text of its own it is that same row.
        let prefixes: Vec<Option<i64>> = ids[..2]
            .iter()
            .map(|id| {
                c.query_row("SELECT prefix FROM strings WHERE id = ?1", [id], |r| {
                    r.get(0)
                })
                .unwrap()
            })
            .collect();
        assert_eq!(prefixes, vec![Some(ids[2]), Some(ids[2])]);
    }
}
