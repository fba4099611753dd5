//! Which knob points which agent at the relay, and where its traffic really goes.
