//! System evidence: the kernel programs' records, from loading to decoding.

pub mod btf;
pub mod decode;
pub mod loader;
pub mod reader;
pub mod syscalls;
