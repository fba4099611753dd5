//! Cursor's transcript lines as serde reads them, declared once for the
//! full parser (`super`) and the tail reader (`super::live`). Lines and
//! messages are the same for both; only the block differs: the parser keeps
//! a block's whole text and its tool call, the tail reader a text prefix
//! (never a multi-MB copy) and the shell call's working directory.

use serde::Deserialize;
use serde_json::Value;

use crate::de::{Content, LStr, ObjOr, Prefix};

/// One JSONL line, generic over the block type `B` of its message.
#[derive(Deserialize)]
#[serde(default, bound = "B: serde::de::DeserializeOwned")]
pub(crate) struct Line<B> {
    pub role: LStr,
    #[serde(rename = "type")]
    pub kind: LStr,
    pub message: Option<ObjOr<Message<B>>>,
    pub status: LStr,
    pub error: LStr,
}

impl<B> Default for Line<B> {
    fn default() -> Self {
        Line {
            role: LStr::default(),
            kind: LStr::default(),
            message: None,
            status: LStr::default(),
            error: LStr::default(),
        }
    }
}

#[derive(Deserialize)]
#[serde(default, bound = "B: serde::de::DeserializeOwned")]
pub(crate) struct Message<B> {
    pub content: Content<B>,
}

impl<B> Default for Message<B> {
    fn default() -> Self {
        Message {
            content: Content::default(),
        }
    }
}

/// A block as the full parser reads it.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct Block {
    #[serde(rename = "type")]
    pub kind: LStr,
    pub text: LStr,
    pub name: LStr,
    pub id: LStr,
    pub input: Option<Value>,
}

/// A block as the tail reader reads it: the text capped, only the shell
/// call's working directory of the input.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct TailBlock {
    #[serde(rename = "type")]
    pub kind: LStr,
    pub text: Option<Prefix>,
    pub input: Option<ObjOr<ShellInput>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct ShellInput {
    pub working_directory: LStr,
}
