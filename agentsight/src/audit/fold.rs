//! Folding findings: identical findings (same rule, process, access and
//! target) become one with a count; beyond [`FOLD_EXAMPLES`] distinct
//! findings of one rule, access, path pattern (or destination, executable)
//! and tool call, the rest are only counted and the group is reported as one
//! folded finding with its first examples. Memory stays bounded by the
//! groups, not by the findings: a finding that is not one of the first
//! examples is a hash in a set.

use std::{
    collections::{HashMap, HashSet},
    hash::{Hash, Hasher},
};

use super::{
    context::Ev,
    report::{Access, Finding, Folded},
};

/// Distinct findings of a group reported in full; a group with more is
/// folded into one finding that carries these as examples.
pub const FOLD_EXAMPLES: usize = 10;
/// `evidence.event_ids` keeps the first this many ids (`count` has them all).
pub const MAX_EVENT_IDS: usize = 100;
/// Groups of one rule, access and tool call; findings with a pattern beyond
/// these go to one last group (pattern `/**` for paths, `*` otherwise), so
/// output and memory stay bounded when every finding has its own directory.
pub const MAX_GROUPS: usize = 200;

/// What a kept finding still needs once every event has been read: its
/// process chain as of `at`, and a non-blocking connect's TCP outcome.
#[derive(Debug, Clone)]
pub struct Pending {
    pub finding: Finding,
    pub process: Option<(i64, Option<i64>)>,
    pub tcp: Option<TcpRef>,
}

#[derive(Debug, Clone)]
pub struct TcpRef {
    pub process_id: i64,
    pub addr: String,
    pub port: i64,
    pub mono_ns: i64,
}

struct Group {
    examples: Vec<Pending>,
    by_key: HashMap<String, usize>,
    /// Hashes of the distinct findings beyond the examples.
    more: HashSet<u64>,
    processes: HashSet<i64>,
    count: u64,
    pattern: String,
    pattern_is_path: bool,
}

pub struct Collector {
    groups: Vec<Group>,
    index: HashMap<String, usize>,
    /// Groups per rule, access and tool call.
    families: HashMap<String, usize>,
    max_groups: usize,
    fold_after: usize,
    max_ids: usize,
}

/// Joins key parts with a separator no path or argv holds.
fn join(parts: &[&str]) -> String {
    parts.join("\u{1f}")
}

/// The identity of a finding for folding identical ones (as before groups:
/// rule, process, access and target; findings without an event differ by
/// what they say).
fn finding_key(f: &Finding, process_id: Option<i64>, ev: Option<&Ev>) -> String {
    let target = [&f.path, &f.addr, &f.query]
        .iter()
        .filter_map(|s| s.as_deref())
        .collect::<Vec<_>>()
        .join("|")
        + &f.port.map(|p| format!(":{p}")).unwrap_or_default()
        + &f.argv.as_ref().map(|a| a.join(" ")).unwrap_or_default()
        + "|"
        + f.kind.as_str()
        + &ev.map_or_else(|| format!("|{}", f.message), |_| String::new());
    join(&[
        &f.rule,
        &process_id.map(|p| p.to_string()).unwrap_or_default(),
        f.access.as_ref().map_or("", Access::as_str),
        &target,
    ])
}

/// (pattern, whether it is a path glob): the parent directory for file
/// findings, the executable for execs, the destination or name otherwise.
fn pattern_of(f: &Finding) -> (String, bool) {
    if f.access == Some(Access::Exec) {
        let exe = f.path.clone().or_else(|| f.argv.as_ref()?.first().cloned());
        return (exe.unwrap_or_default(), false);
    }
    if let Some(p) = f.path.as_deref().filter(|p| p.starts_with('/')) {
        let parent = p.rsplit_once('/').map_or("", |(d, _)| d);
        return (format!("{parent}/*"), true);
    }
    if let Some(a) = &f.addr {
        return (format!("{a}:{}", f.port.unwrap_or(0)), false);
    }
    if let Some(q) = &f.query {
        return (q.clone(), false);
    }
    let first = f.argv.as_ref().and_then(|a| a.first().cloned());
    (first.unwrap_or_else(|| f.kind.as_str().to_string()), false)
}

/// The rule, access, tool call and container a group belongs to (a
/// container's `/etc/*` is never folded with the host's).
fn family_key(f: &Finding, ev: Option<&Ev>) -> String {
    let session = f
        .session
        .as_ref()
        .map(|s| {
            format!(
                "{}#{}#{}",
                s.session_id,
                s.tool_index.map(|i| i.to_string()).unwrap_or_default(),
                s.role
            )
        })
        .unwrap_or_default();
    let own = ev.map_or_else(|| format!("{}|{}", f.kind, f.message), |_| String::new());
    let container = f.container.as_ref().map_or("", |c| c.id.as_str());
    join(&[
        &f.rule,
        f.access.as_ref().map_or("", Access::as_str),
        &session,
        &own,
        container,
    ])
}

fn hash_of(s: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

impl Collector {
    /// `folding = false` keeps every finding and every event id (the
    /// behaviour before groups, for the benchmark's baseline).
    pub fn new(folding: bool) -> Self {
        Self {
            groups: Vec::new(),
            index: HashMap::new(),
            families: HashMap::new(),
            max_groups: if folding { MAX_GROUPS } else { usize::MAX },
            fold_after: if folding { FOLD_EXAMPLES } else { usize::MAX },
            max_ids: if folding { MAX_EVENT_IDS } else { usize::MAX },
        }
    }

    /// Adds a finding: folded into an identical earlier one, kept as one of
    /// its group's first examples, or only counted in its group.
    pub fn add(&mut self, p: Pending, ev: Option<&Ev>) {
        let f = &p.finding;
        let process_id = p
            .process
            .map(|(id, _)| id)
            .or(f.process.as_ref().map(|x| x.process_id));
        let key = finding_key(f, process_id, ev);
        let (mut pattern, pattern_is_path) = pattern_of(f);
        let family = family_key(f, ev);
        let n = ev.map(|e| e.repeat.unwrap_or(1).max(1) as u64).unwrap_or(1);
        let gi = self.group_of(family, &mut pattern, pattern_is_path);
        let g = &mut self.groups[gi];
        g.count += n;
        if let Some(id) = process_id {
            g.processes.insert(id);
        }
        if let Some(&i) = g.by_key.get(&key) {
            let e = &mut g.examples[i].finding.evidence;
            e.count += n;
            if let Some(ev) = ev
                && e.event_ids.len() < self.max_ids
            {
                e.event_ids.push(ev.id);
            }
            return;
        }
        if g.examples.len() < self.fold_after {
            let mut p = p;
            p.finding.evidence.count = n;
            g.by_key.insert(key, g.examples.len());
            g.examples.push(p);
        } else {
            g.more.insert(hash_of(&key));
        }
    }

    /// The group of `pattern` in `family`, created if new; past
    /// [`MAX_GROUPS`] in the family, its catch-all group.
    fn group_of(&mut self, family: String, pattern: &mut String, is_path: bool) -> usize {
        let gkey = join(&[&family, pattern]);
        if let Some(&i) = self.index.get(&gkey) {
            return i;
        }
        let n = self.families.entry(family.clone()).or_insert(0);
        let gkey = if *n >= self.max_groups {
            *pattern = if is_path { "/**" } else { "*" }.to_string();
            let rest = join(&[&family, "\u{0}rest"]);
            if let Some(&i) = self.index.get(&rest) {
                return i;
            }
            rest
        } else {
            *n += 1;
            gkey
        };
        self.groups.push(Group {
            examples: Vec::new(),
            by_key: HashMap::new(),
            more: HashSet::new(),
            processes: HashSet::new(),
            count: 0,
            pattern: pattern.clone(),
            pattern_is_path: is_path,
        });
        self.index.insert(gkey, self.groups.len() - 1);
        self.groups.len() - 1
    }

    /// Completes every kept finding with `complete`, then reports each group
    /// as its findings, or as one folded finding when it has more than the
    /// examples.
    pub fn finish<E>(
        self,
        mut complete: impl FnMut(&mut Pending) -> Result<(), E>,
    ) -> Result<Vec<Finding>, E> {
        let mut out = Vec::new();
        for mut g in self.groups {
            for p in &mut g.examples {
                complete(p)?;
            }
            if g.more.is_empty() {
                out.extend(g.examples.into_iter().map(|p| p.finding));
                continue;
            }
            if let Some(f) = folded(g) {
                out.push(f);
            }
        }
        Ok(out)
    }
}

/// One finding standing for a group: the first example's fields, the
/// pattern as its path (for file findings), the group's counts.
fn folded(g: Group) -> Option<Finding> {
    let examples: Vec<Finding> = g.examples.into_iter().map(|p| p.finding).collect();
    let findings = (examples.len() + g.more.len()) as u64;
    let mut f = examples.first()?.clone();
    f.message = format!(
        "{}, and {} more matching {} ({} occurrence(s) in {} process(es))",
        f.message,
        findings - 1,
        g.pattern,
        g.count,
        g.processes.len()
    );
    if g.pattern_is_path {
        f.path = Some(g.pattern.clone());
    }
    f.evidence.count = g.count;
    f.evidence.event_ids = examples
        .iter()
        .flat_map(|e| e.evidence.event_ids.first().copied())
        .collect();
    f.folded = Some(Folded {
        pattern: g.pattern,
        findings,
        processes: g.processes.len() as u64,
        examples,
    });
    Some(f)
}
