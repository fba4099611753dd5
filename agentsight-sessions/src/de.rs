//! Lenient serde building blocks shared by the parsers.
//!
//! Transcripts mix shapes for one field (a string or an array of blocks, an
//! object or an error string). These types accept every shape without
//! failing the whole line, and avoid buffering large values nobody reads.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Longest prefix kept by [`Prefix`]: enough for error messages and the
/// `agentId: …` trailer while never copying multi-MB tool outputs.
pub const PREFIX_BYTES: usize = 4096;

/// Text flattened from a string or from an array of `{text}` blocks, keeping
/// at most [`PREFIX_BYTES`] (tool outputs can be many MB).
#[derive(Debug, Default, Clone)]
pub struct Prefix(pub String);

impl<'de> Deserialize<'de> for Prefix {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Prefix;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("text")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Prefix, E> {
                let mut out = String::new();
                push_capped(&mut out, s);
                Ok(Prefix(out))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Prefix, A::Error> {
                let mut out = String::new();
                while let Some(b) = seq.next_element::<TextBlock>()? {
                    if let Some(t) = b.text {
                        if !out.is_empty() {
                            push_capped(&mut out, "\n");
                        }
                        push_capped(&mut out, &t.0);
                    }
                }
                Ok(Prefix(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Prefix, A::Error> {
                let mut out = String::new();
                while let Some(k) = m.next_key::<KeyStr>()? {
                    if k.0 == "text" || k.0 == "output" || k.0 == "message" || k.0 == "error" {
                        let t: Prefix = m.next_value()?;
                        push_capped(&mut out, &t.0);
                    } else {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Prefix(out))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Prefix, E> {
                Ok(Prefix::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<Prefix, E> {
                Ok(Prefix::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<Prefix, E> {
                Ok(Prefix::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Prefix, E> {
                Ok(Prefix::default())
            }
            fn visit_unit<E>(self) -> Result<Prefix, E> {
                Ok(Prefix::default())
            }
        }
        d.deserialize_any(V)
    }
}

fn push_capped(out: &mut String, s: &str) {
    let room = PREFIX_BYTES.saturating_sub(out.len());
    if room == 0 {
        return;
    }
    if s.len() <= room {
        out.push_str(s);
    } else {
        let mut cut = room;
        while cut > 0 && !s.is_char_boundary(cut) {
            cut -= 1;
        }
        out.push_str(&s[..cut]);
    }
}

#[derive(Deserialize)]
struct TextBlock {
    #[serde(default)]
    text: Option<Prefix>,
}

/// A map key, borrowed when possible.
struct KeyStr(String);
impl<'de> Deserialize<'de> for KeyStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = KeyStr;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("key")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<KeyStr, E> {
                Ok(KeyStr(s.to_string()))
            }
        }
        d.deserialize_str(V)
    }
}

/// An object of type `T` when the value is an object; any other shape (a
/// string error message, an array, null) is kept as a text prefix.
#[derive(Debug, Clone)]
pub enum ObjOr<T> {
    Obj(T),
    Other(String),
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for ObjOr<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: DeserializeOwned> Visitor<'de> for V<T> {
            type Value = ObjOr<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<ObjOr<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(m)).map(ObjOr::Obj)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<ObjOr<T>, E> {
                let mut out = String::new();
                push_capped(&mut out, s);
                Ok(ObjOr::Other(out))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ObjOr<T>, A::Error> {
                let p = Prefix::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(ObjOr::Other(p.0))
            }
            fn visit_bool<E>(self, _: bool) -> Result<ObjOr<T>, E> {
                Ok(ObjOr::Other(String::new()))
            }
            fn visit_i64<E>(self, _: i64) -> Result<ObjOr<T>, E> {
                Ok(ObjOr::Other(String::new()))
            }
            fn visit_u64<E>(self, _: u64) -> Result<ObjOr<T>, E> {
                Ok(ObjOr::Other(String::new()))
            }
            fn visit_f64<E>(self, _: f64) -> Result<ObjOr<T>, E> {
                Ok(ObjOr::Other(String::new()))
            }
            fn visit_unit<E>(self) -> Result<ObjOr<T>, E> {
                Ok(ObjOr::Other(String::new()))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl<T> Default for ObjOr<T> {
    fn default() -> Self {
        ObjOr::Other(String::new())
    }
}

impl<T> ObjOr<T> {
    pub fn obj(&self) -> Option<&T> {
        match self {
            ObjOr::Obj(t) => Some(t),
            ObjOr::Other(_) => None,
        }
    }
}

/// A field this reader does not read: its value is skipped as an unknown
/// key's would be (never buffered).
#[derive(Debug, Default, Clone, Copy)]
pub struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| Skip)
    }
}

/// A string field that tolerates other JSON types (kept as `None`).
#[derive(Debug, Default, Clone)]
pub struct LStr(pub Option<String>);

impl<'de> Deserialize<'de> for LStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LStr;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<LStr, E> {
                Ok(LStr(Some(s.to_string())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<LStr, E> {
                Ok(LStr(Some(s)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LStr, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(LStr(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<LStr, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(LStr(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<LStr, E> {
                Ok(LStr(None))
            }
            fn visit_i64<E>(self, v: i64) -> Result<LStr, E> {
                Ok(LStr(Some(v.to_string())))
            }
            fn visit_u64<E>(self, v: u64) -> Result<LStr, E> {
                Ok(LStr(Some(v.to_string())))
            }
            fn visit_f64<E>(self, _: f64) -> Result<LStr, E> {
                Ok(LStr(None))
            }
            fn visit_unit<E>(self) -> Result<LStr, E> {
                Ok(LStr(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl LStr {
    pub fn as_deref(&self) -> Option<&str> {
        self.0.as_deref()
    }
    pub fn take(&mut self) -> Option<String> {
        self.0.take()
    }
}

/// A non-negative counter. null (absent) is 0; a value that is not an
/// integer in 0..=[`MAX_COUNT`] (`-5`, `1.5`, `1e300`,
/// `99999999999999999999`, `"abc"`, `true`, an array…) is 0 too, and
/// counted as a bad value ([`take_bad_counts`]) instead of corrupting totals.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Count(pub u64);

/// The largest count accepted: 2^53, the largest integer a JSON number (an
/// f64 in the writers' JavaScript) holds exactly. No real token count is near.
pub const MAX_COUNT: u64 = 1 << 53;

thread_local! {
    static BAD_COUNTS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn bad_count() -> Count {
    BAD_COUNTS.with(|c| c.set(c.get() + 1));
    Count(0)
}

fn checked_count(v: u64) -> Count {
    if v <= MAX_COUNT {
        Count(v)
    } else {
        bad_count()
    }
}

/// Bad count values seen on this thread since the last call.
pub fn take_bad_counts() -> u64 {
    BAD_COUNTS.with(|c| c.replace(0))
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("number")
            }
            fn visit_u64<E>(self, v: u64) -> Result<Count, E> {
                Ok(checked_count(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Count, E> {
                Ok(u64::try_from(v).map_or_else(|_| bad_count(), checked_count))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Count, E> {
                // An integral float in range (`5.0`) is that integer.
                if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= MAX_COUNT as f64 {
                    Ok(Count(v as u64))
                } else {
                    Ok(bad_count())
                }
            }
            // No agent writes a count as a string: `"123"` is a damaged or
            // forged value, counted, never summed.
            fn visit_str<E>(self, _: &str) -> Result<Count, E> {
                Ok(bad_count())
            }
            fn visit_unit<E>(self) -> Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Count, E> {
                Ok(bad_count())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(bad_count())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Count, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(bad_count())
            }
        }
        d.deserialize_any(V)
    }
}

/// A boolean that tolerates other types (→ `None`).
#[derive(Debug, Default, Clone, Copy)]
pub struct LBool(pub Option<bool>);

impl<'de> Deserialize<'de> for LBool {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = IgnoredOr::<bool>::deserialize(d)?;
        Ok(LBool(v.0))
    }
}

/// `Some(T)` when the value deserializes as `T`'s primitive; other shapes are
/// skipped. Only used for primitives (bool) where buffering is cheap.
struct IgnoredOr<T>(Option<T>);
impl<'de> Deserialize<'de> for IgnoredOr<bool> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IgnoredOr<bool>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("bool")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(IgnoredOr(Some(v)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(IgnoredOr(match s {
                    "true" => Some(true),
                    "false" => Some(false),
                    _ => None,
                }))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(IgnoredOr(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(IgnoredOr(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(IgnoredOr(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(IgnoredOr(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(IgnoredOr(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(IgnoredOr(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// Message content: a plain string or an array of blocks `B`; other shapes
/// become `Blocks(vec![])`.
#[derive(Debug, Clone)]
pub enum Content<B> {
    Text(String),
    Blocks(Vec<B>),
}

thread_local! {
    static BAD_CONTENTS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A message content that is neither text nor a list of blocks (a number,
/// a boolean, an object): read as empty, and counted so the record is not
/// lost silently ([`take_bad_contents`]).
fn bad_content<B>() -> Content<B> {
    BAD_CONTENTS.with(|c| c.set(c.get() + 1));
    Content::default()
}

/// Bad message contents seen on this thread since the last call.
pub fn take_bad_contents() -> u64 {
    BAD_CONTENTS.with(|c| c.replace(0))
}

impl<B> Default for Content<B> {
    fn default() -> Self {
        Content::Blocks(Vec::new())
    }
}

impl<'de, B: DeserializeOwned> Deserialize<'de> for Content<B> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<B>(std::marker::PhantomData<B>);
        impl<'de, B: DeserializeOwned> Visitor<'de> for V<B> {
            type Value = Content<B>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("string or array")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Content<B>, E> {
                Ok(Content::Text(s.to_string()))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Content<B>, E> {
                Ok(Content::Text(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content<B>, A::Error> {
                let mut v = Vec::new();
                // A block of an unexpected shape (e.g. a bare string) is skipped.
                while let Some(b) = seq.next_element::<ObjOr<B>>()? {
                    if let ObjOr::Obj(b) = b {
                        v.push(b);
                    }
                }
                Ok(Content::Blocks(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Content<B>, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(bad_content())
            }
            fn visit_unit<E>(self) -> Result<Content<B>, E> {
                Ok(Content::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<Content<B>, E> {
                Ok(bad_content())
            }
            fn visit_i64<E>(self, _: i64) -> Result<Content<B>, E> {
                Ok(bad_content())
            }
            fn visit_u64<E>(self, _: u64) -> Result<Content<B>, E> {
                Ok(bad_content())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Content<B>, E> {
                Ok(bad_content())
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_out_of_range_or_not_integers_are_zero_and_counted() {
        take_bad_counts();
        let parse = |s: &str| serde_json::from_str::<Count>(s).unwrap().0;
        assert_eq!(parse("42"), 42);
        assert_eq!(parse("5.0"), 5);
        assert_eq!(parse("null"), 0);
        assert_eq!(parse("9007199254740992"), MAX_COUNT);
        assert_eq!(take_bad_counts(), 0);
        for bad in [
            "1e300",
            "99999999999999999999",
            "18446744073709551615",
            "9007199254740993",
            "-5",
            "1.5",
            "-0.5",
            "\"abc\"",
            "\"17\"",
            "true",
            "[1]",
            "{\"a\":1}",
        ] {
            assert_eq!(parse(bad), 0, "{bad}");
        }
        assert_eq!(take_bad_counts(), 12);
        assert_eq!(take_bad_counts(), 0);
    }

    #[test]
    fn contents_of_another_shape_are_empty_and_counted() {
        take_bad_contents();
        let parse = |s: &str| serde_json::from_str::<Content<serde_json::Value>>(s).unwrap();
        assert!(matches!(parse("\"hi\""), Content::Text(t) if t == "hi"));
        assert!(matches!(parse("[{\"a\":1}]"), Content::Blocks(b) if b.len() == 1));
        assert!(matches!(parse("null"), Content::Blocks(b) if b.is_empty()));
        assert_eq!(take_bad_contents(), 0);
        for bad in ["12345", "-1", "1.5", "true", "{\"text\":\"x\"}"] {
            assert!(
                matches!(parse(bad), Content::Blocks(b) if b.is_empty()),
                "{bad}"
            );
        }
        assert_eq!(take_bad_contents(), 5);
    }
}
