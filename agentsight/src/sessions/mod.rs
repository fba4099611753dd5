//! Native sessions: discovery and parsing of agent transcripts into one model.
