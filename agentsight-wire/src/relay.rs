//! The loopback relay. (Being written: see the brief.)
