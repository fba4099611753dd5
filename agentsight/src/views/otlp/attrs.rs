//! Attribute values, span ids and the few OTLP enums, as the proto types
//! want them.

use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, any_value::Value};
use sha2::{Digest, Sha256};

/// Attributes of one span or event, in the order they are set.
#[derive(Default)]
pub struct Attrs(pub Vec<KeyValue>);

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        key_strindex: 0,
    }
}

impl Attrs {
    pub fn str(&mut self, key: &str, v: impl Into<String>) -> &mut Self {
        self.0.push(kv(key, Value::StringValue(v.into())));
        self
    }

    pub fn opt_str(&mut self, key: &str, v: Option<&str>) -> &mut Self {
        if let Some(v) = v {
            self.str(key, v);
        }
        self
    }

    pub fn int(&mut self, key: &str, v: i64) -> &mut Self {
        self.0.push(kv(key, Value::IntValue(v)));
        self
    }

    /// A count (saturated into OTLP's signed 64-bit integer).
    pub fn count(&mut self, key: &str, v: u64) -> &mut Self {
        self.int(key, i64::try_from(v).unwrap_or(i64::MAX))
    }

    pub fn bool(&mut self, key: &str, v: bool) -> &mut Self {
        self.0.push(kv(key, Value::BoolValue(v)));
        self
    }

    pub fn strs(&mut self, key: &str, v: &[String]) -> &mut Self {
        let values = v
            .iter()
            .map(|s| AnyValue {
                value: Some(Value::StringValue(s.clone())),
            })
            .collect();
        self.0
            .push(kv(key, Value::ArrayValue(ArrayValue { values })));
        self
    }
}

/// 16 bytes of SHA-256 over `seed` and `parts`: a trace id that the same
/// capture always gives the same session.
pub fn trace_id(seed: &[u8; 32], parts: &[&str]) -> [u8; 16] {
    let d = digest(seed, parts);
    let mut id = [0u8; 16];
    id.copy_from_slice(&d[..16]);
    if id == [0; 16] {
        id[15] = 1; // all zero is "no id" in OTLP
    }
    id
}

/// 8 bytes of SHA-256 over the trace id and the span's stable key.
pub fn span_id(trace: &[u8; 16], key: &str) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(trace);
    h.update(key.as_bytes());
    let d: [u8; 32] = h.finalize().into();
    let mut id = d[..8].to_vec();
    if id.iter().all(|b| *b == 0) {
        id[7] = 1;
    }
    id
}

fn digest(seed: &[u8; 32], parts: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(seed);
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize().into()
}

/// Milliseconds since the epoch (transcripts) as OTLP nanoseconds.
pub fn ms_to_ns(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0).saturating_mul(1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_never_zero() {
        let seed = [7u8; 32];
        let t = trace_id(&seed, &["session", "claude", "abc"]);
        assert_eq!(t, trace_id(&seed, &["session", "claude", "abc"]));
        assert_ne!(t, trace_id(&seed, &["session", "claude", "abd"]));
        // Parts are separated: ("ab", "c") is not ("a", "bc").
        assert_ne!(trace_id(&seed, &["ab", "c"]), trace_id(&seed, &["a", "bc"]));
        let s = span_id(&t, "tool:0");
        assert_eq!(s.len(), 8);
        assert_eq!(s, span_id(&t, "tool:0"));
        assert_ne!(s, span_id(&t, "tool:1"));
        assert_eq!(ms_to_ns(1_700_000_000_123), 1_700_000_000_123_000_000);
        assert_eq!(ms_to_ns(-5), 0);
    }
}
