//! The `agentsight` command: a thin CLI over the library (argument parsing,
//! printing, exit statuses). Everything it shows, the library computes.

mod cli;

fn main() {
    std::process::exit(cli::main());
}
