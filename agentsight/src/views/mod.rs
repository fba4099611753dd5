//! Views over captures opened read-only: the summary (`show`), the event
//! stream (`export`), which capture to read (`select`), and which session a
//! live process belongs to (`pid`). They only read; they never modify a file.

pub mod export;
pub mod perfetto;
pub mod pid;
pub mod run;
pub mod select;
pub mod show;
