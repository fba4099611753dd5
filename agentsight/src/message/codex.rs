//! The codex driver (being written: see docs/messaging.md).

use super::{MessageError, Options, Progress, Runtime, Spawner, Target};

/// Starts the provider and returns once it acknowledged the message.
pub fn start(
    _target: &Target,
    _text: &str,
    _spawner: &Spawner,
    _opts: &Options,
    _progress: &mut dyn FnMut(Progress),
) -> Result<Box<dyn Runtime>, MessageError> {
    Err(MessageError::Failed(
        "the codex messaging driver is not built yet".into(),
    ))
}
