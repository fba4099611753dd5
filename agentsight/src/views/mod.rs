//! Views over a capture opened read-only: the summary (`show`) and the event
//! stream (`export`). They only read; they never modify the file.

pub mod export;
pub mod show;
