//! Closed vocabularies of the reports (`correlate`, `audit`): enums whose
//! JSON form and text form are one word each, declared once.

/// Declares a vocabulary: an enum that serializes as, prints as and
/// `as_str`s to the given words (one list, so JSON and text cannot drift
/// apart). `Display` pads, so `{:<7}` aligns like a `&str`.
macro_rules! vocabulary {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $word:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// Every word of the vocabulary, in declaration order.
            #[allow(dead_code)]
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word),+
                }
            }

            /// The variant whose word is `word`; `None` for a word this
            /// version does not know (read from a capture: input).
            #[allow(dead_code)]
            pub fn from_word(word: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == word)
            }
        }

        $crate::vocabulary::as_word!($name);
    };
}
pub(crate) use vocabulary;

/// `Display` and `Serialize` of a type as the word its `as_str` gives (for
/// vocabularies with an open variant, such as an event kind as read).
macro_rules! as_word {
    ($($name:ident),+) => {$(
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    )+};
}
pub(crate) use as_word;
